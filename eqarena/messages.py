"""Error messages of a bounded size: one line, long values cut with their length noted.

An error names the bad value so the user can find it, but a 5 MB cell must not come back whole on
stderr or in `runs.message`: a quoted value longer than VALUE_LIMIT characters keeps its first
VALUE_LIMIT characters and says how long it was, and the whole message is one line of at most
LINE_LIMIT characters. Control characters in it are written as escapes (`terminal_safe`), as in
everything the commands print.
"""

from __future__ import annotations

import re

VALUE_LIMIT = 200
LINE_LIMIT = 1000

# A quoted value (as repr() writes it) longer than VALUE_LIMIT characters.
_LONG_QUOTED = re.compile(r"""(['"])([^'"\n]{%d,})\1""" % (VALUE_LIMIT + 1))


# Control characters (C0 but newline and tab, DEL, C1): in a name or a text they could move the cursor,
# clear, recolour or retitle the terminal that prints them.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """`text` with each control character but newline and tab written as its escape (ESC as `\\x1b`)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def shortened(value: str, limit: int = VALUE_LIMIT) -> str:
    """`value` itself when short, else its first `limit` characters, an ellipsis and its length."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}… ({len(value):,} characters)"


def bounded(message: object) -> str:
    """`message` as one line (newlines and runs of spaces become one space), every long quoted value
    shortened, and the whole line cut at LINE_LIMIT characters."""
    text = terminal_safe(" ".join(str(message).split()))
    text = _LONG_QUOTED.sub(_shortened_quoted, text)
    return shortened(text, LINE_LIMIT)


def _shortened_quoted(match: re.Match) -> str:
    quote, value = match.group(1), match.group(2)
    return f"{quote}{value[:VALUE_LIMIT]}…{quote} ({len(value):,} characters)"


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st."""
    n = int(n)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"

"""The directory the HTML report is written into, checked before any work."""

from __future__ import annotations

import os
from pathlib import Path

from eqarena.exceptions import EqarenaError


class ReportDirError(EqarenaError, OSError):
    """The report's directory cannot be made or written, or the report cannot be written into it."""


def report_dir(out_dir: str | Path) -> Path:
    """`out_dir`, created if needed; ReportDirError (one line) if a file is in the way or it cannot be
    made or written."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ReportDirError(f"report directory {out} is a file; pass --out a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportDirError(f"cannot create the report directory {out}: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ReportDirError(f"cannot write into the report directory {out}: permission denied")
    return out


def write_whole(path: Path, text: str, run_id: str, what: str = "report", again: str | None = None) -> Path:
    """Write `text` to `path` through a temporary file beside it, so that `path` is either the whole new
    `what` (a report, an export) or what it was before; on a failure (a full disk, a quota) the temporary
    file is removed and ReportDirError says, in one line, that the run `run_id` is stored and which
    command (`again`, default `eqarena report --run RUN`) writes it again."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except BaseException as exc:  # an interrupt leaves no temporary file either
        tmp.unlink(missing_ok=True)
        if not isinstance(exc, OSError):
            raise
        again = again or f"eqarena report --run {run_id}"
        raise ReportDirError(
            f"cannot write the {what} {path}: {exc.strerror or exc}; run {run_id} is stored "
            f"(`{again}` writes its {what} again)"
        ) from None
    return path

"""Small HTML building blocks of the report: escaping, number formatting, tables, embedded figures."""

from __future__ import annotations

import html


def escape(value) -> str:
    return html.escape(str(value), quote=True)


def fmt(value, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if value != 0 and abs(value) < 10**-digits:
            return f"{value:.1e}"
        return f"{value:.{digits}f}"
    return escape(value)


def table(header: list[str], rows: list[list], name_columns: int = 1) -> str:
    head = "".join(
        f'<th class="name">{escape(h)}</th>' if k < name_columns else f"<th>{escape(h)}</th>"
        for k, h in enumerate(header)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="name">{fmt(c)}</td>' if k < name_columns else f"<td>{fmt(c)}</td>" for k, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def figure(uri: str, name: str, caption: str) -> str:
    return (
        f'<figure data-figure="{escape(name)}"><img src="{uri}" alt="{escape(caption)}">'
        f"<figcaption>{escape(caption)}</figcaption></figure>"
    )

"""The directory the HTML report is written into, checked before any work."""

from __future__ import annotations

import os
from pathlib import Path

from eqarena.exceptions import EqarenaError


class ReportDirError(EqarenaError, OSError):
    """The report's directory cannot be made or written."""


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

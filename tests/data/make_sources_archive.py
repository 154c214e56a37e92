"""Regenerate tests/data/sources.tar.xz, the original source files the tests and the seed build read.

    uv run python tests/data/make_sources_archive.py --from DIR [--out tests/data/sources.tar.xz]

DIR holds `prd_vicuna80/` and `arena_hard_v0.1/` as copied from their repositories (see SOURCES.md).
Only the files listed in MEMBERS are packed, byte-for-byte, under the same relative paths. The
archive is reproducible: members sorted, mtime 0, uid/gid 0, no owner names, mode 0644.
"""

from __future__ import annotations

import argparse
import io
import lzma
import sys
import tarfile
from pathlib import Path

ARCHIVE = Path(__file__).resolve().parent / "sources.tar.xz"

PRD_JUDGES = ("bard", "claude", "gpt35", "gpt4", "vicuna-13b")

# Glob patterns relative to DIR; each must match at least one file. Left out as unused:
# prd_vicuna80/ratings-human/, prd_vicuna80/README.PRD-data.md, prd_vicuna80/prompts/reviewer.jsonl,
# arena_hard_v0.1/arena_hard_leaderboard_20240731.csv.
MEMBERS = (
    "prd_vicuna80/LICENSE.PRD-MIT.txt",
    "prd_vicuna80/judgments_long.csv",
    "prd_vicuna80/prompts/vicuna_questions.jsonl",
    "prd_vicuna80/prompts/vicuna_prompt_threeclass.jsonl",
    "prd_vicuna80/generations/answer_*.jsonl",
    *(f"prd_vicuna80/ratings-{judge}/*.jsonl" for judge in PRD_JUDGES),
    "arena_hard_v0.1/LICENSE.arena-hard-auto-Apache-2.0.txt",
    "arena_hard_v0.1/new_format/question.jsonl",
    "arena_hard_v0.1/new_format/model_answer/*.jsonl",
    "arena_hard_v0.1/old_format/question.jsonl",
    "arena_hard_v0.1/old_format/model_answer/*.jsonl",
)


def member_paths(source: Path) -> list[str]:
    """The relative paths to pack, sorted; raises FileNotFoundError if a pattern matches nothing."""
    paths = set()
    for pattern in MEMBERS:
        found = [p for p in source.glob(pattern) if p.is_file()]
        if not found:
            raise FileNotFoundError(f"{source}: nothing matches {pattern}")
        paths.update(p.relative_to(source).as_posix() for p in found)
    return sorted(paths)


def write_archive(source: Path, out: Path) -> list[str]:
    """Pack the MEMBERS of `source` into the xz tar `out`; returns the member names."""
    names = member_paths(source)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in names:
            data = (source / name).read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out.write_bytes(
        lzma.compress(buffer.getvalue(), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=9 | lzma.PRESET_EXTREME)
    )
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--from", dest="source", type=Path, required=True, help="folder with prd_vicuna80/ and arena_hard_v0.1/"
    )
    parser.add_argument("--out", type=Path, default=ARCHIVE, help="the archive to write")
    args = parser.parse_args()
    try:
        names = write_archive(args.source, args.out)
    except FileNotFoundError as error:
        sys.exit(str(error))
    print(f"{len(names)} files, {args.out.stat().st_size:,d} bytes  {args.out}")


if __name__ == "__main__":
    main()

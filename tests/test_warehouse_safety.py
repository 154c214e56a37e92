"""Warehouse safety, as a user and a report consumer meet it, with real `eqarena` processes and real
DuckDB files: damaged or unusable paths end in one line, writers wait for readers instead of losing
their work, the readers' snapshot never meets a lock, long values are cut in error lines, and a run
whose process was killed is marked abandoned."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eqarena.warehouse.snapshot import connect_snapshot, publish_snapshot, snapshot_path

EQARENA = Path(sys.executable).with_name("eqarena")
pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "import"
QUICK_RATE = ("rate", "--bootstrap", "0", "--methods", "bt,ne")


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "EQARENA_WAIT")}
    return {**env, "EQARENA_PREFECT": "never", "EQARENA_PROGRESS": "0", **extra}


def eqarena(*args: str, timeout: float = 300, **extra_env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(EQARENA), *map(str, args)], env=_env(**extra_env), capture_output=True, text=True, timeout=timeout
    )


def assert_one_error_line(result: subprocess.CompletedProcess, *expected: str) -> str:
    lines = result.stderr.splitlines()
    assert result.returncode == 1, result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "nanobind" not in result.stderr and "Traceback" not in result.stderr
    assert len(lines[0]) <= 1100
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


def query(db: Path, sql: str, *params) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, list(params)).fetchall()


@pytest.fixture(scope="module")
def rated(tmp_path_factory) -> Path:
    """A warehouse with the bundled data and one quick rate run (its snapshot published)."""
    db = tmp_path_factory.mktemp("safety") / "w.duckdb"
    for args in (("ingest",), QUICK_RATE):
        done = eqarena(*args, "--db", db)
        assert done.returncode == 0, done.stderr
    return db


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _garble_tables(db: Path, target: Path, tables: tuple[str, ...]) -> None:
    """Copy `db` to `target` with random bytes in the first data block of each of `tables` (DuckDB
    files: a 12 KiB header, then blocks of `block_size` bytes, each starting with its checksum)."""
    with duckdb.connect(str(db), read_only=True) as con:
        block_size = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()[0]
        blocks = [
            con.execute(f"SELECT min(block_id) FROM pragma_storage_info('{t}') WHERE block_id >= 0").fetchone()[0]
            for t in tables
        ]
    shutil.copy(db, target)
    rng = np.random.default_rng(0)
    with open(target, "r+b") as f:
        for block in blocks:
            f.seek(3 * 4096 + block * block_size + 512)
            f.write(rng.bytes(2048))


@pytest.fixture(scope="module")
def unusable(rated, tmp_path_factory) -> dict[str, tuple[Path, str]]:
    """name -> (warehouse path, words the error line must contain)."""
    root = tmp_path_factory.mktemp("unusable")
    truncated = root / "truncated.duckdb"
    shutil.copy(rated, truncated)
    os.truncate(truncated, truncated.stat().st_size // 2)
    garbled = root / "garbled.duckdb"
    _garble_tables(rated, garbled, ("judgments", "ratings", "payoffs"))
    text = root / "text.duckdb"
    text.write_text("prompt_id,model_a,model_b,score\n")
    directory = root / "dir.duckdb"
    directory.mkdir()
    blocked = root / "a-file"
    blocked.write_text("")
    return {
        "truncated": (truncated, "damaged"),
        "garbled": (garbled, "damaged"),
        "not-duckdb": (text, "is not a DuckDB database file"),
        "directory": (directory, "is a directory"),
        "uncreatable": (blocked / "w.duckdb", "w.duckdb"),
    }


@pytest.mark.parametrize("kind", ["truncated", "garbled", "not-duckdb", "directory", "uncreatable"])
@pytest.mark.parametrize("command", [("status",), ("check",), QUICK_RATE, ("report",), ("ingest",)])
def test_an_unusable_warehouse_is_one_error_line(unusable, tmp_path, kind, command):
    db, words = unusable[kind]
    before = _sha(db) if db.is_file() else None
    extra = ("--out", tmp_path / "out") if command == ("report",) else ()
    result = eqarena(*command, "--db", db, *extra)
    assert_one_error_line(result, words if command != ("ingest",) or kind != "uncreatable" else "cannot create")
    if before is not None and command != ("ingest",):
        assert _sha(db) == before  # nothing written to it
    if before is not None and command == ("ingest",) and kind == "garbled":  # its runs row says why
        assert query(db, "SELECT status FROM runs WHERE kind = 'ingest' ORDER BY started_at DESC LIMIT 1") == [
            ("failed",)
        ]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_check_passes_a_sound_warehouse_and_names_damaged_tables(rated, unusable):
    ok = eqarena("check", "--db", rated)
    assert ok.returncode == 0, ok.stderr
    tables = query(rated, "SELECT count(*) FROM duckdb_tables()")[0][0]
    assert f"{tables} tables" in ok.stdout and "checksum verified" in ok.stdout
    line = assert_one_error_line(eqarena("check", "--db", unusable["garbled"][0]), "damaged")
    for table in ("judgments", "ratings", "payoffs"):
        assert table in line


def test_report_into_a_file_is_one_error_line(rated, tmp_path):
    in_the_way = tmp_path / "report.html"
    in_the_way.write_text("keep me")
    assert_one_error_line(eqarena("report", "--db", rated, "--out", in_the_way), f"{in_the_way} is a file")
    assert in_the_way.read_text() == "keep me"


def test_a_full_disk_under_the_report_is_one_line_and_leaves_no_temporary_file(rated, tmp_path):
    """The report is written through `.<name>.tmp`; that name pointed at /dev/full makes its write fail
    as on a full disk (ENOSPC), without filling one."""
    run_id = query(rated, "SELECT run_id FROM runs WHERE kind = 'rate' AND status = 'ok' ORDER BY started_at DESC")[0][
        0
    ]
    out = tmp_path / "out"
    out.mkdir()
    (out / f".eqarena-{run_id}.html.tmp").symlink_to("/dev/full")
    line = assert_one_error_line(
        eqarena("report", "--db", rated, "--out", out), "No space left on device", f"eqarena report --run {run_id}"
    )
    assert f"run {run_id} is stored" in line
    assert list(out.iterdir()) == []  # neither the temporary file nor a cut report


def test_damage_in_blocks_a_writer_does_not_read_is_never_published(rated, tmp_path):
    """An import reads no ratings, so DuckDB never meets the damaged block of that table while importing;
    the copy is verified before it replaces the readers' snapshot, which keeps the last sound one."""
    db = tmp_path / "w.duckdb"
    _garble_tables(rated, db, ("ratings",))
    shutil.copy(snapshot_path(rated), snapshot_path(db))
    sound = _sha(snapshot_path(db))
    result = eqarena("import", "pairwise", "--db", db, EXAMPLES / "pairwise.csv")
    assert_one_error_line(result, f"{db} is damaged (blocks of ratings fail", "snapshot was not published")
    assert _sha(snapshot_path(db)) == sound
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]


def test_a_snapshot_that_cannot_be_published_leaves_the_run_ok_in_one_line(tmp_path):
    """A directory where the readers' snapshot goes: the import commits and its run stays `ok`; the
    command says so in one line, exit 1, and leaves no temporary copy."""
    db = tmp_path / "w.duckdb"
    snapshot_path(db).mkdir()
    result = eqarena("import", "pairwise", "--db", db, EXAMPLES / "pairwise.csv")
    line = assert_one_error_line(result, f"the run is stored in {db}", str(snapshot_path(db)))
    assert "readers see the previous one" in line
    assert query(db, "SELECT kind, status FROM runs") == [("import", "ok")]
    assert query(db, "SELECT count(*) FROM judgments")[0][0] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([db.name, snapshot_path(db).name])


def _hold_open(db: Path) -> subprocess.Popen:
    """A reader (as a notebook would be) holding the live file read-only until its stdin closes."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True); "
            "print('ready', flush=True); sys.stdin.read()",
            str(db),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "ready"
    return holder


def test_a_writer_waits_for_a_reader_and_keeps_its_work(rated):
    runs_before = query(rated, "SELECT count(*) FROM runs WHERE kind = 'rate' AND status = 'ok'")[0][0]
    holder = _hold_open(rated)
    try:
        rate = subprocess.Popen(
            [str(EQARENA), *QUICK_RATE, "--db", str(rated), "--wait", "30"],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        said = ""
        while "waiting up to 30 s" not in said and rate.poll() is None:
            said += rate.stderr.readline()  # its results are computed; now it waits to write them
        assert f"is in use by process {holder.pid}" in said, said
        time.sleep(2)  # the reader keeps the file a while longer
        assert rate.poll() is None
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    stdout, stderr = rate.communicate(timeout=120)
    assert rate.returncode == 0, said + stderr
    assert f"written to {rated}" in stdout
    assert query(rated, "SELECT count(*) FROM runs WHERE kind = 'rate' AND status = 'ok'")[0][0] == runs_before + 1


def test_a_writer_gives_up_after_its_wait_in_one_line(rated):
    runs_before = query(rated, "SELECT count(*) FROM runs")[0][0]
    holder = _hold_open(rated)
    try:
        result = eqarena(*QUICK_RATE, "--db", rated, "--wait", "1")
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    lines = result.stderr.splitlines()
    assert result.returncode == 1
    assert lines[-1].startswith(f"error: database {rated} is in use by process {holder.pid}"), result.stderr
    assert "waited 1 s" in lines[-1] and "Traceback" not in result.stderr
    assert query(rated, "SELECT count(*) FROM runs")[0][0] == runs_before  # no partial run


@pytest.mark.slow
def test_snapshot_readers_meet_no_lock_during_concurrent_writes(rated):
    """20 rate runs at once write the warehouse; a reader of the snapshot polls it all the while."""
    snapshot = snapshot_path(rated)
    assert snapshot.exists()
    runs_before = query(rated, "SELECT count(*) FROM runs WHERE kind = 'rate' AND status = 'ok'")[0][0]
    errors: list[str] = []
    reads: list[int] = []
    straddled: list[bool] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            try:
                with duckdb.connect(str(snapshot), read_only=True) as con:
                    reads.append(con.execute("SELECT count(*) FROM latest_model_ratings").fetchone()[0])
            except duckdb.Error as exc:  # only DuckDB's straddled-publish race may fail a plain connect ...
                straddled.append(isinstance(exc, duckdb.IOException) and "lock" not in str(exc).lower())
                try:  # ... and connect_snapshot gets past it
                    with connect_snapshot(rated) as con:
                        reads.append(con.execute("SELECT count(*) FROM latest_model_ratings").fetchone()[0])
                except duckdb.Error as again:
                    errors.append(str(again))
            time.sleep(0.02)

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        writers = [
            subprocess.Popen(
                [str(EQARENA), *QUICK_RATE, "--db", str(rated), "--wait", "600"],
                env=_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(20)
        ]
        outcomes = [(w.wait(timeout=900), w.stderr.read()) for w in writers]
    finally:
        done.set()
        reader.join()
    assert [code for code, _ in outcomes] == [0] * 20, [err for code, err in outcomes if code][:1]
    assert errors == [] and all(straddled), (errors, straddled)
    assert len(reads) > 20 and min(reads) > 0 and len(straddled) <= len(reads) // 20
    assert query(rated, "SELECT count(*) FROM runs WHERE kind = 'rate' AND status = 'ok'")[0][0] == runs_before + 20
    assert query(snapshot, "SELECT count(*) FROM runs WHERE kind = 'rate' AND status = 'ok'")[0][0] == runs_before + 20
    assert _processes_using(rated) == []  # no orphan left behind


STRADDLING_READER = """
import sys, duckdb
from eqarena.warehouse.snapshot import connect_snapshot, snapshot_path
db, how = sys.argv[1:]
try:
    if how == "duckdb.connect":
        con = duckdb.connect(str(snapshot_path(db)), read_only=True)
    else:
        con = connect_snapshot(db)
    print(con.execute("SELECT count(*) FROM t").fetchone()[0])
except duckdb.IOException as exc:
    print(exc)
"""


@pytest.mark.parametrize("how", ["duckdb.connect", "connect_snapshot"])
def test_a_connect_straddling_a_publish(tmp_path, how):
    """DuckDB opens the file to read its headers, then again to read its blocks. strace holds the
    reader's second open (the path's third) while a smaller copy is published: a plain connect reads
    the old headers with the new blocks and fails; connect_snapshot connects again and reads the new copy."""
    strace = shutil.which("strace")
    assert strace, "this test needs strace (.ci/run installs it)"
    db, trace = tmp_path / "w.duckdb", tmp_path / "trace.txt"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT range AS i, random() AS x FROM range(2000000)")
        publish_snapshot(con)
    db.unlink()
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT range AS i FROM range(10)")
        reader = subprocess.Popen(
            [
                strace,
                "-f",
                "-o",
                str(trace),
                "-P",
                str(snapshot_path(db)),
                "-e",
                "trace=openat",
                "-e",
                "inject=openat:delay_enter=4000000:when=3",
                sys.executable,
                "-c",
                STRADDLING_READER,
                str(db),
                how,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while (not trace.exists() or trace.read_text().count("openat(") < 2) and reader.poll() is None:
            assert time.monotonic() < deadline, "the reader never opened the snapshot"
            time.sleep(0.01)
        assert reader.poll() is None, reader.communicate()
        publish_snapshot(con)  # while the reader's third open waits
    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    assert "(DELAYED)" in trace.read_text()
    if how == "duckdb.connect":
        assert out.startswith("IO Error: Could not read enough bytes"), out
    else:
        assert out.strip() == "10", out


def _processes_using(db: Path) -> list[int]:
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        if str(db) in " ".join(process.info["cmdline"] or []):
            found.append(process.info["pid"])
    return found


def test_a_long_value_is_cut_in_the_error_line_and_the_run_row(tmp_path):
    db, bad = tmp_path / "w.duckdb", tmp_path / "bad.csv"
    bad.write_text("prompt_id,model_a,model_b,score\np1,a,b,0.5\np2,a,b," + "x" * 5_000_000 + "\n")
    line = assert_one_error_line(eqarena("import", "pairwise", bad, "--db", db), f"{bad}:3", "(5,000,000 characters)")
    assert len(line) < 400
    ((status, message),) = query(db, "SELECT status, message FROM runs WHERE kind = 'import'")
    assert status == "failed" and len(message) < 400 and "(5,000,000 characters)" in message
    assert query(db, "SELECT count(*) FROM judgments")[0][0] == 0


def _battles(path: Path, rows: int) -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(0, 100, rows)
    b = (a + rng.integers(1, 100, rows)) % 100
    models = np.array([f"m{i:03d}" for i in range(100)])
    pq.write_table(
        pa.table(
            {
                "model_a": models[a],
                "model_b": models[b],
                "winner": np.array(["model_a", "model_b", "tie"])[rng.integers(0, 3, rows)],
                "question_id": np.char.add("q", (rng.integers(0, 2000, rows)).astype(str)),
            }
        ),
        path,
    )


@pytest.mark.slow
def test_a_killed_import_is_marked_abandoned(tmp_path):
    db, battles, small = tmp_path / "w.duckdb", tmp_path / "battles.parquet", tmp_path / "small.csv"
    _battles(battles, 2_000_000)
    small.write_text("prompt_id,model_a,model_b,score\np1,a,b,0.5\np1,b,a,-0.5\n")
    importer = subprocess.Popen(
        [str(EQARENA), "import", "battles", str(battles), "--db", str(db)],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    running = []
    deadline = time.monotonic() + 120
    while not running and time.monotonic() < deadline and importer.poll() is None:
        try:
            running = query(db, "SELECT run_id FROM runs WHERE status = 'running'")
        except duckdb.Error:  # not created yet, or the import is writing it
            time.sleep(0.05)
    assert running and importer.poll() is None, "the import finished before it could be killed"
    importer.send_signal(signal.SIGKILL)
    importer.wait()
    ((run_id,),) = running

    shown = eqarena("status", "--json", "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["unfinished_runs"] == [{"run_id": run_id, "kind": "import", "status": "abandoned"}]
    assert query(db, "SELECT status FROM runs WHERE run_id = ?", run_id) == [("running",)]  # status only reads

    assert eqarena("import", "pairwise", small, "--db", db).returncode == 0  # the next writer marks it
    ((status, message),) = query(db, "SELECT status, message FROM runs WHERE run_id = ?", run_id)
    assert status == "abandoned" and f"pid {importer.pid}" in message
    assert "abandoned" in eqarena("status", "--db", db).stdout


@pytest.fixture
def immutable_copy(rated, tmp_path):
    """A copy of the rated warehouse marked immutable (`chattr +i`: not even root may write it)."""
    db = tmp_path / "immutable.duckdb"
    shutil.copy(rated, db)
    marked = (
        subprocess.run(["chattr", "+i", str(db)], capture_output=True, text=True) if shutil.which("chattr") else None
    )
    if marked is None or marked.returncode != 0:
        pytest.skip(f"this machine cannot mark a file immutable: {marked.stderr.strip() if marked else 'no chattr'}")
    try:
        yield db
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)


@pytest.mark.parametrize(
    "command",
    [
        ("import", "pairwise", EXAMPLES / "pairwise.csv", "--dataset", "other"),
        (*QUICK_RATE, "--dataset", "vicuna80"),
        ("ingest",),
    ],
)
def test_an_immutable_warehouse_is_one_error_line_and_stays_as_it_was(immutable_copy, command):
    before = _sha(immutable_copy)
    result = eqarena(*command, "--db", immutable_copy)
    assert_one_error_line(result, str(immutable_copy), "immutable")
    assert _sha(immutable_copy) == before
    readable = eqarena("status", "--db", immutable_copy)  # a reader still reads it
    assert readable.returncode == 0, readable.stderr

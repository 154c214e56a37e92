"""How a command's process ends (eqarena/runtime/quick_exit.py): the exit handlers run and the
output is flushed, the interpreter's shutdown is skipped, and a thread still at work keeps the
normal exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

QUICK_EXIT = """
import atexit, sys
from pathlib import Path
from eqarena.runtime.quick_exit import quick_exit
marks = Path(sys.argv[1])

class Finalised:
    def __del__(self):
        (marks / "finalised").write_text("the shutdown ran")

kept = Finalised()
atexit.register(lambda: (marks / "atexit").write_text("the exit handlers ran"))
print("the last line", end="")  # a pipe: still in the buffer
sys.stderr.write("and the last error line")
quick_exit(3)
"""


def test_quick_exit_runs_the_exit_handlers_flushes_and_skips_the_shutdown(tmp_path):
    done = subprocess.run([sys.executable, "-c", QUICK_EXIT, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "the last line" and done.stderr == "and the last error line"
    assert (tmp_path / "atexit").read_text() == "the exit handlers ran"
    assert not (tmp_path / "finalised").exists()  # no object was freed one by one


def test_quick_exit_with_a_message_says_it_and_exits_1():
    script = "from eqarena.runtime.quick_exit import quick_exit; quick_exit('error: the reason')"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (1, "error: the reason\n")


PENDING = """
import threading, time
from eqarena.runtime.quick_exit import nothing_pending
release = threading.Event()
daemon = threading.Thread(target=release.wait, daemon=True)
daemon.start()
print(nothing_pending())  # a daemon thread does not hold the exit
worker = threading.Thread(target=release.wait)
worker.start()
print(nothing_pending())  # a normal exit would wait for this one
release.set()
worker.join()
print(nothing_pending())
"""


def test_nothing_pending_while_only_daemon_threads_run():
    done = subprocess.run([sys.executable, "-c", PENDING], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "True"]


def test_a_profiled_command_keeps_the_normal_exit_and_its_profile(tmp_path):
    profile = tmp_path / "status.prof"
    done = subprocess.run(
        [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "eqarena.cli.app", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Usage" in done.stdout and profile.stat().st_size > 0


INTERRUPTED_QUERY = """
import threading
import duckdb
from eqarena.cli import app as cli

@cli.app.command("long-query")
def long_query() -> None:
    con = duckdb.connect()
    threading.Timer(0.3, con.interrupt).start()  # as DuckDB stops a query on SIGINT, raising its own error
    con.execute("SELECT count(*) FROM range(100000000000) t(i) WHERE i % 7 = 3").fetchall()

cli.main()
"""


def test_a_command_whose_query_is_interrupted_exits_as_interrupted():
    """DuckDB turns an interrupt during a query into its own error: the command exits 130, quietly, as
    for a KeyboardInterrupt, not with the traceback of an unexpected error."""
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_QUERY, "long-query"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_interrupted_query_tells_duckdb_interrupts_from_other_errors():
    import threading

    import duckdb

    from eqarena.warehouse.connection import interrupted_query

    con = duckdb.connect()
    threading.Timer(0.3, con.interrupt).start()
    with pytest.raises(duckdb.Error) as stopped:
        con.execute("SELECT count(*) FROM range(100000000000) t(i) WHERE i % 7 = 3").fetchall()
    assert interrupted_query(stopped.value)
    try:
        raise RuntimeError("while cleaning up") from stopped.value
    except RuntimeError as behind:
        assert interrupted_query(behind)  # an interrupt behind a later error
    with pytest.raises(duckdb.Error) as failed:
        con.execute("SELEC 1")
    assert not interrupted_query(failed.value)
    assert not interrupted_query(RuntimeError("Query failed"))


def test_a_run_whose_query_is_interrupted_is_recorded_interrupted_not_failed(tmp_path):
    """Ctrl-C during a run's write reaches Python as DuckDB's error, not a KeyboardInterrupt: the run's
    row still says `interrupted`, so a user can tell it from a fault."""
    import threading
    from contextlib import closing

    import duckdb

    from eqarena import warehouse
    from eqarena.tasks.runs import RunLog

    db = str(tmp_path / "w.duckdb")
    with pytest.raises(duckdb.Error):
        with RunLog(db, "import", {}) as log, closing(duckdb.connect()) as busy:
            threading.Timer(0.3, busy.interrupt).start()
            busy.execute("SELECT count(*) FROM range(100000000000) t(i) WHERE i % 7 = 3").fetchall()
    with closing(warehouse.connect(db, read_only=True)) as con:
        assert con.execute("SELECT status FROM runs WHERE run_id = ?", [log.run_id]).fetchall() == [("interrupted",)]
    with pytest.raises(ValueError):
        with RunLog(db, "import", {}) as failed:
            raise ValueError("a bad row")
    with closing(warehouse.connect(db, read_only=True)) as con:
        assert con.execute("SELECT status FROM runs WHERE run_id = ?", [failed.run_id]).fetchall() == [("failed",)]


@pytest.mark.parametrize("late", [False, True], ids=["prompt", "late"])
@pytest.mark.parametrize("where", ["gc callback", "weakref callback"])
def test_an_interrupt_where_python_drops_exceptions_is_raised_after_it(where, late, monkeypatch):
    """Python prints and drops an exception raised in a garbage-collection callback (JAX registers one), a
    weakref callback or a finalizer. An interrupt landing in a gc callback is not raised there but sent
    again; one raised in a weakref callback is dropped, and the command's unraisable hook sends it again.
    Either way the interrupt is then raised outside, where the command can stop. `late`: on a loaded machine
    the signal sent again lands before the code sending it has returned (inside the unraisable hook, where
    it would be dropped a second time); it is then sent once more."""
    import gc
    import signal
    import time
    import weakref

    from eqarena.cli import app as cli

    seen, dropped = [], []

    def land(*_):
        seen.append(where)
        signal.raise_signal(signal.SIGINT)  # its handler runs here, inside the callback

    def callback(phase, info):
        if phase == "start" and not seen:
            land()

    class Target:
        pass

    hook = cli._redelivering(sys.unraisablehook)
    deliver_again, sent_again = cli._deliver_again, []

    def delivering_again(signum):
        sent_again.append(signum)
        deliver_again(signum)
        if late and len(sent_again) == 1:
            time.sleep(0.2)  # the signal sent again lands here, before the sender returns

    monkeypatch.setattr(cli, "_deliver_again", delivering_again)

    def recording(unraisable):
        dropped.append(unraisable.object)
        hook(unraisable)

    previous_handler, previous_hook = signal.signal(signal.SIGINT, cli._interrupted), sys.unraisablehook
    sys.unraisablehook = recording
    try:
        with pytest.raises(KeyboardInterrupt, match="stopped by SIGINT"):
            if where == "gc callback":
                gc.callbacks.append(callback)
                gc.collect()
            else:
                target = Target()
                ref = weakref.ref(target, land)  # noqa: F841  (its callback runs when target goes)
                del target
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        if callback in gc.callbacks:
            gc.callbacks.remove(callback)
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGINT, previous_handler)
        cli._SIGNALLED.clear()
    assert seen == [where]
    assert sent_again  # a loaded machine may send it more than once: each landing before its sender returns
    if late:
        assert len(sent_again) > 1  # it landed in the sender, and went again
    if where == "gc callback":
        assert callback not in dropped  # not raised inside the callback at all
    else:
        assert land in dropped  # raised there and dropped by Python, then sent again


INTERRUPTED_IN_AN_EXTENSION_INIT = """
import abc, signal, sys, time
from eqarena.cli import app as cli
module, landed = sys.argv[1], []
assert module not in sys.modules and "xml.etree.ElementPath" not in sys.modules

def land(where):
    if not landed:
        landed.append(where)
        signal.raise_signal(signal.SIGINT)  # its handler runs here

register = abc.ABCMeta.register

def registering(cls, subclass):  # Cython registers its memoryview type here, inside a bare `try: ... except: pass`
    if subclass.__name__ == "_memoryviewslice":
        land("memoryview registration")
    return register(cls, subclass)

class Finder:  # _elementtree's initialisation imports xml.etree.ElementPath
    def find_spec(self, name, path=None, target=None):
        if name == "xml.etree.ElementPath":
            land("import from the initialisation")

abc.ABCMeta.register = registering
sys.meta_path.insert(0, Finder())
signal.signal(signal.SIGINT, cli._interrupted)
try:
    __import__(module)
    time.sleep(5)
except KeyboardInterrupt as stopped:
    print(landed, module in sys.modules, stopped, sep="; ")
"""


@pytest.mark.parametrize(
    ("module", "where"),
    [("numpy.random", "memoryview registration"), ("_elementtree", "import from the initialisation")],
    ids=["multi-phase (swallowed)", "single-phase"],
)
def test_an_interrupt_during_an_extension_modules_initialisation_is_raised_after_it(module, where):
    """A compiled extension module's initialisation may swallow an exception raised in Python code it calls
    (Cython's memoryview registration, run by every Cython module that uses memoryviews, numpy.random's among
    them) or crash on it: an interrupt landing there is sent again and raised once the module is loaded."""
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_IN_AN_EXTENSION_INIT, module], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout, "the interrupt was lost"
    assert done.stdout.strip().split("; ") == [str([where]), "True", "stopped by SIGINT"]

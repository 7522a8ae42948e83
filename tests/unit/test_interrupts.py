"""Interrupts: one handler from CLI entry; the first SIGINT/SIGTERM cleans up, a second
one does not cut the cleanup short; `builder test` removes its container; a build
interrupted during start-up leaves no context under /tmp. Real signals to real
processes; the engine is a fake."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from builder.core import interrupts
from builder.core.errors import Interrupted

ROOT = Path(__file__).resolve().parents[2]


def test_first_signal_raises_a_second_is_ignored_during_cleanup(capsys):
    restore = interrupts.install()
    cleaned = False
    try:
        with pytest.raises(Interrupted) as exc:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler raises before this ends
            finally:
                os.kill(os.getpid(), signal.SIGINT)  # a second signal while cleaning up
                time.sleep(0.1)
                cleaned = True
        assert exc.value.exit_code == 143
    finally:
        restore()
    assert cleaned
    assert "SIGINT again: still cleaning up" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is not interrupts.handler  # pytest's own is back


def wait_for(path: Path, proc: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate()
            pytest.fail(f"never got ready (rc {proc.returncode}): {err[-2000:]}")
        time.sleep(0.1)


def driver(tmp_path: Path, body: str) -> subprocess.Popen:
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(body))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TMPDIR": str(tmp_path / "tmp"),
        "BUILDER_CACHE_DIR": str(tmp_path / "cache"),
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
    }
    (tmp_path / "tmp").mkdir()
    return subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


TEST_DRIVER = """
    import sys
    from builder.cli import main as cli
    from builder.image import describe
    from builder.image.conformance import runner
    from tests.unit.fake_engine import FakeEngine

    class Engine(FakeEngine):  # records what the builder asks to remove, for the test to read
        def remove_container(self, container):
            super().remove_container(container)
            with open("{tmp}/removed", "a") as f:
                f.write(container + "\\n")

    # pytest's stand-in: writes its pid and name of its container, then runs for long.
    # Like pytest it stops quietly on SIGINT (pytest tears down and exits 2).
    sleeper = ("import os, signal, sys, time; signal.signal(signal.SIGINT, lambda *a: sys.exit(2)); "
               "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(300)")
    runner.workers = lambda: 2  # the builder names both workers' containers for removal
    runner.command = lambda image, extra, select, container, n=1: [
        sys.executable, "-c", sleeper, "{tmp}/child-" + container]
    cli._engine = lambda: None
    runner.cleanup_engine = Engine
    describe.labels_of = lambda engine, image: {{}}
    sys.exit(cli.main(["test", "some/image:1"]))
"""


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_builder_test_removes_its_container_on_an_interrupt(tmp_path, sig, code):
    proc = driver(tmp_path, TEST_DRIVER.format(tmp=tmp_path))
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("child-*")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    children = list(tmp_path.glob("child-*"))
    assert children, proc.communicate()[1]
    time.sleep(0.3)
    proc.send_signal(sig)
    time.sleep(0.2)
    proc.send_signal(sig)  # impatient user: a second signal
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert f"interrupted ({signal.Signals(sig).name}); no tag was moved" in err
    container = children[0].name.removeprefix("child-")
    removed = (tmp_path / "removed").read_text().splitlines()
    assert {f"{container}-gw0", f"{container}-gw1"} <= set(removed), removed
    pid = int(children[0].read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


BUILD_DRIVER = """
    import sys, time
    from pathlib import Path
    from builder.cli import main as cli
    from builder.image import buildcontext

    write = buildcontext.write

    def slow_write(*args, **kwargs):  # the context is on disk; then start-up takes long
        out = write(*args, **kwargs)
        Path("{tmp}/ready").write_text("ready")
        time.sleep(300)
        return out

    buildcontext.write = slow_write

    class Engine:  # the upstream base is present; nothing else may be asked
        def image_id(self, ref):
            return "sha256:" + "0" * 64

    cli._engine = lambda: Engine()
    sys.exit(cli.main(["build", "-r", "21.08", "-v", "tf2-py3", "--no-host-ca", "-q"]))
"""


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_during_start_up_leaves_no_context_in_tmp(tmp_path, sig, code):
    proc = driver(tmp_path, BUILD_DRIVER.format(tmp=tmp_path))
    wait_for(tmp_path / "ready", proc)
    assert list((tmp_path / "tmp").iterdir()), "the context was not under TMPDIR"
    proc.send_signal(sig)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert list((tmp_path / "tmp").iterdir()) == []

"""Hostile files where the builder reads users' files: a private catalog's
lock files (BUILDER_CATALOG=DIR reads DIR/locks/) and `builder base --print`'s build
options. Each is one `error:` line and exit 2: never a hang (a fifo), never an internal
error (/dev/zero, a huge or non-UTF-8 file), never a silent exit 0."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from builder import catalog
from builder.catalog import lock

LOCK = Path("21.08") / "tf2-py3-py3.9.txt"
HOROVOD = Path("horovod")  # 21.08's Horovod lock lives here


def builder(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    # timeout: a read that hangs (a fifo without a writer) is a failure, not a stuck suite
    return subprocess.run(
        ["builder", *args],
        capture_output=True,
        text=True,
        timeout=20,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


def assert_one_line_error(result: subprocess.CompletedProcess, *texts: str) -> str:
    assert result.returncode == 2, result
    # `builder lock` says first which variants it skips (tf1-py3 has no wheel); then the one error
    lines = [line for line in result.stderr.strip().splitlines() if not line.startswith("skipped ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    for text in texts:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def private(tmp_path: Path) -> Path:
    """A private catalog: the shipped releases plus a copy of the shipped locks."""
    root = tmp_path / "catalog"
    shutil.copytree(catalog.RELEASES_DIR, root)
    shutil.copytree(lock.LOCKS_DIR, root / "locks")
    return root


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _huge(path: Path) -> None:
    with open(path, "wb") as f:  # sparse: no disk used, past the 16 MiB cap
        f.truncate(17 << 20)


def _not_utf8(path: Path) -> None:
    path.write_bytes(b"tensorflow==2.6.0 \\\n    --hash=sha256:\xff\xfe\n")


HOSTILE = {
    "fifo": (_fifo, "is a fifo"),
    "dev-zero": (_dev_zero, "is a character device"),
    "huge": (_huge, "larger than 16 MiB"),
    "not-utf8": (_not_utf8, "not UTF-8"),
}


def _spoil(private: Path, rel: Path, kind: str) -> tuple[Path, str]:
    path = private / "locks" / rel
    path.unlink()
    make, reason = HOSTILE[kind]
    make(path)
    return path, reason


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_render_refuses_a_hostile_lock_in_one_line(private, kind):
    path, reason = _spoil(private, LOCK, kind)
    result = builder("render", "--release", "21.08", "--variant", "tf2-py3", env={"BUILDER_CATALOG": str(private)})
    assert_one_line_error(result, "lock file", str(path), reason)


def test_render_refuses_a_hostile_horovod_lock_in_one_line(private):
    [horovod] = sorted((private / "locks" / HOROVOD).glob("horovod-*.txt"))[:1] or [None]
    assert horovod is not None
    path, reason = _spoil(private, horovod.relative_to(private / "locks"), "fifo")
    result = builder("render", "--release", "21.08", "--variant", "tf2-py3", env={"BUILDER_CATALOG": str(private)})
    assert_one_line_error(result, "lock file", path.name, reason)


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_lock_check_refuses_a_hostile_lock_in_one_line(private, kind):
    path, reason = _spoil(private, LOCK, kind)
    result = builder("lock", "--check", "--release", "21.08", env={"BUILDER_CATALOG": str(private)})
    assert_one_line_error(result, "lock file", path.name, reason)


@pytest.mark.parametrize("kind", ["fifo", "not-utf8"])
def test_lock_refuses_a_hostile_old_lock_before_locking(private, kind):
    # the old lock is read to keep its versions: it is refused before uv or PyPI are asked
    path, reason = _spoil(private, LOCK, kind)
    result = builder("lock", "--release", "21.08", env={"BUILDER_CATALOG": str(private)})
    assert_one_line_error(result, "lock file", path.name, reason)


def test_a_missing_lock_is_still_reported_as_missing(private):
    (private / "locks" / LOCK).unlink()
    result = builder("lock", "--check", "--release", "21.08", env={"BUILDER_CATALOG": str(private)})
    assert result.returncode == 1 and "tf2-py3-py3.9.txt: missing (run `builder lock`)" in result.stderr, result
    result = builder("render", "--release", "21.08", "--variant", "tf2-py3", env={"BUILDER_CATALOG": str(private)})
    assert_one_line_error(result, "no lock file", "run `builder lock`")


# --- `builder base --print` checks the build options as the build does ---------------------


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_base_print_refuses_a_fifo_as_ca_bundle(fifo):
    result = builder("base", "--release", "26.11", "--print", "--ca-bundle", str(fifo))
    assert_one_line_error(result, "--ca-bundle", "is a fifo")
    assert result.stdout == ""


@pytest.mark.parametrize("credentials", ["fifo", "missing"])
def test_base_print_refuses_an_unreadable_credentials_file(fifo, tmp_path, credentials):
    path = fifo if credentials == "fifo" else tmp_path / "no-such-file"
    result = builder(
        "base",
        "--release",
        "26.11",
        "--print",
        "--pip-index",
        "https://x/simple",
        "--pip-index-credentials-file",
        str(path),
    )
    assert_one_line_error(result, "--pip-index")
    assert result.stdout == ""


def test_base_print_with_sound_options_still_prints(tmp_path):
    result = builder("base", "--release", "26.11", "--print", "--no-host-ca")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# syntax=") or "FROM" in result.stdout

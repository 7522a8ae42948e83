"""Every file the builder reads because the user named it (CA bundles, credential files,
patches, cosign keys, catalog files) goes through one reader (builder/core/userfiles.py): a
missing file, a directory, a fifo, /dev/zero, a file over the cap, bytes that are not
UTF-8 and an unreadable file are each one line `error: OPTION PATH: REASON` with exit 2,
before the engine is reached or anything is written, and never a hang, an internal error
or the file's contents.

The fifo and /dev/zero cases run the commands in a child process with an alarm, a deadline
and a memory limit, so a reader that blocks or reads without end fails the test, not the
run."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from builder import catalog, plan
from builder.catalog import yaml_loader
from builder.cli import main as cli
from builder.core import urls
from builder.core.errors import UserError
from builder.engine import buildsettings
from builder.plan import derive
from builder.supply_chain import signing

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "s3cret-Hunter2"
# The caps of builder/core/userfiles.py (given here so that this file runs on a builder without it)
MAX_CA_BUNDLE, MAX_CREDENTIALS, MAX_PATCH = 8 << 20, 64 << 10, 64 << 20


def _build(*extra: str) -> list[str]:
    return ["build", "-r", "21.08", "--dry-run", "--no-host-ca", *extra]


def _derive(option: str, path: str) -> list[str]:
    return ["derive", "--from", "x:1", "--tag", "my/tf:1", "--no-host-ca", option, path]


# option id -> (argv for a path, the option the error line names, the file is text: UTF-8 checked)
OPTIONS = {
    "ca-bundle": (lambda p, d: _build("--ca-bundle", p), "--ca-bundle", True),
    "bake-ca": (lambda p, d: _build("--bake-ca", "--ca-bundle", p), "--ca-bundle", True),
    "apt-credentials": (
        lambda p, d: _build("--apt-mirror", "http://mirror.example/debian", "--apt-mirror-credentials-file", p),
        "--apt-mirror-credentials-file",
        True,
    ),
    "pip-credentials": (
        lambda p, d: _build("--pip-index", "http://pypi.example/simple", "--pip-index-credentials-file", p),
        "--pip-index-credentials-file",
        True,
    ),
    "write-credentials": (
        lambda p, d: ["cache", "serve", "--dir", str(d / "cache"), "--write-credentials-file", p],
        "--write-credentials-file",
        True,
    ),
    "patch": (lambda p, d: _derive("--patch", p), "--patch", False),
    "horovod-patch": (lambda p, d: _derive("--horovod-patch", p), "--horovod-patch", False),
    "dali-patch": (lambda p, d: _derive("--dali-patch", p), "--dali-patch", False),
    "key": (lambda p, d: ["verify", "r.example/ml/tf:1", "--key", p], "--key", False),
}


class StillReading(Exception):
    pass


@pytest.fixture(autouse=True)
def deadline():
    """A read that blocks in this process (a fifo opened for reading waits for a writer)
    is interrupted after 20 s: the test fails instead of holding the run."""

    def alarm(*_):
        raise StillReading("still reading after 20 s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def nothing_runs(monkeypatch):
    """The engine and the registry are never reached: the file is checked first."""

    def never(*args, **kwargs):
        pytest.fail("reached before the file was checked")

    monkeypatch.setattr(cli, "_engine", never)
    monkeypatch.setattr(signing, "verify_signature", never)
    monkeypatch.setattr(signing, "verify_attestation", never)


def _work(tmp_path: Path) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    return d


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _one_line(capsys, code: int) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), (code, err)
    return err[0]


def _in_process(capsys, tmp_path: Path, option: str, path: Path) -> str:
    argv, what, _ = OPTIONS[option]
    before = _files(tmp_path)
    line = _one_line(capsys, cli.main(argv(str(path), tmp_path)))
    assert line.startswith(f"error: {what} {path}: "), line
    assert _files(tmp_path) == before  # nothing written (cache serve makes no directory)
    return line


# The child: each command in turn, in process, with an alarm (a blocking open or read is
# interrupted) and a memory limit (a read without end stops at MemoryError); it prints one
# JSON line per case as it goes, so a case that hangs the whole child is still named.
CHILD = """
import contextlib, io, json, resource, signal, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from builder.cli import main as cli

class StillReading(Exception):
    pass

def alarm(*_):
    raise StillReading("after 10 s")

signal.signal(signal.SIGALRM, alarm)
for case, argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    signal.alarm(10)
    with contextlib.redirect_stderr(err):
        code = cli.main(argv)
    signal.alarm(0)
    print(json.dumps([case, code, err.getvalue()]), flush=True)
"""


@pytest.fixture(scope="module")
def special_files(tmp_path_factory) -> dict[tuple[str, str], tuple[int, str, str]]:
    """(kind, option) -> (exit code, stderr, the path given) for a fifo and /dev/zero given
    to every option: one child process for all of them (each start costs seconds)."""
    tmp = tmp_path_factory.mktemp("special")
    fifo = tmp / "named.fifo"
    os.mkfifo(fifo)
    given = {"fifo": str(fifo), "zero": "/dev/zero"}
    cases = [
        [[kind, option], argv(path, tmp)] for kind, path in given.items() for option, (argv, _, _) in OPTIONS.items()
    ]
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(cases)], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        stdout = out.stdout
    except subprocess.TimeoutExpired as exc:  # a case the alarm could not stop: the rest are missing
        stdout = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    done = [json.loads(line) for line in stdout.splitlines() if line.startswith("[")]
    return {tuple(case): (code, err, given[case[0]]) for case, code, err in done}


def _special(special_files, kind: str, option: str) -> str:
    if (kind, option) not in special_files:
        pytest.fail(f"{option} {kind}: the child never finished this case (it hung or died before it)")
    code, err, path = special_files[kind, option]
    lines = err.strip().splitlines()
    what = OPTIONS[option][1]
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {what} {path}: "), (code, err)
    return lines[0]


@pytest.mark.parametrize("option", OPTIONS)
def test_a_fifo_is_refused_at_once(special_files, option):
    assert "is a fifo, not a regular file" in _special(special_files, "fifo", option)


@pytest.mark.parametrize("option", OPTIONS)
def test_dev_zero_is_refused_not_read(special_files, option):
    assert "is a character device, not a regular file" in _special(special_files, "zero", option)


@pytest.mark.parametrize("option", OPTIONS)
def test_a_missing_file_is_one_line(tmp_path, capsys, nothing_runs, option):
    assert "no such file" in _in_process(capsys, tmp_path, option, _work(tmp_path) / "none.patch")


@pytest.mark.parametrize("option", OPTIONS)
def test_a_directory_is_one_line(tmp_path, capsys, nothing_runs, option):
    d = _work(tmp_path) / "adir.patch"
    d.mkdir()
    assert "is a directory, not a file" in _in_process(capsys, tmp_path, option, d)


@pytest.mark.parametrize("option", OPTIONS)
def test_an_unreadable_file_is_one_line(tmp_path, capsys, nothing_runs, monkeypatch, option):
    """Tests run as root, whom chmod 000 does not stop: the open is refused the way the
    kernel refuses it (EACCES), whichever open the reader uses."""
    f = _work(tmp_path) / "locked.patch"
    f.write_text("user:" + PASSWORD + "\n")
    for module, name in ((os, "open"), (io, "open")):
        real = getattr(module, name)

        def refusing(file, *args, _real=real, **kwargs):
            if not isinstance(file, int) and os.fspath(file) == str(f):
                raise PermissionError(errno.EACCES, "Permission denied", str(f))
            return _real(file, *args, **kwargs)

        monkeypatch.setattr(module, name, refusing)
    line = _in_process(capsys, tmp_path, option, f)
    assert "permission denied" in line and PASSWORD not in line


@pytest.mark.parametrize("option", [o for o, (_, _, text) in OPTIONS.items() if text])
def test_bytes_that_are_not_utf8_are_one_line_without_the_contents(tmp_path, capsys, nothing_runs, option):
    f = _work(tmp_path) / "latin1.patch"
    f.write_bytes(b"user:" + PASSWORD.encode() + b"\xe9\xff\n")
    line = _in_process(capsys, tmp_path, option, f)
    assert "not UTF-8" in line and PASSWORD not in line


@pytest.mark.parametrize(
    "option,cap",
    [
        ("ca-bundle", MAX_CA_BUNDLE),
        ("bake-ca", MAX_CA_BUNDLE),
        ("apt-credentials", MAX_CREDENTIALS),
        ("write-credentials", MAX_CREDENTIALS),
        ("patch", MAX_PATCH),
        ("key", signing.MAX_PUBLIC_KEY),
    ],
)
def test_a_file_over_the_cap_is_refused_naming_the_cap(tmp_path, capsys, nothing_runs, option, cap):
    f = _work(tmp_path) / "huge.patch"
    with open(f, "wb") as out:  # sparse: the size without the disk
        out.write(b"user:" + PASSWORD.encode() + b"\n-----BEGIN CERTIFICATE-----\n")
        out.truncate(cap + 1)
    line = _in_process(capsys, tmp_path, option, f)
    assert "larger than" in line and PASSWORD not in line


def test_the_private_signing_key_goes_through_the_reader(tmp_path, monkeypatch):
    monkeypatch.setenv("COSIGN_PASSWORD", "pw")
    fifo = tmp_path / "cosign.key"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match=r"--sign .*cosign.key: is a fifo, not a regular file"):
        signing.check_key(fifo, "COSIGN_PASSWORD")
    with pytest.raises(UserError, match=r"--sign /dev/zero: is a character device"):
        signing.check_key(Path("/dev/zero"), "COSIGN_PASSWORD")
    with pytest.raises(UserError, match="no such key file"):
        signing.check_key(tmp_path / "none.key", "COSIGN_PASSWORD")
    key = tmp_path / "real.key"
    key.write_text("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n")
    assert signing.check_key(key, "COSIGN_PASSWORD") == "pw"


def test_a_fifo_swapped_into_a_catalog_is_a_problem_not_a_hang(tmp_path, monkeypatch):
    """_catalog_files refuses special files; one swapped in after that check is refused by
    the read itself (non-blocking open, then fstat)."""
    fifo = tmp_path / "late.yaml"
    os.mkfifo(fifo)
    monkeypatch.setattr(yaml_loader, "_catalog_files", lambda directory: [fifo])
    problems: list = []
    assert catalog._read_files(tmp_path, problems) == {}
    assert [p.message for p in problems] == ["cannot read: is a fifo, not a regular file"], problems


def test_patch_records_and_the_patch_check_read_through_the_reader(tmp_path):
    """Read again at run time (hash, the throwaway container's copy): a fifo swapped in
    then is one line too."""
    fifo = tmp_path / "fix.patch"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="is a fifo"):
        derive.patch_records([fifo])
    with pytest.raises(UserError, match="is a fifo"):
        derive.check_patches(None, "parent:1", [fifo])


def test_a_path_with_control_characters_stays_on_one_line(tmp_path, capsys, nothing_runs):
    f = tmp_path / "evil\n\x1b[31mname.pem"
    code = cli.main(_build("--ca-bundle", str(f)))
    line = _one_line(capsys, code)
    assert "\x1b" not in line and "evil\\n\\x1b[31mname.pem: no such file" in line


def test_good_files_still_pass(tmp_path):
    pem = tmp_path / "corp.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    creds = tmp_path / "creds"
    creds.write_text(f"user:{PASSWORD}\n")
    assert plan.baked_ca(True, [pem]) == (pem.read_text(),)
    settings = buildsettings.from_options(
        "http://mirror.example/debian", None, [pem], credentials=(creds, None, None, None)
    )
    assert settings.files()["ca.crt"] == pem.read_bytes()
    assert urls.read_credentials(creds, None, "--apt-mirror") == ("user", PASSWORD)
    from builder.core import userfiles

    assert userfiles.MAX_CA_BUNDLE == MAX_CA_BUNDLE and userfiles.MAX_CREDENTIALS == MAX_CREDENTIALS
    assert userfiles.MAX_PATCH == MAX_PATCH
    assert userfiles.read_user_text(pem, "--ca-bundle", 1 << 20).startswith("-----BEGIN")
    assert userfiles.read_user_bytes(pem, "--ca-bundle", 1 << 20).startswith(b"-----BEGIN")


def test_password_stdin_reads_one_bounded_line(monkeypatch):
    """A device or a huge file on standard input is never read to its end."""
    import io

    from builder import registry

    monkeypatch.setattr("sys.stdin", io.StringIO("x" * (registry.MAX_PASSWORD_LINE + 10) + "\n"))
    with pytest.raises(UserError) as caught:
        registry.credentials_from("me", None, None, True)
    assert "longer than" in str(caught.value) and "xxxx" not in str(caught.value)
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret\nrest\n"))
    creds = registry.credentials_from("me", None, None, True)
    assert creds is not None and creds.password == "s3cret"


def test_the_derived_context_holds_the_patch_bytes_checked_not_a_file_swapped_in_later(tmp_path, monkeypatch):
    """The build context gets the bytes read when the job was made; a fifo put in the
    patch's place afterwards is never opened (it would block the copy)."""
    from builder import catalog, image
    from builder.core.contract import Label
    from builder.plan import derive
    from tests.unit.fake_engine import FakeEngine

    patch = tmp_path / "fix.patch"
    patch.write_bytes(b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    engine = FakeEngine()
    engine.add_image("local/parent:1", labels={Label.RELEASE: "21.08", Label.VARIANT: "tf2-py3"})
    spec = derive.DeriveSpec(parent="local/parent:1", patches=[patch])
    job = derive.job(
        spec,
        "local/parent:1",
        engine.inspect("local/parent:1"),
        catalog.load(),
        "me/tf:1",
        "derive-me_tf_1.log",
        compile_cache=None,
        no_cache=False,
    )
    patch.unlink()
    os.mkfifo(patch)
    written = image.write_context(job.context, tmp_path / "context")
    assert (written / "patches" / "fix.patch").read_bytes().startswith(b"--- a/x")

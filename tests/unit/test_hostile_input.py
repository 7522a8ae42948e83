"""Hostile and wrong input, turn 3: each is refused with one line on stderr and exit 2,
before any push, network, engine or write; what reaches a terminal carries no control
character; what a command makes in /tmp goes on every exit. Real subprocesses where the
behaviour is the process's (argv bytes, signals); a fake engine otherwise."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from builder import registry
from builder.cli import main as cli
from builder.core import terminal
from builder.core.errors import BuildError, CatalogError, PatchError, Problem, UserError
from builder.engine.progress import ProgressMode
from builder.supply_chain import signing
from tests.unit.fake_engine import FakeEngine

ROOT = Path(__file__).resolve().parents[2]
# A P-256 public key as `cosign generate-key-pair` writes it.
PUBLIC_KEY = """-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE8RVA7MgQe2y7HF8lr5icYxsi7T/p
oMzMuZbgnNcgnSCL3BuQ9kfWTshokcYaJR9GmIK3wrc1cAlzzVEFwdKeYA==
-----END PUBLIC KEY-----
"""
BUILDER_LABELS = {"dev.tfbuilder.release": "21.08", "dev.tfbuilder.variant": "tf2-py3"}


def one_line_error(capsys, code: int) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and "internal error" not in err
    return lines[0]


@pytest.fixture
def no_network(monkeypatch):
    """Any registry request fails the test: the refusal must come first."""

    def never(*args, **kwargs):
        pytest.fail("the registry was asked before the input was checked")

    for name in ("probe", "_request", "_send", "session", "manifest_digest", "served_manifest", "check_before_build"):
        for module in (registry, registry.transport, registry.manifests):  # wherever it is looked up
            if hasattr(module, name):
                monkeypatch.setattr(module, name, never)
    for name in ("verify_signature", "verify_attestation", "sign_and_attest"):
        monkeypatch.setattr(signing, name, never)


def fake_engine(monkeypatch, **images: dict) -> FakeEngine:
    engine = FakeEngine()
    for ref, labels in images.items():
        engine.add_image(ref, labels=labels)

    def no_shell(image, command):  # as dockerd answers for an image with no such executable
        raise RuntimeError(f'exec: "{command[0]}": executable file not found in $PATH')

    engine.run_handler = no_shell
    monkeypatch.setattr(cli, "_engine", lambda: engine)
    return engine


# --- 1. push --sign, sbom: a builder image, checked before any push ------------------------


def test_push_sign_refuses_an_image_the_builder_did_not_make_before_pushing(tmp_path, monkeypatch, capsys, no_network):
    engine = fake_engine(monkeypatch, **{"helperb/scratch:1": {}})
    monkeypatch.setattr(signing, "unlock", lambda key, env: "pw")  # a key that opens (tested in test_supply_chain)
    key = tmp_path / "cosign.key"
    key.write_text("k")
    code = cli.main(["push", "helperb/scratch:1", "--registry", "r.example/ml", "--sign", str(key)])
    line = one_line_error(capsys, code)
    assert "helperb/scratch:1 was not built by this builder" in line
    assert not {"push", "tag", "run_capture"} & set(engine.names()), engine.names()


def test_sbom_refuses_an_image_the_builder_did_not_make_in_one_line(tmp_path, monkeypatch, capsys):
    engine = fake_engine(monkeypatch, **{"helperb/scratch:1": {}})
    code = cli.main(["sbom", "helperb/scratch:1", "-o", str(tmp_path / "sbom.json")])
    assert "helperb/scratch:1 was not built by this builder" in one_line_error(capsys, code)
    assert "run_capture" not in engine.names() and not (tmp_path / "sbom.json").exists()


def test_a_labelled_image_without_its_files_is_one_line_too(monkeypatch, capsys):
    """Labels copied onto an image without a shell: the engine's own refusal becomes one line."""
    fake_engine(monkeypatch, **{"helperb/labelled:1": BUILDER_LABELS})
    code = cli.main(["sbom", "helperb/labelled:1"])
    line = one_line_error(capsys, code)
    assert (
        "helperb/labelled:1: cannot read /opt/tensorflow/build-info.json" in line
        and "not an image the builder made" in line
    )


@pytest.mark.parametrize(
    "ref", ["$(id)", "Helperb/X:1", "a b", "x\nRUN y"], ids=["command-substitution", "upper-case", "space", "newline"]
)
def test_sbom_and_push_refuse_a_malformed_image_reference(monkeypatch, capsys, ref, no_network):
    engine = fake_engine(monkeypatch)
    for args in (["sbom", ref], ["push", ref, "--registry", "r.example"]):
        line = one_line_error(capsys, cli.main(args))
        assert "is not" in line or "has upper-case" in line, line
    assert engine.names() == []


# --- 2. verify: reference grammar and key, before any network ---------------------------


@pytest.mark.parametrize(
    "ref,why",
    [
        pytest.param("$(id)", "is not a repository name", id="command-substitution"),
        pytest.param("tensorflow:21.08", "names no registry", id="no-registry"),  # Docker Hub is never asked implicitly
        pytest.param("library/tensorflow:21.08", "names no registry", id="no-registry-path"),
        pytest.param("r.example/ml/TF:1", "has upper-case letters", id="upper-case"),
        pytest.param("r.example/ml/tf:1\n", "has an invalid tag", id="newline"),
        pytest.param("r.example/ml/tf@md5:" + "0" * 32, "digest must be sha256:", id="not-sha256"),
        pytest.param("r.example/ml/tf@sha256:abc", "is not an image reference", id="short-digest"),
        pytest.param("", "is empty", id="empty"),
    ],
)
def test_verify_refuses_a_bad_reference_before_any_network(tmp_path, capsys, no_network, ref, why):
    key = tmp_path / "k.pub"
    key.write_text(PUBLIC_KEY)
    line = one_line_error(capsys, cli.main(["verify", ref, "--key", str(key)]))
    assert why in line and line.startswith("error: REF "), line


@pytest.mark.parametrize(
    "content,why",
    [
        pytest.param(b"garbage\n", "not a PEM public key", id="garbage"),
        pytest.param(b"", "not a PEM public key", id="empty"),
        pytest.param(b"\xff\xfe\x00", "not a PEM public key", id="binary"),
        pytest.param(
            b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\neyJr\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n",
            "its PEM block is ENCRYPTED SIGSTORE PRIVATE KEY, not a public key",
            id="private-key",
        ),
        pytest.param(
            b"-----BEGIN PUBLIC KEY-----\nnot base64!\n-----END PUBLIC KEY-----\n", "not base64", id="not-base64"
        ),
        pytest.param(
            b"-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZI\n-----END PUBLIC KEY-----\n",
            "not a DER public key",
            id="truncated-der",
        ),
        pytest.param(
            b"-----BEGIN PUBLIC KEY-----\n" + b"QUFB" * 20 + b"\n-----END PUBLIC KEY-----\n",
            "not a DER public key",
            id="not-der",
        ),
        pytest.param(
            PUBLIC_KEY.replace("-----END PUBLIC KEY-----\n", "").encode(), "not a PEM public key", id="no-end"
        ),
        pytest.param(b"x" * 100_000, "larger than", id="huge"),
    ],
)
def test_verify_refuses_a_key_that_is_not_a_pem_public_key(tmp_path, capsys, no_network, content, why):
    key = tmp_path / "k.pub"
    key.write_bytes(content)
    line = one_line_error(capsys, cli.main(["verify", "r.example/ml/tf:1", "--key", str(key)]))
    assert line.startswith(f"error: --key {key}") and why in line, line


def test_verify_refuses_a_missing_key_or_a_directory(tmp_path, capsys, no_network):
    for key, why in ((tmp_path / "none.pub", "no such file"), (tmp_path, "not a file")):
        line = one_line_error(capsys, cli.main(["verify", "r.example/ml/tf:1", "--key", str(key)]))
        assert why in line, line


def test_a_cosign_public_key_passes_the_check(tmp_path):
    key = tmp_path / "k.pub"
    key.write_text(PUBLIC_KEY)
    signing.check_public_key(key)
    key.write_text("some text cosign skips\n" + PUBLIC_KEY)  # Go's pem.Decode skips text before the block
    signing.check_public_key(key)


# --- 3. cache serve --dir with undecodable bytes -------------------------------------------


def test_a_dir_with_undecodable_bytes_is_refused_before_anything_is_created(tmp_path):
    target = os.fsencode(tmp_path) + b"/c\xff"
    out = subprocess.run(
        [sys.executable, "-m", "builder.cli", "cache", "serve", "--dir", target],
        capture_output=True,
        cwd=ROOT,
        timeout=60,
    )
    err = out.stderr.decode("utf-8", "replace")
    assert out.returncode == 2 and err.count("\n") == 1 and err.startswith("error: --dir "), err
    assert "undecodable" in err and "\\udcff" in err, err
    assert list(tmp_path.iterdir()) == []


# --- 4. control characters in messages ------------------------------------------------------

CONTROLS = [chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]] + ["\u2028", "\u2029", "\udcff"]


def test_escape_leaves_no_control_character_and_keeps_the_rest():
    for c in CONTROLS:
        shown = terminal.escape(f"a{c}b")
        assert shown.isprintable() and shown.startswith("a\\") and shown.endswith("b"), (c, shown)
    assert terminal.escape("a\nb\x1b[2J") == "a\\nb\\x1b[2J"
    assert terminal.escape("plain: é, ü, 日本, 'q' \"dq\" \\") == "plain: é, ü, 日本, 'q' \"dq\" \\"


@hsettings(max_examples=300, deadline=None)
@given(st.text(), st.text(), st.lists(st.text(), max_size=4))
def test_no_report_spans_a_line_it_does_not_own_or_carries_a_control(message, key, details):
    joined = "\n".join(details)
    build = BuildError(message, key, details)
    reports = [
        (UserError(message).report(), 1),
        (CatalogError([Problem("f.yaml", key, message), Problem("g.yaml", "", message)]).report(), 3),
        (PatchError(message, joined).report(), 1 + (len(joined.split("\n")) if joined else 0)),
        (build.report(), 1 + build.disk_full + bool(key) + (1 + len(details) if details else 0)),
    ]
    for text, lines in reports:
        assert text.count("\n") == lines - 1, text
        assert all(line.isprintable() for line in text.split("\n")), text


def test_usage_and_internal_errors_stay_one_line(monkeypatch, capsys):
    """The printer itself: an `error: ` line that is no report keeps its newlines escaped
    (click's usage errors and the internal-error line quote whatever they were given)."""
    assert cli.main(["frob\nRUN x\x1b[2J"]) == 2
    assert capsys.readouterr().err == "error: No such command 'frob\\nRUN x\\x1b[2J'.\n"

    def broken():
        raise RuntimeError("boom\nsecond line \x1b]0;title\x07")

    monkeypatch.setattr(cli, "_catalog", broken)
    assert cli.main(["releases"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err[:-1].isprintable(), err
    assert "boom\\nsecond line \\x1b]0;title\\x07" in err


def write_catalog(tmp_path: Path, extra: str) -> Path:
    from builder import catalog
    from tests.unit.conftest import GOOD

    d = tmp_path / "catalog"
    d.mkdir()
    (d / "_common.yaml").write_text(catalog.RELEASES_DIR.joinpath("_common.yaml").read_text())
    (d / "30.01.yaml").write_text(GOOD + extra)
    return d


@pytest.mark.parametrize(
    "extra",
    [
        'env: {"X\\nRUN touch /tmp/pwned": "1"}\n',
        'labels: {"a\\u001b]0;title\\u0007\\nRUN touch /tmp/pwned": "v"}\n',
        'env: {"X\\rRUN touch /tmp/pwned\\u0085\\u2028": "1"}\n',
    ],
    ids=["env-newline", "label-esc", "env-cr-nel-ls"],
)
def test_catalog_keys_with_control_characters_stay_on_their_line(tmp_path, extra):
    d = write_catalog(tmp_path, extra)
    out = subprocess.run(
        ["builder", "releases"], capture_output=True, timeout=60, env={**os.environ, "BUILDER_CATALOG": str(d)}
    )
    err = out.stderr.decode()
    lines = err.split("\n")
    assert out.returncode == 2 and out.stdout == b"", err
    assert lines[0] == "error: invalid release catalog:" and lines[-1] == "", err
    assert all(line.startswith("  30.01.yaml: ") for line in lines[1:-1]), err
    assert all(line.isprintable() for line in lines), err
    assert "RUN touch /tmp/pwned" in err and ("\\n" in err or "\\r" in err), err


EVIL_HUNKS = (
    "FAILED evil.patch\npatching file a.c\nHunk #1 FAILED at 1.\n"
    "1 out of 1 hunk FAILED -- saving rejects to file a.c.rej\n--- rejected hunks in ./a.c:\n"
    "--- a/a.c\n+++ b/a.c\n@@ -1 +1 @@\n-\x1b]0;pwned\x07old\n+\x1b[2J\x1b[Hnew\r\n+\tindented\x9b1m\n"
)


def test_rejected_hunks_are_shown_with_control_characters_escaped(tmp_path, monkeypatch, capsys):
    engine = fake_engine(monkeypatch, **{"local/tensorflow:21.08-tf2-py3": BUILDER_LABELS})
    engine.run_handler = lambda image, command: (10, EVIL_HUNKS)
    patch = tmp_path / "evil.patch"
    patch.write_text("--- a/a.c\n+++ b/a.c\n@@ -1 +1 @@\n-old\n+new\n")
    code = cli.main(
        [
            "derive",
            "--from",
            "local/tensorflow:21.08-tf2-py3",
            "--tag",
            "my/tf:1",
            "--patch",
            str(patch),
            "--no-host-ca",
            "--no-test",
        ]
    )
    err = capsys.readouterr().err
    lines = err.split("\n")
    assert code == 2, err
    assert (
        lines[0] == "error: patch evil.patch does not apply to the source in local/tensorflow:21.08-tf2-py3: "
        "Hunk #1 FAILED at 1"
    ), err
    assert all(line.isprintable() for line in lines), err
    assert "  -\\x1b]0;pwned\\x07old" in lines and "  +\\x1b[2J\\x1b[Hnew\\r" in lines, err
    assert "  +\\tindented\\x9b1m" in lines, err
    assert len(lines) == 1 + EVIL_HUNKS.strip().count("\n") + 1, err  # one line per hunk line, kept


# --- 5. options the backend cannot honour: refused in the plan ------------------------------


def no_engine():
    pytest.fail("the engine was reached before the options were checked")


@pytest.mark.parametrize(
    "command,option",
    [
        (["build", "-r", "21.08", "-v", "tf2-py3", "--dry-run", "--compression", "zstd"], "--compression zstd"),
        (["build", "-r", "21.08", "-v", "tf2-py3", "--compression", "zstd"], "--compression zstd"),
        (["build", "-r", "21.08", "-v", "tf2-py3", "--dry-run", "--layer-cache", "127.0.0.1:9/cache"], "--layer-cache"),
        (["build", "-r", "21.08", "-v", "tf2-py3", "--dry-run", "--builder", "e2"], "--builder"),
        (["build", "-r", "21.08", "--all", "--dry-run", "--builders", "e2,default"], "--builders"),
        (["base", "-r", "21.08", "--compression", "zstd"], "--compression zstd"),
        (["base", "-r", "21.08", "--print", "--builder", "e2"], "--builder"),
        (
            [
                "derive",
                "--from",
                "local/tensorflow:21.08-tf2-py3",
                "--tag",
                "my/tf:1",
                "--apt",
                "jq",
                "--layer-cache",
                "127.0.0.1:9/cache",
            ],
            "--layer-cache",
        ),
    ],
    ids=[
        "build-dry-run-zstd",
        "build-zstd",
        "build-dry-run-layer-cache",
        "build-dry-run-builder",
        "build-all-builders",
        "base-zstd",
        "base-print-builder",
        "derive-layer-cache",
    ],
)
def test_options_the_legacy_builder_cannot_honour_are_refused_in_the_plan(monkeypatch, capsys, command, option):
    monkeypatch.setenv("BUILDER_BACKEND", "legacy")
    monkeypatch.setattr(cli, "_engine", no_engine)
    monkeypatch.setattr("builder.engine.buildsettings.from_options", lambda *a, **k: pytest.fail("settings read first"))
    line = one_line_error(capsys, cli.main([*command, "--no-host-ca"]))
    assert f"{option} needs the BuildKit backend" in line and "BUILDER_BACKEND=legacy" in line, line


def test_the_plan_refuses_without_buildx_too(monkeypatch):
    from builder import plan as pl

    monkeypatch.delenv("BUILDER_BACKEND", raising=False)
    monkeypatch.setattr("builder.engine.buildkit_engine.buildx_version", lambda: "")
    assert pl.chosen_backend() == ("legacy", "docker buildx is not installed")
    with pytest.raises(
        UserError, match="--compression zstd needs the BuildKit backend .*docker buildx is not installed"
    ):
        pl.check_backend(pl.BackendAsks(compression="zstd"))
    pl.check_backend(pl.BackendAsks())  # nothing asked of BuildKit: fine on either


# --- 6. builder test leaves no temporary directory -----------------------------------------

SUITE = """
import os, time

def test_one(tmp_path):
    (tmp_path / "made").write_text("x")  # pytest's temporary directories exist now
    open({ready!r}, "w").write("ready")
    if {mode!r} == "sleep":
        time.sleep(300)
    assert {mode!r} != "fail"
"""

TEST_DRIVER = """
import sys
from builder.cli import main as cli
from builder.image import describe
from builder.image.conformance import runner
from tests.unit.fake_engine import FakeEngine

runner.command = lambda image, extra, select, container, n=1: [
    sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", {suite!r}]
runner.cleanup_engine = FakeEngine
cli._engine = lambda: None
describe.labels_of = lambda engine, image: {{}}
sys.exit(cli.main(["test", "some/image:1"]))
"""


def run_builder_test(tmp_path: Path, mode: str) -> subprocess.Popen:
    suite = tmp_path / "suite" / "test_s.py"
    suite.parent.mkdir()
    suite.write_text(SUITE.format(ready=str(tmp_path / "ready"), mode=mode))
    script = tmp_path / "driver.py"
    script.write_text(TEST_DRIVER.format(suite=str(suite)))
    (tmp_path / "tmp").mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TMPDIR": str(tmp_path / "tmp"),
        "BUILDER_CACHE_DIR": str(tmp_path / "cache"),
    }
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    )


@pytest.mark.parametrize("mode,code", [("pass", 0), ("fail", 1)])
def test_builder_test_removes_its_temporary_directories_when_pytest_ends(tmp_path, mode, code):
    proc = run_builder_test(tmp_path, mode)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert (tmp_path / "ready").exists(), out + err  # the suite ran and made its directories
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_builder_test_removes_its_temporary_directories_on_a_signal(tmp_path, sig, code):
    proc = run_builder_test(tmp_path, "sleep")
    deadline = time.monotonic() + 120
    while not (tmp_path / "ready").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the suite never started: {proc.communicate()}")
        time.sleep(0.1)
    assert list((tmp_path / "tmp").iterdir()), "pytest made no temporary directory under TMPDIR"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert list((tmp_path / "tmp").iterdir()) == []


# --- 7. push --tries: a ceiling, and a cap on the backoff -----------------------------------


def test_tries_above_the_ceiling_are_one_line_before_the_engine(monkeypatch, capsys, no_network):
    monkeypatch.setattr(cli, "_engine", no_engine)
    line = one_line_error(capsys, cli.main(["push", "local/x:1", "--registry", "r.example", "--tries", "1000000"]))
    assert f"--tries 1000000: at most {registry.MAX_TRIES}" in line, line
    help_text = subprocess.run(
        [sys.executable, "-m", "builder.cli", "push", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "300"},
    ).stdout
    help_text = " ".join(help_text.split())  # as wrapped for the terminal
    assert f"at most {registry.MAX_TRIES};" in help_text, help_text
    assert f"double from {registry.BACKOFF:.0f} s and are capped at {registry.BACKOFF_CAP:.0f} s" in help_text


def test_the_backoff_between_tries_is_capped(monkeypatch):
    engine = FakeEngine()
    engine.add_image("local/x:1")
    engine.push_transient_failures = registry.MAX_TRIES
    waits: list[float] = []
    monkeypatch.setattr(registry, "probe", lambda host, insecure=False: registry.Transport(host, "https", True))
    monkeypatch.setattr(registry, "config_credentials", lambda host: None)
    monkeypatch.setattr(registry.time, "sleep", waits.append)
    with pytest.raises(registry.PushError, match=f"after {registry.MAX_TRIES} tries"):
        registry.Pusher(engine, tries=registry.MAX_TRIES, progress=ProgressMode.QUIET).push(
            "local/x:1", "r.example/x:1", None
        )
    assert len(waits) == registry.MAX_TRIES - 1
    assert waits[:3] == [2, 4, 8] and max(waits) == registry.BACKOFF_CAP
    assert sum(waits) <= registry.MAX_TRIES * registry.BACKOFF_CAP

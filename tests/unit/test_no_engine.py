"""With no engine at all, a bad option is still its own one line and exit 2: every command
checks its options (its plan, the settings, the credentials, the key) before it connects,
so nobody is told "cannot reach the Docker engine" about a typo. Run as a user runs it:
`python3 -m builder.cli` with DOCKER_HOST pointing nowhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from builder import plan as pl
from builder import run
from builder.engine.buildsettings import BuildSettings

ROOT = Path(__file__).resolve().parents[2]
NOWHERE = "unix:///nonexistent/docker.sock"
DERIVE = ["derive", "--from", "local/tensorflow:21.08-tf2-py3", "--tag", "my/tf:1", "--apt", "jq"]

CASES = [
    (DERIVE + ["--compression", "xz"], "error: --compression 'xz': use one of gzip, zstd"),
    (DERIVE + ["--layer-cache", "BAD"], "error: --layer-cache"),
    (DERIVE + ["--apt-mirror", "ftp://mirror"], "error: --apt-mirror 'ftp://mirror' is not an http:// or https:// URL"),
    (DERIVE + ["--ca-bundle", "/nonexistent/ca.pem"], "error: --ca-bundle /nonexistent/ca.pem: no such file"),
    (
        DERIVE + ["--push", "--registry", "reg.example", "--password-env", "NO_SUCH_VARIABLE_HERE"],
        "error: --password-env NO_SUCH_VARIABLE_HERE: that variable is not set",
    ),
    (["base", "-r", "21.08", "--layer-cache", "BAD"], "error: --layer-cache"),
    (["base", "-r", "21.08", "--compression", "xz"], "error: --compression 'xz': use one of gzip, zstd"),
    (
        ["base", "-r", "21.08", "--ca-bundle", "/nonexistent/ca.pem"],
        "error: --ca-bundle /nonexistent/ca.pem: no such file",
    ),
    (["build", "-r", "21.08", "--compression", "xz"], "error: --compression 'xz': use one of gzip, zstd"),
    (
        ["build", "-r", "21.08", "--push", "-t", "reg.example/tf:1", "--password-env", "NO_SUCH_VARIABLE_HERE"],
        "error: --password-env NO_SUCH_VARIABLE_HERE: that variable is not set",
    ),
    (
        ["push", "reg.example/tf:1", "--password-env", "NO_SUCH_VARIABLE_HERE"],
        "error: --password-env NO_SUCH_VARIABLE_HERE: that variable is not set",
    ),
    (
        ["push", "reg.example/tf:1", "--sign", "/nonexistent/cosign.key"],
        "error: --sign /nonexistent/cosign.key: no such key",
    ),
    (["push", "reg.example/tf:1", "--tries", "0"], "error: --tries 0: at most 10 and at least 1"),
    (["inspect", "local/tf:1", "--cuda-cc", "abc"], "error: --cuda-cc: 'abc' is not a compute capability"),
]


def cli(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "DOCKER_HOST": NOWHERE, "PYTHONPATH": str(ROOT)}
    env.pop("NO_SUCH_VARIABLE_HERE", None)
    return subprocess.run(
        [sys.executable, "-m", "builder.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("args, line", CASES, ids=[" ".join(a[:1] + a[-2:]) for a, _ in CASES])
def test_a_bad_option_is_its_own_line_without_an_engine(args, line):
    proc = cli(args)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, proc.stderr
    assert err[0].startswith(line) and "cannot reach" not in err[0], err[0]


def test_no_engine_is_one_line_once_the_options_are_good():
    """The other side: good options, then the connect factory answers for the engine."""
    proc = cli(["inspect", "local/tf:1"])
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and err == [err[0]] and err[0].startswith("error: cannot reach the Docker engine")


def never():
    pytest.fail("the engine was connected before the options were checked")


def test_the_run_functions_take_a_factory_and_check_before_calling_it(tmp_path):
    """run_base reads the settings, run_push the --sign key, before they call CONNECT."""
    from builder import catalog
    from builder.core.errors import UserError

    plan = pl.plan_base(catalog.load(), "21.08")
    with pytest.raises(UserError, match="--ca-bundle"):
        run.run_base(plan, never, BuildSettings(ca_bundles=(tmp_path / "missing.pem",)))
    push = pl.plan_push("reg.example/tf:1", None, sign=tmp_path / "missing.key")
    with pytest.raises(UserError, match="--sign"):
        run.run_push(push, never)


def test_a_dry_run_prints_its_plan_without_an_engine():
    """--dry-run only asks the engine whether the base is there: without one it says it did
    not check, and the plan (tags, base, images) is printed all the same, exit 0."""
    proc = cli(["build", "-r", "21.08", "-v", "tf2-py3", "--dry-run"])
    assert proc.returncode == 0, proc.stderr
    assert "whether the base is here is not checked" in proc.stderr
    assert "presence not checked" in proc.stderr
    plan = json.loads(proc.stdout.strip().splitlines()[-1])
    assert plan["tags"][0] == "local/tensorflow:21.08-tf2-py3" and plan["build_base"] is True

"""--platform, as Docker spells it: each release says which platforms it serves, and a
platform it cannot serve is refused in one line, before anything is built."""

import pytest

from builder import catalog
from builder.catalog import policy
from builder.cli import main as cli


@pytest.fixture(scope="module")
def releases():
    return catalog.load()


def test_every_release_serves_amd64_and_says_why_not_arm64(releases):
    for rel in releases.releases.values():
        served = policy.platforms_served(rel)
        assert served["linux/amd64"] is None
        assert "CPU-only" in served["linux/arm64"] and "compiled from source" in served["linux/arm64"]


@pytest.mark.parametrize(
    "platform,tree,text",
    [
        ("linux/arm64", False, "cannot serve an arm64 GPU: TensorFlow's aarch64 wheels on PyPI are CPU-only"),
        ("linux/arm64", True, "offline base is built for linux/amd64 only"),
        ("linux/riscv64", False, "release 26.11 serves linux/amd64 only (Docker's OS/ARCH form; linux/arm64 refused"),
        ("arm64", False, "release 26.11 serves linux/amd64 only"),
    ],
)
def test_what_cannot_be_served_is_refused_naming_why(releases, platform, tree, text):
    assert text in policy.why_not_platform(releases.get("26.11"), platform, tree)


def test_amd64_is_served(releases):
    assert policy.why_not_platform(releases.get("21.08"), "linux/amd64", False) is None


def test_build_refuses_arm64_in_one_line_before_the_engine(monkeypatch, capsys):
    monkeypatch.setattr(cli, "_engine", lambda: pytest.fail("the engine was reached"))
    code = cli.main(["build", "--release", "26.11", "--platform", "linux/arm64", "--dry-run"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "CPU-only" in err[0] and "arm64 CUDA base" in err[0], err

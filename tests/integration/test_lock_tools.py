"""`builder lock` with a tool named by a range, against the real index with the real
resolver (uv; no engine): it tries the tool's versions newest first, says why each newer
one was refused, and locks the first that resolves with the release; with none, one line
naming every refusal, and no lock written. A private catalog (BUILDER_CATALOG) holds 21.08
with JupyterLab as a range and the pins of JupyterLab 3's era."""

from __future__ import annotations

import re

import pytest

from builder import catalog

from .conftest import builder


def private_catalog(root, requirement: str):
    root.mkdir()
    for name in ("_common.yaml", "21.06.yaml", "21.08.yaml"):
        (root / name).write_text((catalog.RELEASES_DIR / name).read_text())
    with (root / "21.08.yaml").open("a") as f:
        f.write(f'jupyter: {{requirement: "{requirement}", pins: ["jsonschema<4.18", "jupyter-server<2"]}}\n')
    return root


def test_a_range_locks_the_newest_version_that_resolves_and_says_why_not_the_newer(tmp_path, monkeypatch):
    monkeypatch.setenv("BUILDER_CATALOG", str(private_catalog(tmp_path / "catalog", "jupyterlab>=3.6,<4.1")))
    out = builder("lock", "--release", "21.08", timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    for python in ("3.8", "3.9"):  # JupyterLab 4.0 needs jupyter-server 2; the catalog pins < 2
        refused = re.search(rf"21\.08/tf2-py3 py{python}: jupyterlab 4\.0\.\d+: refused \((.+)\)$", out.stderr, re.M)
        assert refused and "jupyter-server" in refused.group(1), out.stderr[-3000:]
        assert re.search(rf"py{python}: jupyterlab 3\.6\.\d+: locked \(jupyterlab>=3\.6,<4\.1\)$", out.stderr, re.M)
        text = (tmp_path / "catalog" / "locks" / "21.08" / f"tf2-py3-py{python}.txt").read_text()
        assert re.search(r"^jupyterlab==3\.6\.\d+ ", text, re.M) and re.search(r"^jsonschema==4\.17\.", text, re.M)
    check = builder("lock", "--check", "--release", "21.08")
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("requirement", ["jupyterlab>=4.4,<5"])
def test_a_range_where_nothing_resolves_is_one_line_naming_each_try(tmp_path, monkeypatch, requirement):
    monkeypatch.setenv("BUILDER_CATALOG", str(private_catalog(tmp_path / "catalog", requirement)))
    out = builder("lock", "--release", "21.08", timeout=600)
    assert out.returncode == 2, out.stderr[-3000:]
    error = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and f"no version of '{requirement}' resolves with the release" in error[0], out.stderr
    assert all(f"4.{minor}." in error[0] for minor in (4, 5)) and "name the tool absent" in error[0]
    assert not (tmp_path / "catalog" / "locks" / "21.08").exists()

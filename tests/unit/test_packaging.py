"""The builder as an installed tool: a wheel built from this checkout, installed into a
clean virtual environment, runs from another directory with no BUILDER_HOME (templates,
the catalog, the locks, nvbuild.sh and the conformance suite are package data); and the
paths it then uses, tested in process with the wheel's layout stood in for.

The wheel is built from a copy of the checkout's files with the checkout's commit in
BUILD_COMMIT (what an sdist carries): building in place would write build/ into the
checkout. Building and installing takes about 15 s with pip's cache warm."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from builder.cli import main as cli
from builder.core import paths, provenance, version
from builder.core.errors import UserError
from builder.run.run_files import run_render_all

ROOT = Path(__file__).resolve().parents[2]
NO_COPY = shutil.ignore_patterns(
    ".git", "__pycache__", "*.pyc", "build", "dist", "*.egg-info", ".pytest_cache", ".hypothesis", "out", ".venv"
)
# The modes that matter: nvbuild.sh and the scripts the images run keep their executable bit.
EXECUTABLES = (
    "nvbuild.sh",
    "templates/with-build-settings",
    "templates/pip-constraints",
    "templates/collect-compiled",
    "framework-src/configure",
)
SUITE = (
    "pytest.ini",
    "plugin.py",
    "runner.py",
    "test_image.py",
    "test_python_env.py",
    "derived/test_derived.py",
)


def load_setup():
    """setup.py as a module (setup() itself runs only as __main__)."""
    spec = importlib.util.spec_from_file_location("tfbuilder_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def project_version() -> str:
    return re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)


def copy_checkout(dest: Path) -> None:
    """The checkout's files as an sdist holds them: what git sees, or (no git) the tree
    without build products."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "-co", "--exclude-standard"], capture_output=True, text=True
    )
    if listed.returncode != 0:
        shutil.copytree(ROOT, dest, ignore=NO_COPY)
        return
    for rel in filter(None, listed.stdout.split("\0")):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> tuple[Path, str]:
    """(the wheel built from this checkout, the commit it says it was built from)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src, dist = tmp / "src", tmp / "dist"
    copy_checkout(src)
    commit = version.checkout_commit(ROOT)
    (src / "BUILD_COMMIT").write_text(commit + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    (built,) = dist.glob("tf_image_builder-*.whl")
    return built, commit


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A clean virtual environment with the wheel and its dependencies; its bin/."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel[0])],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    return venv / "bin"


@pytest.fixture
def outside(tmp_path) -> Path:
    """A working directory outside the checkout."""
    d = tmp_path / "elsewhere"
    d.mkdir()
    return d


def run_installed(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("BUILDER_HOME", "BUILDER_CATALOG", "PYTHONPATH")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [str(bin_dir / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ROOT: its bytes and permission bits."""
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# --- the wheel ------------------------------------------------------------------------


def test_the_wheel_carries_the_data_the_builder_reads_with_its_modes(wheel):
    built, commit = wheel
    with zipfile.ZipFile(built) as z:
        modes = {i.filename: stat.S_IMODE(i.external_attr >> 16) for i in z.infolist()}
        assert z.read("builder/_data/BUILD_COMMIT").decode().strip() == commit
    shipped = load_setup().shipped_files(ROOT)
    assert {f"builder/_data/{p}" for p in shipped} <= set(modes)
    assert "builder/_data/framework-src/.gitignore" in modes  # dotfiles travel
    for rel in EXECUTABLES:
        assert modes[f"builder/_data/{rel}"] == 0o755, rel
    assert {f"builder/image/conformance/{p}" for p in SUITE} <= set(modes)
    assert {
        "builder/releases/21.08.yaml",
        "builder/releases/_common.yaml",
        "builder/locks/21.08/tf2-py3-py3.8.txt",
        "builder/locks/horovod/horovod-0.22.1.txt",
    } <= set(modes)
    assert not [n for n in modes if "__pycache__" in n or n.endswith(".pyc")]
    print(f"wheel: {built.name}, {built.stat().st_size / 1e6:.2f} MB, {len(modes)} files")


def test_an_untracked_file_that_ships_makes_the_commit_dirty(tmp_path):
    """An untracked patch under templates/ ships in the wheel and in images: the commit
    they name says -dirty, which `git describe --dirty` alone would not."""
    setup = load_setup()
    for rel in ("templates/Dockerfile.j2", "framework-src/configure", "nvbuild.sh", "builder/__init__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "c"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    clean = setup.build_commit(tmp_path)
    assert not clean.endswith("-dirty") and version.checkout_commit(tmp_path) == clean
    (tmp_path / "templates" / "extra.patch").write_text("+x\n")
    assert "templates/extra.patch" in setup.shipped_files(tmp_path)
    assert setup.build_commit(tmp_path) == version.checkout_commit(tmp_path) == f"{clean}-dirty"


def test_setup_ships_what_git_sees_and_says_the_checkouts_commit(tmp_path):
    setup = load_setup()
    shipped = setup.shipped_files(ROOT)
    assert {"nvbuild.sh", "templates/Dockerfile.j2", "framework-src/configure"} <= set(shipped)
    assert not [p for p in shipped if "__pycache__" in p or p.startswith("builder/")]
    assert setup.build_commit(ROOT) == version.checkout_commit(ROOT)
    # an unpacked sdist: no git, its BUILD_COMMIT says
    (tmp_path / "BUILD_COMMIT").write_text("0123456789ab-dirty\n")
    assert setup.build_commit(tmp_path) == "0123456789ab-dirty"
    (tmp_path / "BUILD_COMMIT").unlink()
    assert setup.build_commit(tmp_path) == "unknown"


def test_setup_without_git_walks_the_tree_leaving_build_products_out(tmp_path):
    setup = load_setup()
    for rel in (
        "nvbuild.sh",
        "templates/a.j2",
        "framework-src/.gitignore",
        "framework-src/src/x.cc",
        "framework-src/build/out.o",
        "framework-src/config.mk",
        "templates/__pycache__/a.pyc",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert setup.shipped_files(tmp_path) == [
        "framework-src/.gitignore",
        "framework-src/src/x.cc",
        "nvbuild.sh",
        "templates/a.j2",
    ]


# --- the installed tool, run from elsewhere --------------------------------------------


def test_installed_files_keep_their_modes(installed):
    (site,) = installed.parent.glob("lib/python*/site-packages")
    for rel in EXECUTABLES:
        assert os.access(site / "builder" / "_data" / rel, os.X_OK), rel


def test_version_names_the_commit_the_wheel_was_built_from(installed, wheel, outside):
    want = f"builder {project_version()} (commit {wheel[1]}, wheel)"
    proc = run_installed(
        installed, outside, "python", "-c", "from builder.core.version import version_text; print(version_text())"
    )
    assert proc.stdout.strip() == want, proc.stderr
    if "--version" in run_installed(installed, outside, "builder", "--help").stdout:  # wired in builder/cli/__init__.py
        proc = run_installed(installed, outside, "builder", "--version")
        assert (proc.returncode, proc.stdout.strip()) == (0, want), proc.stderr


def test_releases_lists_the_shipped_catalog(installed, outside, capsys):
    proc = run_installed(installed, outside, "builder", "releases")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^21\.08\s", proc.stdout, re.M) and re.search(r"^26\.11\s", proc.stdout, re.M)
    assert cli.main(["releases"]) == 0
    assert proc.stdout == capsys.readouterr().out  # the checkout's catalog, all of it


def test_render_prints_the_checkouts_dockerfile(installed, outside, capsys):
    args = ["render", "--release", "21.08", "--variant", "tf2-py3"]
    proc = run_installed(installed, outside, "builder", *args)
    assert proc.returncode == 0, proc.stderr
    assert cli.main(args) == 0
    assert proc.stdout == capsys.readouterr().out
    assert proc.stdout.startswith("# Generated") and "nvbuild.sh" in proc.stdout


def test_render_all_into_a_directory_makes_the_committed_dockerfiles(installed, outside):
    """-o needs no checkout; each context's Dockerfile is the one dockerfiles/ holds (the
    release's own options, as `render --all` writes them)."""
    proc = run_installed(installed, outside, "builder", "render", "--all", "-o", str(outside / "contexts"))
    assert proc.returncode == 0, proc.stderr
    committed = sorted(ROOT.glob("dockerfiles/*/*.Dockerfile"))
    assert any(p.match("21.08/tf2-py3.Dockerfile") for p in committed)
    for path in committed:
        context = outside / "contexts" / path.parent.name / path.name.removesuffix(".Dockerfile")
        assert (context / "Dockerfile").read_text() == path.read_text(), path
        assert stat.S_IMODE((context / "nvbuild.sh").stat().st_mode) == 0o755


def test_a_build_context_is_the_one_the_checkout_writes(installed, outside, capsys):
    """Files, bytes and modes: nvbuild.sh, the scripts, the framework source with its dotfiles."""
    args = ["render", "--release", "21.08", "--variant", "tf2-py3", "-o"]
    proc = run_installed(installed, outside, "builder", *args, str(outside / "wheel"))
    assert proc.returncode == 0, proc.stderr
    assert cli.main([*args, str(outside / "checkout")]) == 0, capsys.readouterr().err
    from_wheel, from_checkout = tree(outside / "wheel"), tree(outside / "checkout")
    assert sorted(from_wheel) == sorted(from_checkout)
    assert from_wheel == from_checkout
    assert from_wheel["nvbuild.sh"][1] == 0o755 and "tensorflow-source/.gitignore" in from_wheel


def test_render_all_is_refused_outside_a_checkout_in_one_line(installed, outside):
    for extra in ([], ["--check"]):
        proc = run_installed(installed, outside, "builder", "render", "--all", *extra)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
        assert "installed from a wheel" in proc.stderr and "dockerfiles/" in proc.stderr
    assert not list(outside.iterdir())  # nothing written where it ran


def test_lock_checks_but_never_rewrites_the_installed_locks(installed, outside):
    """`builder lock --check` compares the shipped locks; `builder lock` would rewrite files
    inside site-packages, so it is refused in one line (a private catalog's locks are not)."""
    assert run_installed(installed, outside, "builder", "lock", "--check").returncode == 0
    proc = run_installed(installed, outside, "builder", "lock", "--release", "21.08")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "rewrites the shipped builder/locks/" in proc.stderr and "BUILDER_CATALOG" in proc.stderr


def test_the_conformance_suite_collects_from_the_wheel(installed, outside):
    """`builder test` runs pytest over the installed suite (its pytest.ini, plugin, derived/, the
    components' tests)."""
    ask = (
        "import json; from builder.image.conformance import runner; "
        "print(json.dumps(runner.command('local/x:y', [], None, 'c')))"
    )
    cmd = json.loads(run_installed(installed, outside, "python", "-c", ask).stdout)
    assert "/site-packages/builder/image/conformance" in cmd[cmd.index("-c") + 1]
    at = cmd.index("-q") + 1
    suite, parts = cmd[at], cmd[at + 1 :]  # the suite, then each component's tests (builder/components/)
    assert all("/site-packages/builder/components/" in p for p in parts), parts
    for target in (suite, f"{suite}/derived", *parts):
        proc = run_installed(installed, outside, "python", *cmd[1:at], "--collect-only", target)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert re.search(r"^\d+ tests? collected", proc.stdout, re.M), proc.stdout


def test_uv_and_syft_are_found_without_the_venv_on_path(installed, outside):
    """pipx puts only `builder` on PATH: the locks' uv and the SBOM's syft come from their packages."""
    ask = "from builder.catalog import lock_resolve; from builder.supply_chain import sbom; print(lock_resolve.uv_command()[0]); print(sbom.syft_dir())"
    proc = subprocess.run(
        [str(installed / "python"), "-c", ask],
        cwd=outside,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(outside)},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert all(line.startswith(str(installed.parent)) for line in proc.stdout.splitlines()), proc.stdout


def test_a_dry_run_from_the_wheel(installed, outside):
    """The plan is printed whether or not an engine answers (without one, it says so)."""
    proc = run_installed(installed, outside, "builder", "build", "--release", "21.08", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (plan["release"], plan["variant"]) == ("21.08", "tf2-py3")
    assert plan["tags"][0] == "local/tensorflow:21.08-tf2-py3"


# --- the paths, with an installed wheel's layout stood in for ---------------------------


@pytest.fixture
def as_wheel(tmp_path, monkeypatch) -> Path:
    """builder/ as a wheel installs it: site-packages/builder/_data with the shipped files."""
    package = tmp_path / "site-packages" / "builder"
    data = package / "_data"
    shutil.copytree(ROOT / "templates", data / "templates")
    (data / "BUILD_COMMIT").write_text("0123456789ab\n")
    monkeypatch.delenv("BUILDER_HOME", raising=False)
    monkeypatch.setattr(paths, "PACKAGE_DIR", package)
    monkeypatch.setattr(paths, "DATA_DIR", data)
    monkeypatch.setattr(paths, "BUILD_COMMIT", data / "BUILD_COMMIT")
    return data


def test_a_checkout_is_the_directory_above_builder(monkeypatch):
    monkeypatch.delenv("BUILDER_HOME", raising=False)
    assert paths.checkout_root() == ROOT and paths.project_root() == ROOT
    assert version.installed_from() == "checkout"


def test_a_wheel_reads_its_data_and_says_its_commit(as_wheel):
    assert paths.checkout_root() is None
    assert paths.project_root() == as_wheel and paths.templates_dir() == as_wheel / "templates"
    assert provenance.source_ref() == "0123456789ab" == version.source_commit()
    assert version.installed_from() == "wheel"


def test_a_damaged_or_missing_build_commit_reads_as_unknown(as_wheel):
    (as_wheel / "BUILD_COMMIT").write_text("abc\n$(reboot)\n")
    assert provenance.source_ref() == "unknown"
    (as_wheel / "BUILD_COMMIT").unlink()
    assert provenance.source_ref() == "unknown"


def test_a_wheel_whose_data_is_missing_is_one_line(as_wheel):
    shutil.rmtree(as_wheel / "templates")
    with pytest.raises(UserError, match="installed builder has no templates/"):
        paths.project_root()


def test_render_all_needs_a_checkout(as_wheel):
    with pytest.raises(UserError, match=r"installed from a wheel .*give -o DIR"):
        run_render_all(None, None, False)
    with pytest.raises(UserError, match="installed from a wheel"):
        run_render_all(None, None, True)


def test_builder_home_names_a_checkout(tmp_path, monkeypatch, as_wheel):
    monkeypatch.setenv("BUILDER_HOME", str(tmp_path / "nowhere"))
    assert paths.checkout_root() == tmp_path / "nowhere"
    with pytest.raises(UserError, match=r"BUILDER_HOME=.* has no templates/"):
        paths.project_root()
    with pytest.raises(UserError, match="has no templates/"):
        paths.require_checkout("x")
    monkeypatch.setenv("BUILDER_HOME", str(ROOT))
    assert paths.require_checkout("x") == ROOT and version.installed_from() == "checkout"

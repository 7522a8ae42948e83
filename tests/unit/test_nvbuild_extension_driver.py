"""Contract test of nvbuild.sh's extension driver: what it records and prints. It runs the
real nvbuild.sh on a minimal extension-shaped tree whose Makefile "compiles" through
$(COMPILER_LAUNCHER) with a fake compiler, and a fake ccache on PATH that logs in
ccache's format (so the units really compiled are known). Nothing is compiled here."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import STUB_REPORT

ROOT = Path(__file__).resolve().parents[2]

MAKEFILE = """\
all:
\tfor f in csrc/ops/*.cc; do $(COMPILER_LAUNCHER) ./fakecc -c $$f -o build/x.o || exit 1; done
wheel:
\t$(PYTHON) make_wheel.py $(WHEEL_DIR)
clean:
\trm -rf build
"""

# A wheel of a `tfext` whose build info holds what nvbuild.sh exported to the build.
MAKE_WHEEL = r"""
import base64, hashlib, json, os, sys, zipfile
from pathlib import Path
info = {"patches": json.loads(os.environ.get("NVBUILD_PATCHES_JSON") or "[]"),
        "modified_files": json.loads(os.environ.get("NVBUILD_MODIFIED_JSON") or "[]")}
files = {
    "tfext/__init__.py": "from tfext import sysconfig\n",
    "tfext/sysconfig.py": f"def get_build_info():\n    return {info!r}\n",
    "tfext-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: tfext\nVersion: 0.1\n",
    "tfext-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: fake\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = [f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b'=').decode()},{len(t.encode())}"
          for n, t in files.items()] + ["tfext-0.1.dist-info/RECORD,,"]
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
with zipfile.ZipFile(out / "tfext-0.1-py3-none-any.whl", "w") as z:
    for n, t in files.items():
        z.writestr(n, t)
    z.writestr("tfext-0.1.dist-info/RECORD", "\n".join(record) + "\n")
"""

# ccache's log lines as units_report reads them; a unit compiled before with the same
# content is a hit, as with a kept cache.
FAKE_CCACHE = r"""#!/usr/bin/env python3
import hashlib, os, subprocess, sys
if sys.argv[1:2] == ["--version"]:
    print("ccache version 4.9.1\nFeatures: http-storage")
    sys.exit(0)
src = next(a for a in sys.argv if a.endswith(".cc"))
if os.environ.get("FAKE_CCACHE_ENV"):  # where nvbuild.sh told ccache to keep its objects
    with open(os.environ["FAKE_CCACHE_ENV"], "a") as f:
        f.write(f"{os.environ.get('CCACHE_DIR')} {os.environ.get('CCACHE_REMOTE_ONLY', '-')}\n")
key = src + ":" + hashlib.sha256(open(src, "rb").read()).hexdigest()
store = os.environ["FAKE_CCACHE_STORE"]  # the test's, not nvbuild.sh's CCACHE_DIR
seen = open(store).read().split() if os.path.exists(store) else []
result = "direct_cache_hit" if key in seen else "cache_miss"
with open(store, "a") as f:
    f.write(key + "\n")
with open(os.environ["CCACHE_LOGFILE"], "a") as log:
    pid = os.getpid()
    log.write(f"[2026-01-01T00:00:00.000000 {pid} ] Working directory: {os.getcwd()}\n")
    log.write(f"[2026-01-01T00:00:00.000000 {pid} ] Source file: {src}\n")
    log.write(f"[2026-01-01T00:00:00.000000 {pid} ] Result: {result}\n")
sys.exit(subprocess.call(sys.argv[1:]))
"""


@pytest.fixture
def tree(tmp_path, venv):
    opt = tmp_path / "opt"
    src = opt / "tensorflow-source"
    (src / "python" / "tfext").mkdir(parents=True)
    (src / "csrc" / "ops").mkdir(parents=True)
    (src / "python" / "tfext" / "__init__.py").write_text("")
    for unit in ("a", "b"):
        (src / "csrc" / "ops" / f"{unit}.cc").write_text(f"int {unit}() {{ return 1; }}\n")
    (src / "configure").write_text("#!/bin/sh\necho 'PYTHON=python3' > config.mk\n")
    (src / "fakecc").write_text("#!/bin/sh\nexit 0\n")
    (src / "Makefile").write_text(MAKEFILE.replace("$(PYTHON)", str(venv)))
    (src / "make_wheel.py").write_text(MAKE_WHEEL)
    for exe in ("configure", "fakecc"):
        (src / exe).chmod(0o755)
    shutil.copy(ROOT / "nvbuild.sh", opt)
    (opt / "image_report.py").write_text(STUB_REPORT)
    shutil.copy(ROOT / "builder" / "in_image" / "cuda_arch.py", opt)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ccache").write_text(FAKE_CCACHE)
    (bin_dir / "ccache").chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{Path(venv).parent}:/usr/bin:/bin",
        "PYTHON_BIN_PATH": str(venv),
        "NVBUILD_WHEEL_DIR": str(tmp_path / "pip"),
        "NVBUILD_BUILD_INFO": str(tmp_path / "build-info.json"),
        "NVBUILD_HOROVOD": "0",
        "HOME": str(tmp_path),
        "FAKE_CCACHE_STORE": str(tmp_path / "ccache-store"),
    }

    def run(*args, path=None, extra=None):
        e = dict(env, PATH=path) if path else dict(env)
        e.update(extra or {})
        proc = subprocess.run(
            ["bash", str(opt / "nvbuild.sh"), *args], capture_output=True, text=True, env=e, timeout=300
        )
        info = json.loads((tmp_path / "build-info.json").read_text()) if proc.returncode == 0 else None
        return proc, info

    run.src, run.opt, run.bin = src, opt, bin_dir
    return run


def compiled(stderr):
    return [line.split("compiled: ", 1)[1] for line in stderr.splitlines() if "nvbuild.sh: compiled: " in line]


def test_compiled_units_are_listed_without_a_compile_cache(tree):
    proc, _ = tree()
    assert proc.returncode == 0, proc.stderr
    assert compiled(proc.stderr) == ["csrc/ops/a.cc", "csrc/ops/b.cc"]
    assert "compile cache:" not in proc.stderr


@pytest.fixture
def http_cache(loopback_http):
    return f"{loopback_http}/ccache"


def test_compiled_units_are_listed_with_a_compile_cache(tree, http_cache):
    proc, _ = tree("--cache", http_cache, "--noclean")
    assert proc.returncode == 0, proc.stderr
    assert "nvbuild.sh: compile cache: 0 of 2 translation units from the cache" in proc.stderr
    assert compiled(proc.stderr) == ["csrc/ops/a.cc", "csrc/ops/b.cc"]
    (tree.src / "csrc" / "ops" / "b.cc").write_text("int b() { return 2; }\n")
    proc, _ = tree("--cache", http_cache)  # the cache has a.cc as it is: only b.cc compiles
    assert "compile cache: 1 of 2 translation units from the cache" in proc.stderr
    assert compiled(proc.stderr) == ["csrc/ops/b.cc"]


def ccache_dirs(record: Path) -> set[str]:
    return set(record.read_text().splitlines())


def test_a_mounted_local_cache_keeps_objects_between_builds(tree, tmp_path):
    """NVBUILD_LOCAL_CACHE a mount point (as BuildKit's cache mount is): ccache keeps its
    objects there, and the report counts the units it had."""
    record = tmp_path / "ccache-env"
    extra = {"NVBUILD_LOCAL_CACHE": "/proc", "FAKE_CCACHE_ENV": str(record)}  # /proc: always a mount point
    proc, _ = tree(extra=extra)
    assert proc.returncode == 0, proc.stderr
    assert "compile cache: 0 of 2 translation units from the cache" in proc.stderr
    assert ccache_dirs(record) == {"/proc/ccache -"}
    (tree.src / "csrc" / "ops" / "b.cc").write_text("int b() { return 2; }\n")
    proc, _ = tree(extra=extra)
    assert "compile cache: 1 of 2 translation units from the cache" in proc.stderr
    assert compiled(proc.stderr) == ["csrc/ops/b.cc"]


def test_a_plain_directory_is_never_the_local_cache(tree, tmp_path):
    """Not a mount point (a legacy build, a plain docker build): the objects would land in the
    image's layer, so the temporary cache is used and nothing is counted as cached."""
    plain = tmp_path / "var-cache-nvbuild"
    plain.mkdir()
    record = tmp_path / "ccache-env"
    proc, _ = tree(extra={"NVBUILD_LOCAL_CACHE": str(plain), "FAKE_CCACHE_ENV": str(record)})
    assert proc.returncode == 0, proc.stderr
    assert ccache_dirs(record) == {"/tmp/ccache -"}
    assert "compile cache:" not in proc.stderr and list(plain.iterdir()) == []


def test_a_shared_cache_replaces_the_mounted_one(tree, tmp_path, http_cache):
    """--cache means the shared cache only, mounted local cache or not: every machine that
    shares it sees the same lookups."""
    record = tmp_path / "ccache-env"
    proc, _ = tree("--cache", http_cache, extra={"NVBUILD_LOCAL_CACHE": "/proc", "FAKE_CCACHE_ENV": str(record)})
    assert proc.returncode == 0, proc.stderr
    assert ccache_dirs(record) == {"/tmp/ccache true"}


def test_without_ccache_a_warning_says_units_are_not_listed(tree):
    (tree.bin / "ccache").unlink()
    proc, _ = tree()
    assert proc.returncode == 0, proc.stderr
    assert "warning: ccache is not installed: the extension's compiled units are not listed" in proc.stderr
    assert compiled(proc.stderr) == []


def test_added_changed_and_removed_files_are_recorded_with_the_patches(tree):
    proc, info = tree()  # as the release image: the shipped source, nothing modified
    assert proc.returncode == 0, proc.stderr
    assert info["modified_files"] == [] and info["patches"] == []
    # As a derived image: a patch that adds a file, changes one and removes one.
    (tree.opt / "patches").mkdir()
    (tree.opt / "patches" / "mine.patch").write_text("--- a/x\n+++ b/x\n")
    (tree.src / "csrc" / "ops" / "new.cc").write_text("int n() { return 3; }\n")
    (tree.src / "csrc" / "ops" / "a.cc").write_text("int a() { return 4; }\n")
    (tree.src / "csrc" / "ops" / "b.cc").unlink()
    proc, info = tree()
    assert proc.returncode == 0, proc.stderr
    assert info["modified_files"] == ["csrc/ops/a.cc", "csrc/ops/b.cc", "csrc/ops/new.cc"]
    import hashlib

    digest = hashlib.sha256((tree.opt / "patches" / "mine.patch").read_bytes()).hexdigest()
    assert info["patches"] == [{"name": "mine.patch", "sha256": digest}]


def test_without_the_image_report_the_report_phase_fails(tree):
    """build-info.json has one writer, the image's report: no inline copy of its schema."""
    (tree.opt / "image_report.py").unlink()
    proc, info = tree()
    assert proc.returncode != 0 and info is None
    assert "nvbuild.sh: report phase failed: no " in proc.stderr and "image_report.py" in proc.stderr


def test_component_steps_shipped_beside_nvbuild_run_after_the_framework_and_alone(tree):
    """A compiled component ships its step (components/NAME/nvbuild-step.sh, defining
    build_NAME): nvbuild.sh runs it after the framework, or alone with --only NAME, and
    refuses an --only nothing ships, naming the steps it has."""
    step = tree.opt / "components" / "fake" / "nvbuild-step.sh"
    step.parent.mkdir(parents=True)
    step.write_text('build_fake() { log "fake: built with $PYTHON"; }\n')
    (tree.opt / "components" / "nostep").mkdir()  # a component with no step (Nsight's kind)
    proc, _ = tree()
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.index("compiled: csrc/ops/b.cc") < proc.stderr.index("nvbuild.sh: fake: built with")
    proc, _ = tree("--only", "fake")
    assert proc.returncode == 0 and "fake: built" in proc.stderr and "compiled:" not in proc.stderr, proc.stderr
    proc, _ = tree("--only", "nostep")
    assert proc.returncode == 2
    assert "--only nostep: expected one of: extension fake" in proc.stderr
    proc, _ = tree("--only", "extension")
    assert proc.returncode == 0 and "fake: built" not in proc.stderr, proc.stderr


def test_a_component_step_applies_its_patches_in_name_order_and_names_the_one_that_fails(tree):
    """nvbuild.sh's helpers for a step (what Horovod's and DALI's use): the patches of
    patches/NAME/ in name order on a copy of the source; a patch that does not apply fails
    the step's patch phase, naming it."""
    step = tree.opt / "components" / "fake" / "nvbuild-step.sh"
    step.parent.mkdir(parents=True)
    step.write_text(
        "build_fake() {\n"
        '  local files=(); mapfile -t files < <(patch_files "$PATCHES_DIR/fake")\n'
        '  rm -rf "$WORK/src"; cp -a "$HERE/fake-source" "$WORK/src"\n'
        '  apply_patches fake "$WORK/src" "${files[@]}"\n'
        '  log "fake: now $(cat "$WORK/src/v.txt")"\n'
        "}\n"
    )
    (tree.opt / "fake-source").mkdir()
    (tree.opt / "fake-source" / "v.txt").write_text("one\n")
    patches = tree.opt / "patches" / "fake"
    patches.mkdir(parents=True)
    (patches / "0002-three.patch").write_text("--- a/v.txt\n+++ b/v.txt\n@@ -1 +1 @@\n-two\n+three\n")
    (patches / "0001-two.patch").write_text("--- a/v.txt\n+++ b/v.txt\n@@ -1 +1 @@\n-one\n+two\n")
    (patches / "README.md").write_text("not a patch\n")
    proc, _ = tree("--only", "fake")
    assert proc.returncode == 0, proc.stderr
    applied = [line.split("applying ")[1] for line in proc.stderr.splitlines() if "fake: applying" in line]
    assert applied == ["0001-two.patch", "0002-three.patch"] and "nvbuild.sh: fake: now three" in proc.stderr
    assert (tree.opt / "fake-source" / "v.txt").read_text() == "one\n"  # the source stays pristine
    (patches / "0003-stale.patch").write_text("--- a/v.txt\n+++ b/v.txt\n@@ -1 +1 @@\n-nine\n+ten\n")
    proc, _ = tree("--only", "fake")
    assert proc.returncode == 1 and "fake patch phase failed: 0003-stale.patch" in proc.stderr, proc.stderr

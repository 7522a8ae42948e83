"""Contract test of nvbuild.sh on TensorFlow trees of either way: a 2.21-shaped
tree builds the hermetic-CUDA way (configure.py with HERMETIC_*, then bazel's
//tensorflow/tools/pip_package:wheel), a 2.15-shaped one the configure way it always did,
2.16, 2.17 and trees of no readable version are refused in one line.

A recording `bazel` stands first on PATH. It writes what it was given (argv, the HERMETIC_*
and LOCAL_* environment), the rc files it would read (the tree's .bazelrc and what that
try-imports: the .tf_configure.bazelrc configure.py wrote) and what those expand to, as
bazel expands them (rc `build` lines, then the command line, each --config in place,
later --repo_env winning), and leaves the wheel the real target would make. Nothing is
compiled or downloaded: this proves the commands and the settings, not a TensorFlow build.
"""

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from .conftest import STUB_REPORT

ROOT = Path(__file__).resolve().parents[2]
WHEEL_TARGET = "//tensorflow/tools/pip_package:wheel"
ALL_CCS = "6.0,6.1,7.0,7.5,8.0,8.6,8.9,9.0"  # what --sm all means here (NVBUILD_SM_ALL)
# /opt/tensorflow/nvbuildopts as templates/nvbuildopts.j2 renders it for a TF2 variant with
# _common.yaml's build.nvbuildopts (written out: these tests are about nvbuild.sh, not the catalog)
NVBUILDOPTS = """\
# Extra build flags for nvbuild.sh, one per line; lines starting with # are ignored.
--config=v2
-c
opt
--config=cuda
--output_filter=MATCH_NOTHING
"""

FAKE_BAZEL = r'''#!/usr/bin/env python3
import base64, hashlib, json, os, re, shlex, sys, zipfile
from pathlib import Path

record_dir = Path(os.environ["RECORD_DIR"])
args = sys.argv[1:]
if args == ["--version"]:
    print("bazel 7.4.1")
    sys.exit(0)


def rc_options(path, rc_files):
    """(command[:config], tokens) of every option line, imports followed where they stand."""
    out = []
    text = path.read_text()
    rc_files[str(path.resolve().relative_to(Path.cwd().resolve()))] = text
    for line in text.splitlines():
        tokens = shlex.split(line, comments=True)
        if not tokens:
            continue
        if tokens[0] in ("import", "try-import"):
            target = Path(tokens[1].replace("%workspace%", str(Path.cwd())))
            if target.is_file():
                out += rc_options(target, rc_files)
            elif tokens[0] == "import":
                sys.exit(f"ERROR: {target} not found")
            continue
        out.append((tokens[0], tokens[1:]))
    return out


def expand(options, configs, seen=()):
    """Each --config=NAME replaced, where it stands, by its rc lines (bazel's order)."""
    out, i = [], 0
    while i < len(options):
        opt = options[i]
        name = opt[len("--config="):] if opt.startswith("--config=") else None
        if opt == "--config":
            i, name = i + 1, options[i + 1]
        if name is None:
            out.append(opt)
        else:
            if name not in configs:
                print(f"ERROR: Config value '{name}' is not defined in any .rc file", file=sys.stderr)
                sys.exit(2)
            out += expand(configs[name], configs, seen + (name,))
        i += 1
    return out


def repo_env(options):
    env, i = {}, 0
    while i < len(options):
        opt, kv = options[i], None
        if opt.startswith("--repo_env="):
            kv = opt[len("--repo_env="):]
        elif opt == "--repo_env":
            i, kv = i + 1, options[i + 1]
        if kv is not None:
            key, _, value = kv.partition("=")
            env[key] = value
        i += 1
    return env


def write_wheel(out, name, version, tag, build_info):
    files = {
        "tensorflow/__init__.py": f"__version__ = {version!r}\nfrom tensorflow import sysconfig\n",
        "tensorflow/sysconfig.py": f"def get_build_info():\n    return {build_info!r}\n",
        f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{name}-{version}.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: fake\nRoot-Is-Purelib: false\nTag: {tag}\n",
    }
    record = [f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(t.encode())}" for n, t in files.items()] + [f"{name}-{version}.dist-info/RECORD,,"]
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out / f"{name}-{version}-{tag}.whl", "w") as z:
        for n, t in files.items():
            z.writestr(n, t)
        z.writestr(f"{name}-{version}.dist-info/RECORD", "\n".join(record) + "\n")


if sys.argv[1:2] == ["--make-pip-package"]:  # the build_pip_package bazel built (configure way)
    write_wheel(Path(args[1]), "tensorflow", "2.15.0", "py3-none-any",
                {"cuda_compute_capabilities": ["sm_70", "sm_86", "compute_86"], "is_cuda_build": True})
    with (record_dir / "calls.jsonl").open("a") as f:
        f.write(json.dumps({"tool": "build_pip_package", "argv": args[1:]}) + "\n")
    sys.exit(0)

call = {"tool": "bazel", "argv": args,
        "env": {k: v for k, v in sorted(os.environ.items())
                if k.startswith(("HERMETIC_", "LOCAL_")) or k in ("WHEEL_NAME", "TF_NEED_CUDA", "TF_CUDA_CLANG")}}
if args[:1] == ["build"]:
    rc_files = {}
    lines = rc_options(Path(".bazelrc"), rc_files) if Path(".bazelrc").is_file() else []
    configs, base = {}, []
    for command, tokens in lines:
        cmd, _, config = command.partition(":")
        if cmd in ("common", "build"):
            (configs.setdefault(config, []) if config else base).extend(tokens)
    flags = [a for a in args[1:] if not a.startswith("//")]
    expanded = expand(base + flags, configs)
    effective = repo_env(expanded)
    call.update(rc_files=rc_files, expanded=expanded, repo_env=effective)
    if f"//tensorflow/tools/pip_package:wheel" in args:
        py = effective.get("HERMETIC_PYTHON_VERSION", "").replace(".", "")
        version = re.search(r'TF_VERSION = "([^"]+)"', Path("tensorflow/tf_version.bzl").read_text()).group(1)
        cuda = effective.get("TF_NEED_CUDA") == "1"
        caps = effective.get("HERMETIC_CUDA_COMPUTE_CAPABILITIES", "")
        write_wheel(Path("bazel-bin/tensorflow/tools/pip_package/wheel_house"), effective.get("WHEEL_NAME", "tensorflow"),
                    version, f"cp{py}-cp{py}-linux_x86_64",
                    {"cuda_compute_capabilities": caps.split(",") if cuda and caps else [], "is_cuda_build": cuda,
                     "cuda_version": effective.get("HERMETIC_CUDA_VERSION") if cuda else None,
                     "cudnn_version": effective.get("HERMETIC_CUDNN_VERSION") if cuda else None})
    elif "//tensorflow/tools/pip_package:build_pip_package" in args:
        tool = Path("bazel-bin/tensorflow/tools/pip_package/build_pip_package")
        tool.parent.mkdir(parents=True, exist_ok=True)
        tool.write_text(f'#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} --make-pip-package "$@"\n')
        tool.chmod(0o755)
with (record_dir / "calls.jsonl").open("a") as f:
    f.write(json.dumps(call) + "\n")
'''

# configure.py of a 2.18+ tree, as far as nvbuild.sh's contract reaches: what it reads
# from the environment, and the .tf_configure.bazelrc lines it writes from it.
FAKE_CONFIGURE_HERMETIC = r"""
import json, os
keys = ["TF_NEED_CUDA", "TF_CUDA_CLANG", "TF_NEED_CLANG", "HERMETIC_CUDA_VERSION", "HERMETIC_CUDNN_VERSION",
        "HERMETIC_CUDA_COMPUTE_CAPABILITIES", "HERMETIC_PYTHON_VERSION", "LOCAL_CUDA_PATH", "LOCAL_CUDNN_PATH",
        "LOCAL_NCCL_PATH", "PYTHON_BIN_PATH", "CC_OPT_FLAGS"]
with open(os.path.join(os.environ["RECORD_DIR"], "calls.jsonl"), "a") as f:
    f.write(json.dumps({"tool": "configure.py", "env": {k: os.environ.get(k) for k in keys}}) + "\n")
lines = [f'build --action_env PYTHON_BIN_PATH="{os.environ["PYTHON_BIN_PATH"]}"']
if os.environ.get("TF_NEED_CUDA") == "1":
    for key in ["HERMETIC_CUDA_VERSION", "HERMETIC_CUDNN_VERSION", "HERMETIC_CUDA_COMPUTE_CAPABILITIES",
                "LOCAL_CUDA_PATH", "LOCAL_CUDNN_PATH", "LOCAL_NCCL_PATH"]:
        if os.environ.get(key):
            lines.append(f'build:cuda --repo_env {key}="{os.environ[key]}"')
    lines.append("build --config=cuda_clang" if os.environ.get("TF_CUDA_CLANG") == "1" else "build --config=cuda")
for opt in os.environ.get("CC_OPT_FLAGS", "").split():
    lines.append(f"build:opt --copt={opt}")
open(".tf_configure.bazelrc", "w").write("\n".join(lines) + "\n")
"""

# configure.py of a tree up to 2.15 (the configure way): TF_* in, .tf_configure.bazelrc out.
FAKE_CONFIGURE_215 = r"""
import json, os
keys = ["TF_NEED_CUDA", "TF_CUDA_COMPUTE_CAPABILITIES", "TF_CUDA_VERSION", "TF_CUDNN_VERSION", "HERMETIC_CUDA_VERSION"]
with open(os.path.join(os.environ["RECORD_DIR"], "calls.jsonl"), "a") as f:
    f.write(json.dumps({"tool": "configure.py", "env": {k: os.environ.get(k) for k in keys}}) + "\n")
open(".tf_configure.bazelrc", "w").write('build --action_env TF_CUDA_COMPUTE_CAPABILITIES="%s"\n'
                                        % os.environ["TF_CUDA_COMPUTE_CAPABILITIES"])
"""

# TensorFlow 2.21's .bazelrc, the lines this contract touches (the real one has hundreds).
BAZELRC_221 = """\
build --define framework_shared_object=true
build -c opt
build --config=short_logs
build --config=v2
build:short_logs --output_filter=DONT_MATCH_ANYTHING
build:v2 --define=tf_api_version=2 --action_env=TF2_BEHAVIOR=1
build:cuda --repo_env TF_NEED_CUDA=1
build:cuda --crosstool_top=@local_config_cuda//crosstool:toolchain
build:cuda --@local_config_cuda//:enable_cuda
build:cuda --repo_env=HERMETIC_CUDA_VERSION="12.5.1"
build:cuda --repo_env=HERMETIC_CUDNN_VERSION="9.3.0"
build:cuda --@local_config_cuda//cuda:include_cuda_libs=true
build:cuda_wheel --@local_config_cuda//cuda:include_cuda_libs=false
build:cuda_clang --config=cuda
build:cuda_clang --repo_env=HERMETIC_CUDA_COMPUTE_CAPABILITIES="sm_60,sm_70,sm_80,sm_89,compute_90"
try-import %workspace%/.tf_configure.bazelrc
try-import %workspace%/.bazelrc.user
"""

# A cuda_redist_versions.bzl as 2.18/2.19 trees carry it (2.21 keeps it in rules_ml_toolchain).
REDIST_VERSIONS = """\
CUDA_REDIST_JSON_DICT = {
    "12.4.0": ["https://example/redistrib_12.4.0.json", "a"],
    "12.4.1": ["https://example/redistrib_12.4.1.json", "b"],
    "12.5.1": ["https://example/redistrib_12.5.1.json", "c"],
}

CUDNN_REDIST_JSON_DICT = {
    "8.9.7.29": ["https://example/redistrib_8.9.7.29.json", "d"],
    "9.3.0": ["https://example/redistrib_9.3.0.json", "e"],
    "9.16.0": ["https://example/redistrib_9.16.0.json", "f"],
}
"""


def python_version(python) -> str:
    return subprocess.run(
        [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@pytest.fixture(scope="module")
def image_python(venv):
    """The venv's Python with site-packages/nvidia/{cudnn,nccl}/{include,lib} laid out as
    26.11's wheels install them (cuDNN 9.28.0, NCCL 2.32.3)."""
    purelib = Path(
        subprocess.run(
            [str(venv), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    for pkg, header, text, lib in [
        (
            "cudnn",
            "cudnn_version.h",
            "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 28\n#define CUDNN_PATCHLEVEL 0\n",
            "libcudnn.so.9",
        ),
        ("nccl", "nccl.h", "#define NCCL_MAJOR 2\n#define NCCL_MINOR 32\n#define NCCL_PATCH 3\n", "libnccl.so.2"),
    ]:
        (purelib / "nvidia" / pkg / "include").mkdir(parents=True, exist_ok=True)
        (purelib / "nvidia" / pkg / "lib").mkdir(parents=True, exist_ok=True)
        (purelib / "nvidia" / pkg / "include" / header).write_text(text)
        (purelib / "nvidia" / pkg / "lib" / lib).write_text("")
    return SimpleNamespace(python=venv, nvidia=purelib / "nvidia")


@pytest.fixture
def tf_tree(tmp_path, image_python):
    """make(kind): /opt/tensorflow with a TensorFlow tree of KIND ("2.21", "2.15", "2.21+list",
    "2.16", "2.17", "unknown"), a TF2 image's nvbuildopts, and a runner of nvbuild.sh."""

    count = iter(range(100))

    def make(kind: str):
        root = tmp_path / f"tree{next(count)}"  # a test may make more than one
        opt = root / "opt"
        src = opt / "tensorflow-source"
        (src / "tensorflow").mkdir(parents=True)
        public = src / "tensorflow" / "core" / "public"
        if kind.startswith("2.21"):
            (src / "configure.py").write_text(FAKE_CONFIGURE_HERMETIC)
            (src / "tensorflow" / "tf_version.bzl").write_text(
                'load("//tensorflow:tf_version.default.bzl", "VERSION_SUFFIX")\nTF_VERSION = "2.21.0"\n'
            )
            (src / ".bazelrc").write_text(BAZELRC_221)
            (src / ".bazelversion").write_text("7.4.1\n")
            if kind == "2.21+list":
                hermetic = src / "third_party" / "xla" / "third_party" / "gpus" / "cuda" / "hermetic"
                hermetic.mkdir(parents=True)
                (hermetic / "cuda_redist_versions.bzl").write_text(REDIST_VERSIONS)
        else:
            (src / "configure.py").write_text(FAKE_CONFIGURE_215)
            (src / ".bazelrc").write_text(
                "build -c opt\nbuild:v2 --define=tf_api_version=2\n"
                "build:cuda --config=using_cuda\nbuild:using_cuda --define=using_cuda=true\n"
                "try-import %workspace%/.tf_configure.bazelrc\n"
            )
            if kind in ("2.15", "2.17"):
                public.mkdir(parents=True)
                (public / "version.h").write_text(f"#define TF_MAJOR_VERSION 2\n#define TF_MINOR_VERSION {kind[2:]}\n")
            elif kind == "2.16":
                (src / "tensorflow" / "tools" / "pip_package").mkdir(parents=True)
                (src / "tensorflow" / "tools" / "pip_package" / "setup.py").write_text("_VERSION = '2.16.1'\n")
        shutil.copy(ROOT / "nvbuild.sh", opt)
        shutil.copy(ROOT / "builder" / "in_image" / "cuda_arch.py", opt)
        (opt / "image_report.py").write_text(STUB_REPORT)
        (opt / "nvbuildopts").write_text(NVBUILDOPTS)
        bin_dir = root / "bin"
        bin_dir.mkdir()
        (bin_dir / "bazel").write_text(FAKE_BAZEL)
        (bin_dir / "bazel").chmod(0o755)
        nvcc_dir = root / "cuda-bin"  # on PATH unless a run asks for no nvcc
        nvcc_dir.mkdir()
        (nvcc_dir / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n")
        (nvcc_dir / "nvcc").chmod(0o755)
        record = root / "record"
        record.mkdir()
        base_env = {
            "RECORD_DIR": str(record),
            "PYTHON_BIN_PATH": str(image_python.python),
            "NVBUILD_WHEEL_DIR": str(root / "pip"),
            "NVBUILD_BUILD_INFO": str(root / "build-info.json"),
            "NVBUILD_SM_ALL": ALL_CCS,
            "NVBUILD_HOROVOD": "0",
            "CUDA_VERSION": "12.4.1",
            "TF_ENABLE_XLA": "1",
            "TF_NEED_GCP": "0",
            "TF_NEED_HDFS": "0",
            "HOME": str(root),
        }

        def run(*args, env=None, bazel=True, nvcc=True):
            path = [str(bin_dir)] if bazel else []
            path += [str(nvcc_dir)] if nvcc else []
            path += [str(image_python.python.parent), "/usr/bin", "/bin"]
            full_env = {**base_env, "PATH": ":".join(path), **(env or {})}
            full_env = {k: v for k, v in full_env.items() if v is not None}
            proc = subprocess.run(
                ["bash", str(opt / "nvbuild.sh"), *args], capture_output=True, text=True, env=full_env, timeout=300
            )
            log = record / "calls.jsonl"
            calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
            log.unlink(missing_ok=True)
            return proc, calls

        run.tmp, run.src, run.py = root, src, python_version(image_python.python)
        return run

    return make


def bazel_build(calls):
    return next(c for c in calls if c["tool"] == "bazel" and c["argv"][:1] == ["build"])


def failures(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "phase failed" in line]


def test_a_2_21_tree_builds_the_wheel_target_with_hermetic_cuda(tf_tree):
    """The 26.11 image's way: its CUDA (nvcc 12.4, CUDA_VERSION=12.4.1) and cuDNN (9.28.0 from
    the nvidia-cudnn wheel's header), --sm all, this Python; the exact commands."""
    run = tf_tree("2.21")
    proc, calls = run("--sm", "all")
    assert proc.returncode == 0, proc.stderr
    assert [c["tool"] for c in calls] == ["configure.py", "bazel", "bazel"]
    caps = "sm_60,sm_61,sm_70,sm_75,sm_80,sm_86,sm_89,compute_90"
    assert calls[0]["env"] == {
        "TF_NEED_CUDA": "1",
        "TF_CUDA_CLANG": "0",
        "TF_NEED_CLANG": None,
        "HERMETIC_CUDA_VERSION": "12.4.1",
        "HERMETIC_CUDNN_VERSION": "9.28.0",
        "HERMETIC_CUDA_COMPUTE_CAPABILITIES": caps,
        "HERMETIC_PYTHON_VERSION": run.py,
        "LOCAL_CUDA_PATH": None,
        "LOCAL_CUDNN_PATH": None,
        "LOCAL_NCCL_PATH": None,
        "PYTHON_BIN_PATH": calls[0]["env"]["PYTHON_BIN_PATH"],
        "CC_OPT_FLAGS": "-O2 -march=x86-64 -mtune=generic",
    }
    build = calls[1]
    assert build["argv"] == [
        "build",
        "--config=v2",
        "-c",
        "opt",
        "--output_filter=MATCH_NOTHING",
        "--config=cuda",
        "--config=cuda_wheel",
        "--repo_env=HERMETIC_CUDA_VERSION=12.4.1",
        "--repo_env=HERMETIC_CUDNN_VERSION=9.28.0",
        f"--repo_env=HERMETIC_CUDA_COMPUTE_CAPABILITIES={caps}",
        f"--repo_env=HERMETIC_PYTHON_VERSION={run.py}",
        "--repo_env=WHEEL_NAME=tensorflow",
        WHEEL_TARGET,
    ]
    # the rc files bazel reads: the tree's own, and configure.py's that it try-imports
    assert list(build["rc_files"]) == [".bazelrc", ".tf_configure.bazelrc"]
    assert "build --config=cuda" in build["rc_files"][".tf_configure.bazelrc"]
    # what bazel ends up with: the command line's settings over the .bazelrc's defaults
    assert build["repo_env"] == {
        "TF_NEED_CUDA": "1",
        "HERMETIC_CUDA_VERSION": "12.4.1",
        "HERMETIC_CUDNN_VERSION": "9.28.0",
        "HERMETIC_CUDA_COMPUTE_CAPABILITIES": caps,
        "HERMETIC_PYTHON_VERSION": run.py,
        "WHEEL_NAME": "tensorflow",
    }
    libs = [f for f in build["expanded"] if "include_cuda_libs" in f]
    assert libs[-1] == "--@local_config_cuda//cuda:include_cuda_libs=false"  # cuda_wheel: no CUDA in the wheel
    assert build["env"]["HERMETIC_CUDA_VERSION"] == "12.4.1" and build["env"]["WHEEL_NAME"] == "tensorflow"
    assert calls[2]["argv"] == ["clean", "--expunge"]
    assert "driver: tensorflow 2.21 (hermetic)" in proc.stderr
    info = json.loads((run.tmp / "build-info.json").read_text())
    assert info["version"] == "2.21.0" and info["cuda_compute_capabilities"] == caps.split(",")
    assert (info["cuda_version"], info["cudnn_version"]) == ("12.4.1", "9.28.0")


@pytest.mark.parametrize(
    "sm,expected",
    [
        ("86,70", "sm_70,compute_86"),
        ("8.0", "compute_80"),
        ("9.0,7.5,sm_86", "sm_75,sm_86,compute_90"),
        ("all", "sm_60,sm_61,sm_70,sm_75,sm_80,sm_86,sm_89,compute_90"),
    ],
)
def test_capabilities_are_sass_for_each_and_ptx_for_the_newest(tf_tree, sm, expected):
    """TF_CUDA_COMPUTE_CAPABILITIES' X.Y list, resolved by the image's policy, becomes
    hermetic CUDA's sm_XY (SASS only) for each and compute_XY (SASS and PTX) for the newest."""
    run = tf_tree("2.21")
    proc, calls = run("--configonly", "--sm", sm)
    assert proc.returncode == 0, proc.stderr
    assert [c["tool"] for c in calls] == ["configure.py"]
    assert calls[0]["env"]["HERMETIC_CUDA_COMPUTE_CAPABILITIES"] == expected


def test_an_air_gapped_run_passes_its_caches_and_the_images_own_libraries(tf_tree, image_python):
    """--repository-cache and --distdir (options and $NVBUILD_BAZEL_DISTDIR) reach bazel as
    absolute directories; LOCAL_CUDNN_PATH / LOCAL_NCCL_PATH at the image's wheels (their
    layout is the one hermetic CUDA takes) reach configure.py and bazel."""
    run = tf_tree("2.21")
    dirs = {name: run.tmp / name for name in ("repo-cache", "mirror0", "mirror1", "mirror2")}
    for d in dirs.values():
        d.mkdir()
    local = {
        "LOCAL_CUDNN_PATH": str(image_python.nvidia / "cudnn"),
        "LOCAL_NCCL_PATH": str(image_python.nvidia / "nccl"),
    }
    proc, calls = run(
        "--sm",
        "8.6",
        "--repository-cache",
        str(dirs["repo-cache"]),
        "--distdir",
        str(dirs["mirror1"]),
        f"--distdir={dirs['mirror2']}",
        env={"NVBUILD_BAZEL_DISTDIR": str(dirs["mirror0"]), **local},
    )
    assert proc.returncode == 0, proc.stderr
    assert {k: calls[0]["env"][k] for k in local} == local
    argv = bazel_build(calls)["argv"]
    tail = argv[argv.index("--repo_env=HERMETIC_CUDA_COMPUTE_CAPABILITIES=compute_86") + 1 :]
    assert tail == [
        f"--repo_env=LOCAL_CUDNN_PATH={local['LOCAL_CUDNN_PATH']}",
        f"--repo_env=LOCAL_NCCL_PATH={local['LOCAL_NCCL_PATH']}",
        f"--repo_env=HERMETIC_PYTHON_VERSION={run.py}",
        "--repo_env=WHEEL_NAME=tensorflow",
        f"--repository_cache={dirs['repo-cache']}",
        f"--distdir={dirs['mirror0']}",
        f"--distdir={dirs['mirror1']}",
        f"--distdir={dirs['mirror2']}",
        WHEEL_TARGET,
    ]
    assert bazel_build(calls)["repo_env"]["LOCAL_CUDNN_PATH"] == local["LOCAL_CUDNN_PATH"]


def test_a_missing_repository_cache_is_created_and_the_mounted_local_cache_is_the_default(tf_tree):
    run = tf_tree("2.21")
    proc, calls = run("--sm", "8.6", "--repository-cache", str(run.tmp / "new-cache"))
    assert proc.returncode == 0, proc.stderr
    assert (run.tmp / "new-cache").is_dir()
    assert f"--repository_cache={run.tmp / 'new-cache'}" in bazel_build(calls)["argv"]
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    if "/dev/shm" not in mounts:
        pytest.skip("no mount point to stand for BuildKit's cache mount")
    proc, calls = run("--sm", "8.6", env={"NVBUILD_LOCAL_CACHE": "/dev/shm"})  # bazel would create the directory
    assert proc.returncode == 0, proc.stderr
    assert bazel_build(calls)["argv"][-2:] == ["--repository_cache=/dev/shm/bazel-repository-cache", WHEEL_TARGET]
    assert not Path("/dev/shm/bazel-repository-cache").exists()


def test_air_gapped_directories_and_local_paths_are_checked_first(tf_tree):
    run = tf_tree("2.21")
    proc, calls = run("--distdir", str(run.tmp / "no-such-mirror"))
    assert proc.returncode == 2 and calls == []
    assert proc.stderr.strip() == f"nvbuild.sh: --distdir {run.tmp / 'no-such-mirror'}: not a directory"
    proc, calls = run("--repository-cache", "/proc/nope")
    assert proc.returncode == 2 and calls == []
    assert proc.stderr.strip() == "nvbuild.sh: --repository-cache /proc/nope: cannot create it"
    (run.tmp / "cuda" / "include").mkdir(parents=True)
    proc, calls = run("--sm", "8.6", env={"LOCAL_CUDA_PATH": str(run.tmp / "cuda")})
    assert proc.returncode == 1 and calls == []
    assert failures(proc.stderr) == [
        f"nvbuild.sh: configure phase failed: LOCAL_CUDA_PATH={run.tmp / 'cuda'} has no "
        "lib/ (expected the layout NVIDIA's redistributions unpack to: include/ and lib/, "
        "and for CUDA bin/ and nvvm/ too)"
    ]


def test_the_remote_executor_and_the_shared_cache(tf_tree, loopback_http):
    run = tf_tree("2.21")
    cache = f"{loopback_http}/bazel"
    proc, calls = run(
        "--sm",
        "8.6",
        "--cache",
        cache,
        "--remote-executor",
        "grpcs://farm.example.com:443",
        "--remote-instance-name",
        "tf/main",
    )
    assert proc.returncode == 0, proc.stderr
    argv = bazel_build(calls)["argv"]
    assert argv[argv.index(f"--remote_cache={cache}") :] == [
        f"--remote_cache={cache}",
        "--remote_local_fallback",
        "--remote_timeout=30",
        "--remote_executor=grpcs://farm.example.com:443",
        "--remote_instance_name=tf/main",
        WHEEL_TARGET,
    ]
    # env form, and no --cache: the executor is bazel's cache too
    proc, calls = run("--sm", "8.6", env={"NVBUILD_REMOTE_EXECUTOR": "grpc://buildbarn:8980"})
    assert proc.returncode == 0, proc.stderr
    assert bazel_build(calls)["argv"][-2:] == ["--remote_executor=grpc://buildbarn:8980", WHEEL_TARGET]
    proc, calls = run("--remote-executor", "https://farm.example.com")
    assert proc.returncode == 2 and calls == []
    assert proc.stderr.strip() == (
        "nvbuild.sh: --remote-executor https://farm.example.com: expected a REAPI endpoint, "
        "grpc://HOST:PORT, grpcs://HOST:PORT or unix:PATH"
    )
    proc, _ = run("--remote-instance-name", "x")
    assert proc.returncode == 2 and "--remote-instance-name needs --remote-executor" in proc.stderr


def test_the_environment_and_the_flags_file_override_the_images_versions(tf_tree):
    """HERMETIC_CUDA_VERSION from the environment is asked for as it is; an empty
    HERMETIC_CUDNN_VERSION leaves the tree's default (its .bazelrc's 9.3.0); a
    --repo_env in nvbuildopts stands, after the CUDA configs that would override it."""
    run = tf_tree("2.21")
    proc, calls = run("--sm", "8.6", env={"HERMETIC_CUDA_VERSION": "12.8.1", "HERMETIC_CUDNN_VERSION": ""})
    assert proc.returncode == 0, proc.stderr
    build = bazel_build(calls)
    assert "--repo_env=HERMETIC_CUDA_VERSION=12.8.1" in build["argv"]
    assert not any(a.startswith("--repo_env=HERMETIC_CUDNN_VERSION") for a in build["argv"])
    assert (build["repo_env"]["HERMETIC_CUDA_VERSION"], build["repo_env"]["HERMETIC_CUDNN_VERSION"]) == (
        "12.8.1",
        "9.3.0",
    )
    flags_file = run.tmp / "opt" / "nvbuildopts"
    flags_file.write_text(flags_file.read_text() + "--repo_env=HERMETIC_CUDNN_VERSION=9.8.0\n--config=cuda_clang\n")
    proc, calls = run("--sm", "8.6")
    assert proc.returncode == 0, proc.stderr
    build = bazel_build(calls)
    argv = build["argv"]
    assert (
        argv.index("--config=cuda_clang")
        < argv.index("--config=cuda")
        < argv.index("--repo_env=HERMETIC_CUDNN_VERSION=9.8.0")
    )
    assert "--repo_env=HERMETIC_CUDNN_VERSION=9.28.0" not in argv
    # cuda_clang's own capability list and the .bazelrc's cuDNN are overridden, not the reverse
    assert build["repo_env"]["HERMETIC_CUDNN_VERSION"] == "9.8.0"
    assert build["repo_env"]["HERMETIC_CUDA_COMPUTE_CAPABILITIES"] == "compute_86"


def test_versions_are_matched_to_the_list_a_tree_carries(tf_tree):
    """A tree that carries cuda_redist_versions.bzl (2.18, 2.19) is asked only for versions it
    lists: the newest patch of the image's CUDA release (12.4 -> 12.4.1), the newest cuDNN of
    the image's major not newer than it (9.28.0 -> 9.16.0). Without a list, X.Y.0."""
    run = tf_tree("2.21+list")
    proc, calls = run("--configonly", "--sm", "8.6", env={"CUDA_VERSION": "12.4"})  # the offline base's
    assert proc.returncode == 0, proc.stderr
    assert (calls[0]["env"]["HERMETIC_CUDA_VERSION"], calls[0]["env"]["HERMETIC_CUDNN_VERSION"]) == ("12.4.1", "9.16.0")
    assert "9.28.0 is not listed by the tree; 9.16.0 is its newest of that major" in proc.stderr
    run = tf_tree("2.21")  # no list in the tree (2.21 keeps it in rules_ml_toolchain)
    proc, calls = run("--configonly", "--sm", "8.6", env={"CUDA_VERSION": "12.4"})
    assert proc.returncode == 0, proc.stderr
    assert calls[0]["env"]["HERMETIC_CUDA_VERSION"] == "12.4.0"


@pytest.fixture
def ptxas_wheel(image_python):
    """26.11's nvidia-cuda-nvcc 12.9 wheel beside nvcc 12.4 (ptxas alone), for one test."""
    pkg = image_python.nvidia / "cuda_nvcc"
    (pkg / "include").mkdir(parents=True)
    (pkg / "bin").mkdir()
    (pkg / "bin" / "ptxas").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.9, V12.9.86'\n")
    (pkg / "bin" / "ptxas").chmod(0o755)
    yield pkg
    shutil.rmtree(pkg)


def test_a_newer_ptxas_beside_nvcc_raises_the_hermetic_cuda(tf_tree, ptxas_wheel):
    """26.11 carries NVIDIA's nvidia-cuda-nvcc 12.9 wheel (ptxas alone) beside nvcc 12.4: the
    image then compiles Blackwell's 12.0, and hermetic CUDA is asked for 12.9 to do the same."""
    run = tf_tree("2.21")
    proc, calls = run("--configonly", "--sm", "9.0,12.0")
    assert proc.returncode == 0, proc.stderr
    env = calls[0]["env"]
    assert (env["HERMETIC_CUDA_VERSION"], env["HERMETIC_CUDA_COMPUTE_CAPABILITIES"]) == ("12.9.0", "sm_90,compute_120")
    assert "HERMETIC_CUDA_VERSION=12.9.0 (ptxas 12.9 beside nvcc 12.4;" in proc.stderr


def test_a_2_15_tree_compiles_with_nvcc_alone_beside_a_newer_ptxas(tf_tree, ptxas_wheel):
    """configure.py (trees up to 2.15) has no ptxas step: what only the wheel's ptxas
    assembles (12.0) is left to PTX JIT of nvcc's newest, not handed to nvcc 12.4."""
    run = tf_tree("2.15")
    proc, calls = run("--configonly", "--sm", "9.0,12.0")
    assert proc.returncode == 0, proc.stderr
    assert calls[0]["tool"] == "configure.py" and calls[0]["env"]["TF_CUDA_COMPUTE_CAPABILITIES"] == "9.0"
    assert "configure.py compiles with nvcc 12.4 alone: 9.0 (the rest by PTX JIT)" in proc.stderr


def test_a_rebuild_reconfigures_only_when_a_hermetic_setting_changes(tf_tree):
    run = tf_tree("2.21")
    proc, calls = run("--sm", "8.6", "--noclean")
    assert proc.returncode == 0 and [c["tool"] for c in calls] == ["configure.py", "bazel"], proc.stderr
    proc, calls = run("--sm", "8.6", "--noclean")
    assert proc.returncode == 0 and [c["tool"] for c in calls] == ["bazel"], proc.stderr
    assert "configuration unchanged, not reconfiguring" in proc.stderr
    proc, calls = run("--sm", "8.6", "--noclean", env={"HERMETIC_CUDNN_VERSION": "9.8.0"})
    assert proc.returncode == 0 and [c["tool"] for c in calls] == ["configure.py", "bazel"], proc.stderr
    assert calls[0]["env"]["HERMETIC_CUDNN_VERSION"] == "9.8.0"


def test_without_nvcc_a_cpu_only_wheel(tf_tree):
    run = tf_tree("2.21")
    proc, calls = run("--sm", "8.6", nvcc=False)
    assert proc.returncode == 0, proc.stderr
    assert calls[0]["env"]["TF_NEED_CUDA"] == "0" and calls[0]["env"]["HERMETIC_CUDA_VERSION"] is None
    build = bazel_build(calls)
    assert build["argv"] == [
        "build",
        "--config=v2",
        "-c",
        "opt",
        "--output_filter=MATCH_NOTHING",
        f"--repo_env=HERMETIC_PYTHON_VERSION={run.py}",
        "--repo_env=WHEEL_NAME=tensorflow",
        WHEEL_TARGET,
    ]
    assert "TF_NEED_CUDA" not in build["repo_env"]


def test_no_bazel_is_one_line_naming_the_trees_bazel(tf_tree):
    run = tf_tree("2.21")
    proc, calls = run("--sm", "8.6", bazel=False)
    assert proc.returncode == 1 and calls == []
    assert failures(proc.stderr) == [
        "nvbuild.sh: configure phase failed: no bazel (nor bazelisk) on PATH: TensorFlow 2.21 builds with Bazel 7.4.1"
    ]


def test_a_2_15_tree_keeps_the_configure_way(tf_tree):
    """Up to 2.15: configure.py with this image's CUDA, build_pip_package, unchanged; the
    download options are added when given; a remote executor is refused (its CUDA is local)."""
    run = tf_tree("2.15")
    proc, calls = run("--sm", "86,70")
    assert proc.returncode == 0, proc.stderr
    assert [c["tool"] for c in calls] == ["configure.py", "bazel", "build_pip_package", "bazel"]
    assert calls[0]["env"] == {
        "TF_NEED_CUDA": "1",
        "TF_CUDA_COMPUTE_CAPABILITIES": "7.0,8.6",
        "TF_CUDA_VERSION": "12.4",
        "TF_CUDNN_VERSION": "9",
        "HERMETIC_CUDA_VERSION": None,
    }
    assert calls[1]["argv"] == [
        "build",
        "--config=v2",
        "-c",
        "opt",
        "--config=cuda",
        "--output_filter=MATCH_NOTHING",
        "//tensorflow/tools/pip_package:build_pip_package",
    ]
    assert calls[2]["argv"] == [str(run.tmp / "pip"), "--gpu", "--project_name", "tensorflow"]
    assert calls[3]["argv"] == ["clean", "--expunge"]
    assert "driver: tensorflow 2.15 (configure)" in proc.stderr
    mirror = run.tmp / "mirror"
    mirror.mkdir()
    proc, calls = run("--sm", "8.6", "--distdir", str(mirror))
    assert proc.returncode == 0, proc.stderr
    assert calls[1]["argv"][-2:] == [f"--distdir={mirror}", "//tensorflow/tools/pip_package:build_pip_package"]
    proc, calls = run("--sm", "8.6", "--remote-executor", "grpc://farm:8980")
    assert proc.returncode == 1 and calls == []
    assert failures(proc.stderr) == [
        "nvbuild.sh: configure phase failed: --remote-executor needs a TensorFlow 2.18+ "
        "tree (hermetic CUDA): this 2.15 tree compiles against this image's CUDA"
    ]


@pytest.mark.parametrize(
    "kind,why",
    [
        ("2.16", "TensorFlow 2.16 tree: 2.16 and 2.17 build with hermetic Python but this image's CUDA toolkit"),
        ("2.17", "TensorFlow 2.17 tree: 2.16 and 2.17 build with hermetic Python but this image's CUDA toolkit"),
        ("unknown", "cannot tell which TensorFlow"),
    ],
)
def test_2_16_2_17_and_unknown_trees_are_refused_in_one_line(tf_tree, kind, why):
    run = tf_tree(kind)
    proc, calls = run("--sm", "8.6")
    assert proc.returncode == 1 and calls == []
    lines = failures(proc.stderr)
    assert len(lines) == 1 and lines[0].startswith(f"nvbuild.sh: configure phase failed: {why}")
    assert proc.stderr.rstrip().splitlines()[-1] == lines[0]

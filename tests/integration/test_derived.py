"""Derived images: the image's own docker-examples with plain `docker build`, the user
guide's example 1 written by hand, `builder derive` (patch check, packages, tests), and
incremental rebuilds of the extension and of Horovod through the shared compile cache."""

import hashlib
import json
import random
import re
import subprocess
from pathlib import Path

import pytest

from .conftest import builder, component_row, coverage_cells, docker, free_port, image_id, labels

ROOT = Path(__file__).resolve().parents[2]
UNIT = "csrc/cpu/bias_relu.cc"  # the one translation unit the marker patch touches (an op's arithmetic)
SOURCE = (ROOT / "framework-src" / UNIT).read_text()


def marker_patch(value: int, prefix: str = "") -> str:
    """A unified diff adding tfext_patch_marker() (returning `value`) at the end of UNIT."""
    path = f"{prefix}{UNIT}"
    n = len(SOURCE.splitlines())
    tail = SOURCE.splitlines()[-3:]
    added = ["", f'extern "C" int tfext_patch_marker(void) {{ return {value}; }}']
    lines = [f"--- a/{path}", f"+++ b/{path}", f"@@ -{n - 2},3 +{n - 2},{3 + len(added)} @@"]
    lines += [f" {t}" for t in tail] + [f"+{a}" for a in added]
    return "\n".join(lines) + "\n"


def marker(image: str) -> int:
    """What the patched function in the image's extension library returns."""
    out = docker(
        "run",
        "--rm",
        "--entrypoint",
        "python3",
        image,
        "-c",
        "import ctypes, os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'; import tfext; "
        "print(ctypes.CDLL(tfext.sysconfig.get_library()).tfext_patch_marker())",
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().splitlines()[-1])


def derive_log(cache_dir: Path, tag: str) -> str:
    return (cache_dir / "logs" / f"derive-{tag.replace('/', '_').replace(':', '_')}.log").read_text()


@pytest.fixture
def fresh_value():
    return random.randint(1000, 10**9)


def test_image_own_customtensorflow_example_builds_with_plain_docker(
    release_image, tmp_path, scratch_tag, fresh_value, compile_cache
):
    for name in ("Dockerfile.customtensorflow", "README.md"):
        out = docker("run", "--rm", "--entrypoint", "cat", release_image, f"/workspace/docker-examples/{name}")
        (tmp_path / name).write_text(out.stdout)
    assert f"ARG BASE_IMAGE={release_image}\n" in (tmp_path / "Dockerfile.customtensorflow").read_text()
    (tmp_path / "my-tensorflow-modifications.patch").write_text(marker_patch(fresh_value))
    out = subprocess.run(
        [
            "docker",
            "build",
            "-q",
            "--network",
            "host",
            "--build-arg",
            f"COMPILE_CACHE={compile_cache}",
            "-f",
            "Dockerfile.customtensorflow",
            "-t",
            scratch_tag,
            ".",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert marker(scratch_tag) == fresh_value
    assert docker("run", "--rm", "--entrypoint", "pwd", scratch_tag).stdout.strip() == "/workspace"
    # The patch is recorded (name + sha256), no layer holds a copy in /tmp, own build id.
    info = json.loads(
        docker("run", "--rm", "--entrypoint", "cat", scratch_tag, "/opt/tensorflow/build-info.json").stdout
    )
    digest = hashlib.sha256((tmp_path / "my-tensorflow-modifications.patch").read_bytes()).hexdigest()
    assert {"name": "my-tensorflow-modifications.patch", "sha256": digest} in info["extension"]["patches"]
    assert info["extension"]["modified_files"] == [UNIT]
    history = docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", scratch_tag).stdout
    assert not [line for line in history.splitlines() if "COPY" in line and "/tmp" in line]

    def build_id(image):
        return docker(
            "image", "inspect", "--format", '{{index .Config.Labels "com.nvidia.build.id"}}', image
        ).stdout.strip()

    assert build_id(scratch_tag) == build_id(release_image) + ".custom"


def test_user_guide_example_1_written_by_hand(release_image, tmp_path, scratch_tag, fresh_value):
    (tmp_path / "my.patch").write_text(marker_patch(fresh_value, prefix="tensorflow-source/"))
    (tmp_path / "Dockerfile").write_text(
        f"FROM {release_image}\n"
        "COPY my.patch /tmp/my.patch\n"
        "WORKDIR /opt/tensorflow\n"
        "RUN patch -p1 < /tmp/my.patch\n"
        "RUN ./nvbuild.sh\n"
        "WORKDIR /workspace\n"
    )
    out = subprocess.run(
        ["docker", "build", "-q", "-t", scratch_tag, "."], cwd=tmp_path, capture_output=True, text=True, timeout=1800
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert marker(scratch_tag) == fresh_value
    info = json.loads(
        docker("run", "--rm", "--entrypoint", "cat", scratch_tag, "/opt/tensorflow/build-info.json").stdout
    )
    assert info["extension"]["modified_files"] == [UNIT]
    assert info["version"] == "2.5.0"  # the framework is the wheel's, untouched


def test_derive_refuses_a_patch_that_does_not_apply(release_image, tmp_path, scratch_tag):
    bad = tmp_path / "stale.patch"
    bad.write_text(
        f"--- a/{UNIT}\n+++ b/{UNIT}\n@@ -1,2 +1,2 @@\n-// a line this file never had\n+// changed\n #include <cmath>\n"
    )
    containers_before = set(docker("ps", "-aq").stdout.split())
    out = builder("derive", "--no-sbom", "--from", release_image, "--patch", str(bad), "--tag", scratch_tag)
    assert out.returncode == 2
    first = out.stderr.splitlines()[0]
    assert first == f"error: patch stale.patch does not apply to the source in {release_image}: Hunk #1 FAILED at 1"
    assert f"rejected hunks in ./{UNIT}" in out.stderr and "+// changed" in out.stderr
    assert image_id(scratch_tag) is None
    assert set(docker("ps", "-aq").stdout.split()) == containers_before


@pytest.mark.parametrize(
    "args,text",
    [
        (["--patch", "/nonexistent.patch"], "--patch /nonexistent.patch: no such file"),
        ([], "nothing to derive"),
        (["--apt", "Bad Name"], "is not a Debian package name"),
        (["--nvbuild-args", "--configonly"], "would not build the framework"),
        (["--nvbuild-args", "--sm 9.9"], "compute capability 9.9 is not a GPU architecture"),
        (["--nvbuild-args", "--sm 8.9"], "compute capability 8.9 cannot be compiled for CUDA {cuda}"),  # the parent's
    ],
)
def test_derive_bad_input(release_image, args, text):
    text = text.format(cuda=labels(release_image)["dev.tfbuilder.cuda"])  # 11.2 on the offline base
    out = builder("derive", "--no-sbom", "--from", release_image, "--tag", "itest/never:1", *args)
    assert out.returncode == 2 and text in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_derive_patch_and_packages_passes_its_tests(release_image, tmp_path, scratch_tag, fresh_value, compile_cache):
    patch = tmp_path / "marker.patch"
    patch.write_text(marker_patch(fresh_value))
    # tensorflow-addons 0.13.0 (made for TF 2.5): unpinned, pip moves typing-extensions to 4.x
    # and breaks TensorFlow's requirement; resolved against the image's pins, typeguard 2 fits
    out = builder(
        "derive",
        "--from",
        release_image,
        "--patch",
        str(patch),
        "--apt",
        "jq",
        "--pip",
        "tabulate",
        "--pip",
        "tensorflow-addons==0.13.0",
        "--compile-cache",
        compile_cache,
        "--tag",
        scratch_tag,
        "-q",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert re.search(r"\d+ passed", out.stderr)  # the parent's suite plus the derived checks
    assert marker(scratch_tag) == fresh_value
    tools = docker(
        "run",
        "--rm",
        "--entrypoint",
        "bash",
        scratch_tag,
        "-c",
        "echo '{\"a\": 1}' | jq .a && python3 -c 'import tabulate; print(tabulate.tabulate([[1]]))'",
    )
    assert tools.returncode == 0 and tools.stdout.startswith("1\n"), tools.stderr
    added = labels(scratch_tag)["dev.tfbuilder.pip-added"].split()
    assert "tensorflow-addons==0.13.0" in added and any(p.startswith("typeguard==2.") for p in added), added
    kept = docker(
        "run",
        "--rm",
        "--entrypoint",
        "python3",
        scratch_tag,
        "-c",
        "import importlib.metadata as m; print(m.version('typing-extensions'), m.version('tensorflow'))",
    )
    assert kept.stdout.split() == ["3.7.4.3", "2.5.0"], kept.stdout
    report = json.loads(builder("inspect", scratch_tag, "--json").stdout)
    assert report["parent"] == release_image
    assert [p["name"] for p in report["patches"]] == ["marker.patch"]
    assert report["extension_build_info"]["patches"] == report["patches"]
    # its SBOM, made once it was tagged: what was added, and the patch it was compiled with
    made = re.search(r"^sbom: (\S+\.cdx\.json)$", out.stderr, re.M)
    assert made, out.stderr[-2000:]
    doc = json.loads(Path(made.group(1)).read_text())
    names = {c["name"]: c.get("version") for c in doc["components"]}
    assert names.get("jq") and names.get("tabulate") and names.get("tensorflow") == "2.5.0", sorted(names)[:50]
    # the release's components, as the SBOM reads them from the image
    assert names.get("nvidia-dali-cuda110") == "1.34.0" and names.get("nvidia-dali-tf-plugin-cuda110") == "1.34.0"
    assert names.get("tensorboard") == "2.11.2" and names.get("tensorflow-addons") == "0.13.0"
    ext = next(c for c in doc["components"] if c.get("bom-ref") == "tfbuilder:extension")
    sha = hashlib.sha256(patch.read_bytes()).hexdigest()
    assert {"name": "dev.tfbuilder:patch", "value": f"marker.patch sha256:{sha}"} in ext["properties"]


def test_derive_pip_that_would_move_a_pin_is_refused_before_building(release_image, scratch_tag):
    before = image_id(release_image)
    out = builder("derive", "--from", release_image, "--pip", "numpy==1.21.0", "--tag", scratch_tag, "-q")
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "numpy==1.21.0" in lines[0] and "numpy==1.19.5" in lines[0], out.stderr
    assert docker("image", "inspect", scratch_tag, check=False).returncode != 0  # nothing was built or tagged
    assert image_id(release_image) == before


def test_image_own_addpackages_example(release_image, tmp_path, scratch_tag):
    """The example as its README says: a plain `docker build` (BuildKit) with the CA bundle
    as a secret, which pip here needs (its proxy's CA); with its defaults it adds an apt
    package and a package built on TensorFlow, and the image passes the conformance suite."""
    out = docker(
        "run", "--rm", "--entrypoint", "cat", release_image, "/workspace/docker-examples/Dockerfile.addpackages"
    )
    (tmp_path / "Dockerfile").write_text(out.stdout)
    ca = "id=builder-ca.crt,src=/etc/ssl/certs/ca-certificates.crt"
    build = subprocess.run(
        ["docker", "build", "-q", "--no-cache", "--secret", ca, "-t", scratch_tag, "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    check = docker(
        "run",
        "--rm",
        "--entrypoint",
        "bash",
        scratch_tag,
        "-c",
        "jq --version && python3 -m pip check && python3 -c 'import importlib.metadata as m; "
        'print(m.version("tensorflow-addons"), m.version("typing-extensions"), m.version("tensorflow"))\'',
    )
    # its defaults: jq and the TensorFlow Addons made for 2.5, TensorFlow's pins kept
    assert check.returncode == 0 and check.stdout.split()[-3:] == ["0.13.0", "3.7.4.3", "2.5.0"], check.stderr
    # the image stays conformant where a user's pip install could break it (the derive tests
    # run the whole suite on derived images)
    suite = builder("test", scratch_tag, "-k", "pip or locked or catalogs_version or extension_unit_tests or trains")
    assert suite.returncode == 0, suite.stdout[-3000:] + suite.stderr[-2000:]


def test_plain_pip_install_in_a_from_dockerfile_keeps_the_pins_or_names_the_one_it_would_move(
    release_image, tmp_path, scratch_tag
):
    """A user's own FROM Dockerfile with `pip install` (through this machine's proxy, whose CA
    pip needs): a TF-dependent package that fits installs with TensorFlow's pins kept; one
    that needs another numpy fails in pip's resolver naming the pin, and tags nothing."""
    (tmp_path / "Dockerfile").write_text(
        f"FROM {release_image}\n"
        "ARG PKG\n"
        "RUN --mount=type=secret,id=ca,target=/tmp/ca.crt PIP_CERT=/tmp/ca.crt python3 -m pip install --no-cache-dir ${PKG}\n"
    )
    ca = "id=ca,src=/etc/ssl/certs/ca-certificates.crt"

    def build(pkg: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["docker", "build", "--no-cache", "--secret", ca, "--build-arg", f"PKG={pkg}", "-t", scratch_tag, "."],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=1800,
        )

    bad = build("numpy==1.21.0")
    assert bad.returncode != 0 and "(constraint) numpy==1.19.5" in bad.stdout + bad.stderr, bad.stderr[-3000:]
    assert docker("image", "inspect", scratch_tag, check=False).returncode != 0
    good = build("tensorflow-addons==0.13.0")
    assert good.returncode == 0, good.stderr[-3000:]
    out = docker(
        "run",
        "--rm",
        "--entrypoint",
        "bash",
        scratch_tag,
        "-c",
        "python3 -m pip check && python3 -c 'import importlib.metadata as m; "
        'print(m.version("typing-extensions"), m.version("tensorflow"), m.version("tensorflow-addons"))\'',
    )
    assert out.returncode == 0 and out.stdout.split()[-3:] == ["3.7.4.3", "2.5.0", "0.13.0"], out.stdout + out.stderr


def test_patch_rebuild_through_the_shared_cache_compiles_only_the_changed_unit(
    release_image, compile_cache, cache_server, tmp_path, scratch_tag, fresh_value, cache_dir
):
    """The release build seeded the cache: a one-file patch compiles that unit only, and
    Horovod (unchanged) is not rebuilt at all."""
    patch = tmp_path / "marker.patch"
    patch.write_text(marker_patch(fresh_value))
    out = builder(
        "derive",
        "--no-sbom",
        "--from",
        release_image,
        "--patch",
        str(patch),
        "--compile-cache",
        compile_cache,
        "--tag",
        scratch_tag,
        "--no-test",
        "-q",
    )
    assert out.returncode == 0, out.stderr
    log = derive_log(cache_dir, scratch_tag)
    assert re.findall(r"nvbuild.sh: compiled: (\S+)", log) == [UNIT], log[-3000:]
    assert "horovod: up to date, not rebuilt" in log
    assert marker(scratch_tag) == fresh_value
    stats = json.loads(builder("cache", "stats", "--dir", str(cache_server[1]), "--json").stdout)
    assert stats["running"] and stats["hits"] > 0 and stats["objects"] > 0


def test_horovod_and_dali_patches_rebuild_only_what_changed(
    release_image, compile_cache, tmp_path, scratch_tag, cache_dir
):
    """A one-file Horovod patch, the way the image ships its own fix: joined to
    /opt/tensorflow/patches/horovod/, applied by nvbuild.sh, recorded, and through the warm
    cache only the changed unit compiles; the image passes the conformance suite."""
    unit = "horovod/common/operations.cc"
    base = docker(
        "run",
        "--rm",
        "--entrypoint",
        "bash",
        release_image,
        "-c",
        f"cd /tmp && cp -r /opt/tensorflow/horovod-source h && cd h && "
        f"for p in /opt/tensorflow/patches/horovod/*.patch; do patch -s -p1 < $p; done && cat {unit}",
    )
    assert base.returncode == 0, base.stderr
    lines = base.stdout.splitlines()
    n = len(lines)
    patch = tmp_path / "0100-itest-marker.patch"
    patch.write_text(
        "\n".join(
            [
                f"--- a/{unit}",
                f"+++ b/{unit}",
                f"@@ -{n - 2},3 +{n - 2},5 @@",
                *[f" {t}" for t in lines[-3:]],
                "+",
                '+extern "C" int horovod_itest_marker(void) { return 4242; }',
            ]
        )
        + "\n"
    )
    # and DALI's TensorFlow plugin, patched the same way in the same derive
    dali_unit = "daliop.cc"
    dali_src = docker(
        "run", "--rm", "--entrypoint", "cat", release_image, f"/opt/tensorflow/dali-tf-plugin-source/{dali_unit}"
    ).stdout.splitlines()
    dali_patch = tmp_path / "0100-itest-dali-marker.patch"
    m = len(dali_src)
    dali_patch.write_text(
        "\n".join(
            [
                f"--- a/{dali_unit}",
                f"+++ b/{dali_unit}",
                f"@@ -{m - 2},3 +{m - 2},5 @@",
                *[f" {t}" for t in dali_src[-3:]],
                "+",
                '+extern "C" int dali_itest_marker(void) { return 4343; }',
            ]
        )
        + "\n"
    )
    out = builder(
        "derive",
        "--no-sbom",
        "--from",
        release_image,
        "--horovod-patch",
        str(patch),
        "--dali-patch",
        str(dali_patch),
        "--compile-cache",
        compile_cache,
        "--tag",
        scratch_tag,
        "-q",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    log = derive_log(cache_dir, scratch_tag)
    assert re.findall(r"nvbuild.sh: compiled: (\S+)", log) == [unit], log[-3000:]
    assert "dali: applying 0100-itest-dali-marker.patch" in log and "dali: installed" in log
    dali = docker(
        "run",
        "--rm",
        "--entrypoint",
        "python3",
        scratch_tag,
        "-c",
        "import ctypes, os, nvidia.dali.plugin.tf as p, nvidia.dali_tf_plugin as q; "
        "print(ctypes.CDLL(os.path.join(os.path.dirname(q.__file__), 'libdali_tf_current.so')).dali_itest_marker())",
    )
    assert dali.returncode == 0 and dali.stdout.split()[-1] == "4343", dali.stderr[-2000:]
    assert json.loads(labels(scratch_tag)["dev.tfbuilder.dali-patches"])[-1]["name"] == dali_patch.name
    check = docker(
        "run",
        "--rm",
        "--entrypoint",
        "python3",
        scratch_tag,
        "-c",
        "import ctypes, glob, os; import horovod.tensorflow as hvd; "  # loads TensorFlow's libraries first
        "lib = glob.glob(os.path.join(os.path.dirname(hvd.__file__), 'mpi_lib*.so'))[0]; "
        "print(ctypes.CDLL(lib).horovod_itest_marker())",
    )
    assert check.returncode == 0 and check.stdout.split()[-1] == "4242", check.stderr
    info = json.loads(
        docker("run", "--rm", "--entrypoint", "cat", scratch_tag, "/opt/tensorflow/build-info.json").stdout
    )
    assert [p["name"] for p in info["components"]["horovod"]["patches"]][-1] == patch.name


def test_cache_server_down_degrades_to_a_normal_compile(release_image, tmp_path, fresh_value):
    """nvbuild.sh (what every build and derive runs) with a cache URL nobody serves: a
    warning and a plain compile of the patched source (one capability and no XLA kernels,
    to keep it short)."""
    (tmp_path / "marker.patch").write_text(marker_patch(fresh_value, prefix="tensorflow-source/"))
    dead = f"http://127.0.0.1:{free_port()}/ccache"
    out = docker(
        "run",
        "--rm",
        "--network",
        "host",
        "-v",
        f"{tmp_path}:/patch:ro",
        "-e",
        "TF_ENABLE_XLA=0",
        "--entrypoint",
        "bash",
        release_image,
        "-c",
        f"cd /opt/tensorflow && patch -s -p1 < /patch/marker.patch "
        f"&& ./nvbuild.sh --only extension --sm 8.6 --cache {dead} 2>&1 && cd / && python3 -c "
        "'import ctypes, tfext; print(ctypes.CDLL(tfext.sysconfig.get_library()).tfext_patch_marker())'",
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    assert f"warning: compile cache {dead} does not answer; compiling without it" in out.stdout
    assert out.stdout.split()[-1] == str(fresh_value)


def test_derive_rebuild_for_other_capabilities_keeps_labels_env_and_binary_in_step(
    release_image, scratch_tag, compile_cache
):
    """--nvbuild-args "--sm 8.6,12.0 --allow-ptx-jit": CUDA 11.2 compiles up to 8.6, so 12.0
    (Blackwell) is left to PTX JIT of compute_86. The derived image's label and env follow
    what was compiled, the extension and Horovod are rebuilt for it, the read-back labels
    say so, and the coverage table says how a 12.0 GPU runs each binary (the conformance
    suite itself runs on the other derived images)."""
    refused = builder(
        "derive",
        "--no-sbom",
        "--from",
        release_image,
        "--nvbuild-args",
        "--sm 8.6,12.0",
        "--tag",
        scratch_tag,
        "--no-test",
        "-q",
    )
    assert refused.returncode == 2 and "--allow-ptx-jit" in refused.stderr, refused.stderr
    out = builder(
        "derive",
        "--no-sbom",
        "--from",
        release_image,
        "--nvbuild-args",
        "--sm 8.6,12.0 --allow-ptx-jit",
        "--compile-cache",
        compile_cache,
        "--tag",
        scratch_tag,
        "--no-test",
        "-q",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    table = builder("inspect", scratch_tag, "--coverage")
    cells = coverage_cells(table.stdout)
    for name in ("tfext", "Horovod"):
        assert component_row(cells, name)["12.0"] == "compute_86", table.stdout
    lab = json.loads(docker("image", "inspect", "--format", "{{json .Config.Labels}}", scratch_tag).stdout)
    assert lab["dev.tfbuilder.cuda-compute-capabilities"] == "8.6"
    assert lab["dev.tfbuilder.coverage"] == "8.6=sass"
    info = json.loads(
        docker("run", "--rm", "--entrypoint", "cat", scratch_tag, "/opt/tensorflow/build-info.json").stdout
    )
    assert info["extension"]["cuda_compute_capabilities"] == ["sm_86", "compute_86"]
    hvd = [b for b in info["cuda_binaries"] if b["component"] == "horovod"]
    assert hvd and all(b["sass"] == ["86"] and b["ptx"] == ["86"] for b in hvd)


def test_the_legacy_backend_still_builds_a_derived_image(release_image, scratch_tag):
    """BUILDER_BACKEND=legacy (or an engine without buildx) builds through docker-py's
    legacy builder: same untagged-then-tagged flow, a package added, read back, labelled."""
    import os

    out = builder(
        "derive",
        "--no-sbom",
        "--from",
        release_image,
        "--apt",
        "tree",
        "--tag",
        scratch_tag,
        "--no-test",
        "-q",
        env={**os.environ, "BUILDER_BACKEND": "legacy"},
    )
    assert out.returncode == 0, out.stderr
    assert docker("run", "--rm", "--entrypoint", "tree", scratch_tag, "--version").stdout.startswith("tree v")
    history = docker("history", "--no-trunc", "--format", "{{.Comment}}|{{.CreatedBy}}", scratch_tag).stdout
    step = [line for line in history.splitlines() if "tree" in line and "apt-get" in line]
    assert step and all(line.startswith("|") for line in step), step  # no BuildKit frontend named
    assert not [line for line in step if "--mount" in line]  # the settings came over loopback
    version = "dev.tfbuilder.framework-version"
    assert labels(scratch_tag)[version] == labels(release_image)[version]


def test_a_patch_rebuild_without_a_server_uses_the_local_cache_mount(release_image, tmp_path, scratch_tag, cache_dir):
    """No --compile-cache: nvbuild.sh keeps ccache's objects in the BuildKit cache mount, so
    a second patch of the same unit compiles that unit only; the image holds none of it.
    (One capability, extension only: the first derive compiles every unit for it.)"""
    args = ["--nvbuild-args", "--only extension --sm 8.6", "--no-test", "-q"]
    logs = []
    for n, value in enumerate(random.sample(range(1000, 10**9), 2)):
        patch = tmp_path / f"marker{n}.patch"
        patch.write_text(marker_patch(value))
        tag = f"{scratch_tag}-{n}"
        out = builder("derive", "--no-sbom", "--from", release_image, "--patch", str(patch), "--tag", tag, *args)
        assert out.returncode == 0, out.stderr[-3000:]
        assert marker(tag) == value
        logs.append(derive_log(cache_dir, tag))
        held = docker("run", "--rm", "--entrypoint", "find", tag, "/var/cache/nvbuild", "-mindepth", "1").stdout
        docker("rmi", tag)
        assert held.strip() == ""  # the cache stayed in the mount
    counted = re.search(r"compile cache: (\d+) of (\d+) translation units from the cache", logs[1])
    assert counted and int(counted.group(1)) == int(counted.group(2)) - 1, logs[1][-3000:]
    assert re.findall(r"nvbuild.sh: compiled: (\S+)", logs[1]) == [UNIT]

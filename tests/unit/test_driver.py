"""The driver contract (builder/catalog/driver.py): the facts table, the rule, each release's
computed minimum and GPU verdicts, where the image carries them (NVIDIA_REQUIRE_CUDA, the
labels, the banner, `builder show`), and the entrypoint's GPU/JIT check run with a fake
nvidia-smi."""

import json
import shlex
import shutil
import subprocess
import time
from dataclasses import replace

import pytest
import yaml

from builder import catalog
from builder.catalog import DeviceCode, driver
from builder.core.contract import JIT_CACHE_MAXSIZE, ImageEnv, InImage, Label
from builder.core.errors import CatalogError, UserError
from builder.in_image import cuda_arch
from builder.render import RenderOptions, render
from builder.render.base_recipe import BaseRecipe

CAT = catalog.load()


def _contract(release, variant="tf2-py3", **kw):
    rel = CAT.get(release)
    return driver.contract(rel, rel.variant(variant), **kw)


def _files(release, variant="tf2-py3"):
    rel = CAT.get(release)
    return render(rel, rel.variant(variant), RenderOptions(offline_base_image=BaseRecipe(rel.offline).tag)).files


# --- the facts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cuda, toolkit, isa, jit",
    [
        ("11.2", "460.27.03", "7.2", "460.27.03"),
        ("11.4.1", "470.42.01", "7.4", "470.42.01"),
        ("12.4.1", "550.54.14", "8.4", "550.54.14"),
        ("12.5.1", "555.42.02", "8.5", "555.42.02"),
        ("12.6", "560.28.03", "8.5", "555.42.02"),  # 12.6 writes ISA 8.5: 12.5's driver reads it
        ("12.8", "570.26", "8.7", "570.26"),
        ("12.9.86", "575.51.03", "8.8", "575.51.03"),
    ],
)
def test_toolkit_drivers_and_ptx_isa(cuda, toolkit, isa, jit):
    assert driver.toolkit_driver(cuda) == toolkit
    assert driver.ptx_isa(cuda) == isa
    assert driver.jit_driver(cuda) == jit == driver.isa_driver(isa)


def test_the_ptx_isa_decides_the_jit_driver():
    """TensorFlow 2.21 was built with CUDA 12.5.1, but its clang wrote ISA 8.3: a 12.3
    driver JIT-compiles it. An ISA between known ones takes the next toolkit's driver."""
    assert driver.isa_driver("8.3") == "545.23.06"
    assert driver.isa_driver("8.6") == "570.26"  # 8.6 was CUDA 12.7's, never released
    with pytest.raises(UserError, match="PTX ISA 9.9 is newer than any CUDA toolkit"):
        driver.isa_driver("9.9")


def test_minor_version_floors_and_gpu_floors():
    assert driver.minor_version_floor("11.2") == driver.minor_version_floor("11.8") == "450.80.02"
    assert driver.minor_version_floor("12.9") == "525.60.13"
    assert driver.minor_version_floor("13.0") == "580.65.06"
    assert driver.gpu_driver("12.0") == driver.gpu_driver("10.0") == ("570.26", "12.8")  # Blackwell: R570
    assert driver.gpu_driver("9.0") == ("520.61.05", "11.8")
    assert driver.gpu_driver("8.6") == ("455.23", "11.1")


def test_driver_versions_compare_field_by_field():
    assert driver.newest("570.26", "570.124.06", "555.42.02") == "570.124.06"
    assert driver.version_key("525.60.13") < driver.version_key("525.85.12")


def test_every_toolkit_the_arch_policy_knows_has_a_driver():
    """A GPU's floor comes from the first toolkit that compiles for it: every such toolkit
    is in the table."""
    for arch in cuda_arch.KNOWN_ARCHS:
        first = cuda_arch.first_toolkit_for(cuda_arch.Arch(*arch))
        if first:
            assert cuda_arch.cuda_major_minor(first) in driver.TOOLKIT_DRIVERS, first


# --- the rule, per release ---------------------------------------------------------------


def test_21_08_minimum_and_verdicts():
    c = _contract("21.08")
    assert (c.library_cuda, c.minimum, c.require_cuda) == ("11.2", "450.80.02", "cuda>=11.0,driver>=450.80.02")
    v = c.verdicts
    assert v["7.5"].runs and v["7.5"].driver == "450.80.02" and "SASS sm_75" in v["7.5"].text
    assert v["8.6"].runs and "SASS sm_80" in v["8.6"].text  # sm_80 runs on 8.6
    for gpu in ("9.0", "10.0", "12.0"):
        assert v[gpu].runs is False
        assert v[gpu].text == (
            f"cannot run — its CUDA 11.x cuDNN/cuBLAS are built for GPUs up to 8.6 "
            f"(CUDA 11.2), not for {gpu}; `builder inspect IMAGE --coverage` lists what each holds"
        )
    assert c.jit_gpus == []  # every GPU it runs on has machine code for everything


def test_26_11_minimum_verdicts_and_ptx_jit():
    c = _contract("26.11")
    assert (c.library_cuda, c.minimum, c.require_cuda) == ("12.9", "525.60.13", "cuda>=12.0,driver>=525.60.13")
    assert c.framework_jit_driver == "545.23.06"  # TF 2.21's compute_90: clang 18 writes ISA 8.3
    assert c.own_jit_driver == "550.54.14"  # nvcc 12.4: ISA 8.4
    assert c.ptx_jit == "550.54.14"  # the newest ISA the image carries
    for gpu in ("7.5", "8.0", "8.6", "8.9", "9.0"):
        assert c.verdicts[gpu].runs and c.verdicts[gpu].driver == "525.60.13" and not c.verdicts[gpu].jit
    for gpu in ("10.0", "12.0"):
        v = c.verdicts[gpu]
        assert v.runs and v.jit == ("framework",) and v.driver == "570.26"
        assert v.text.startswith("runs (cuDNN/cuBLAS 12.9 SASS; TensorFlow's kernels by PTX JIT from compute_90)")
        assert "the JIT of PTX ISA 8.3 needs 545.23.06" in v.text
    assert c.jit_gpus == ["10.0", "12.0"]


def test_every_release_has_a_floor_of_its_libraries_major():
    for rel in CAT.releases.values():
        for c in driver.contracts(rel).values():
            major = cuda_arch.cuda_major_minor(c.library_cuda)[0]
            assert c.minimum == driver.MINOR_VERSION_FLOOR[major], rel.name
            assert all(
                v.driver is None or driver.version_key(v.driver) >= driver.version_key(c.minimum)
                for v in c.verdicts.values()
            )


def test_a_jit_requirement_above_the_gpu_s_own_binds():
    """PTX from a newer toolkit on a GPU the driver has long known: the ISA decides. A
    wheel with machine code up to 7.0 and CUDA 11.8's PTX for 8.0 runs on 8.6 by JIT and
    needs 11.8's driver (520.61.05), more than the floor (450.80.02) and the GPU (455.23)."""
    rel = CAT.get("21.08")
    variant = replace(rel.variant("tf2-py3"), device_code=DeviceCode("2.5.0", "11.8", ("7.0",), ("8.0",), "7.8"))
    v = driver.contract(rel, variant).verdicts["8.6"]
    assert v.runs and v.jit == ("framework",) and v.driver == "520.61.05"
    assert "TensorFlow's kernels by PTX JIT from compute_80" in v.text


def test_no_device_code_gives_unknown_verdicts():
    rel = CAT.get("21.08")
    c = driver.contract(rel, replace(rel.variant("tf2-py3"), device_code=None))
    assert c.minimum == "450.80.02" and c.verdicts["8.0"].runs is None
    assert "framework.device_code" in c.verdicts["8.0"].text


# --- the catalog's record of the wheel ---------------------------------------------------


def test_device_code_is_read_from_the_catalog():
    assert CAT.get("26.11").variant("tf2-py3").device_code == DeviceCode(
        "2.21.0", "12.5.1", ("6.0", "7.0", "8.0", "8.9", "9.0"), ("9.0",), "8.3"
    )
    assert CAT.get("21.08").variant("tf2-py3").device_code.ptx == ("8.0",)  # inherited from 21.06, same version


@pytest.mark.parametrize(
    "device_code, message",
    [
        (
            '{version: "2.14.0", cuda: "11.8", sass: ["7.0"], ptx: ["8.0"], ptx_isa: "7.8"}',
            "describes TensorFlow 2.14.0's wheel, not 2.14.1's: measure",
        ),
        (
            '{version: "2.14.1", cuda: "11.2", sass: ["9.0"], ptx: []}',
            "compute capability 9.0 cannot be compiled for CUDA 11.2",
        ),
        ('{version: "2.14.1", cuda: "11.8", sass: ["7.0"]}', "ptx: missing required field"),
        ('{version: "2.14.1", cuda: "11.8", sass: ["7.0"], ptx: ["8.0"]}', "ptx_isa: missing required field"),
        (
            '{version: "2.14.1", cuda: "11.8", sass: ["7.0"], ptx: ["8.0"], ptx_isa: "7.8.1"}',
            "is not a PTX ISA version",
        ),
        ('{version: "2.14.1", cuda: "11.8", sass: ["7.0"], ptx: [], arch: x}', "unknown key"),
    ],
)
def test_device_code_problems_are_reported(make_catalog, device_code, message):
    from tests.unit.conftest import GOOD

    text = GOOD.replace(
        'framework: {version: "2.14.1"}', f'framework: {{version: "2.14.1", device_code: {device_code}}}'
    )
    with pytest.raises(CatalogError) as err:
        catalog.load(make_catalog({"r.yaml": text}))
    assert message in str(err.value)


def test_an_inherited_device_code_for_another_version_is_refused(make_catalog):
    from tests.unit.conftest import GOOD

    parent = GOOD.replace(
        'framework: {version: "2.14.1"}',
        'framework: {version: "2.14.1", device_code: '
        '{version: "2.14.1", cuda: "11.8", sass: ["7.0"], ptx: ["8.0"], ptx_isa: "7.8"}}',
    )
    child = 'release: "30.02"\nparent: "30.01"\nvariants:\n  tf2-py3:\n    framework: {version: "2.15.0"}\n'
    with pytest.raises(CatalogError) as err:
        catalog.load(make_catalog({"a.yaml": parent, "b.yaml": child}))
    assert "describes TensorFlow 2.14.1's wheel, not 2.15.0's" in str(err.value)


# --- where the image carries it ----------------------------------------------------------


@pytest.mark.parametrize("release", ["21.08", "26.11"])
def test_the_dockerfile_sets_the_contract(release):
    files, c = _files(release), _contract(release)
    text = files["Dockerfile"]
    assert f'{ImageEnv.REQUIRE_CUDA}="{c.require_cuda}"' in text
    assert f'{ImageEnv.CACHE_PATH}="{InImage.JIT_CACHE}"' in text
    assert f'{ImageEnv.CACHE_MAXSIZE}="{JIT_CACHE_MAXSIZE}"' in text and JIT_CACHE_MAXSIZE == 4294967296
    assert f'{Label.MIN_DRIVER}="{c.minimum}"' in text and f'{Label.MIN_DRIVER_PTX_JIT}="{c.ptx_jit}"' in text
    assert f"RUN install -d -m 1777 {InImage.JIT_CACHE}\n" in text
    assert f"NVIDIA driver: {c.minimum} or newer" in files["entrypoint/entrypoint.d/10-banner.sh"]


def test_the_runtime_stage_sets_it_too():
    text = _files("26.11")["Dockerfile"]
    core, runtime = text[: text.index("FROM core AS devel")], text[text.index("FROM core AS runtime") :]
    assert 'NVIDIA_REQUIRE_CUDA="cuda>=12.0,driver>=525.60.13"' in runtime
    assert f"RUN install -d -m 1777 {InImage.JIT_CACHE}" in core  # the stage both images stand on


def test_env_overrides_win():
    rel = CAT.get("26.11")
    opts = RenderOptions(offline_base_image=BaseRecipe(rel.offline).tag, env=(("NVIDIA_REQUIRE_CUDA", "cuda>=12.9"),))
    assert 'NVIDIA_REQUIRE_CUDA="cuda>=12.9"' in render(rel, rel.variant("tf2-py3"), opts).dockerfile


def test_the_banner_line_names_the_jit_gpus():
    assert driver.minimum_text(_contract("26.11")) == (
        "525.60.13 or newer (CUDA 12.x minor version compatibility); 550.54.14 or newer where kernels are "
        "JIT-compiled from PTX (10.0, 12.0)"
    )
    assert driver.minimum_text(_contract("21.08")) == "450.80.02 or newer (CUDA 11.x minor version compatibility)"


def test_builder_show_prints_the_computed_contract():
    out = subprocess.run(["builder", "show", "26.11"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    shown = yaml.safe_load(out.stdout)
    assert shown["cuda"] == "12.4.1"  # the release as before
    computed = shown["computed"]["tf2-py3"]
    assert computed["minimum_driver"] == "525.60.13" and computed["ptx_jit_driver"] == "550.54.14"
    assert computed["gpus"]["12.0"].startswith("runs (cuDNN/cuBLAS 12.9 SASS; TensorFlow's kernels by PTX JIT")
    assert computed["platforms"].startswith("linux/amd64 (linux/arm64: no")
    as_json = json.loads(
        subprocess.run(["builder", "show", "21.08", "--json"], capture_output=True, text=True, timeout=60).stdout
    )
    assert as_json["computed"]["tf2-py3"]["gpus"]["12.0"].startswith("cannot run — its CUDA 11.x cuDNN/cuBLAS")


# --- the entrypoint's GPU/JIT check, with a fake nvidia-smi ------------------------------

BUILD_INFO = {
    "framework_name": "TensorFlow",
    "version": "2.21.0",
    "cuda_binaries": [
        {
            "component": "tensorflow",
            "path": "/x/libtensorflow_cc.so.2",
            "sass": ["60", "70", "80", "89", "90"],
            "ptx": ["90"],
        },
        {
            "component": "extension",
            "path": "/x/_tfext_ops.so",
            "sass": ["75", "80", "86", "89", "90", "100", "120"],
            "ptx": ["90"],
        },
        # cuFFT: a stub sm_52 module in .nv_fatbin, its kernels elsewhere: never judged
        {"component": "cufft", "path": "/x/libcufft.so.11", "sass": ["52"], "ptx": [], "kernels_elsewhere": True},
    ],
    "coverage": {
        "9.0": {
            "/x/libtensorflow_cc.so.2": {"component": "tensorflow", "kind": "sass", "from": "sm_90"},
            "/x/_tfext_ops.so": {"component": "extension", "kind": "sass", "from": "sm_90"},
        },
        "12.0": {
            "/x/libtensorflow_cc.so.2": {"component": "tensorflow", "kind": "ptx", "from": "compute_90"},
            "/x/_tfext_ops.so": {"component": "extension", "kind": "sass", "from": "sm_120"},
        },
    },
}


@pytest.fixture(scope="module")
def jit_check(tmp_path_factory):
    """The rendered 26.11 part, reading a fake build-info.json; run(smi_output, ...) sources
    it as the entrypoint does (set -e) with a fake nvidia-smi (or none) first on PATH."""
    tmp = tmp_path_factory.mktemp("jit")
    info = tmp / "build-info.json"
    info.write_text(json.dumps(BUILD_INFO))
    script = tmp / "55-gpu-jit-check.sh"
    script.write_text(
        _files("26.11")["entrypoint/entrypoint.d/55-gpu-jit-check.sh"].replace(InImage.BUILD_INFO, str(info))
    )
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    python3 = shutil.which("python3")

    def run(smi=None, smi_rc=0, env=None):
        bin_dir = tmp / f"bin{time.monotonic_ns()}"
        bin_dir.mkdir()
        marker = bin_dir / "python-ran"
        (bin_dir / "python3").write_text(f'#!/bin/sh\ntouch {marker}\nexec {python3} "$@"\n')
        (bin_dir / "python3").chmod(0o755)
        if smi is not None:
            (bin_dir / "nvidia-smi").write_text(
                "#!/bin/sh\n"
                '[ "$*" = "--query-gpu=compute_cap,driver_version --format=csv,noheader" ] || exit 3\n'
                f"printf '%s' {shlex.quote(smi)}\nexit {smi_rc}\n"
            )
            (bin_dir / "nvidia-smi").chmod(0o755)
        path = f"{bin_dir}:/usr/bin:/bin"
        started = time.monotonic()
        out = subprocess.run(
            ["bash", "-c", f"set -e; source {script}; echo END"],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": path, **(env or {})},
        )
        return out, marker.exists(), time.monotonic() - started

    return run


def test_without_a_gpu_it_is_silent_and_runs_nothing(jit_check):
    if shutil.which("nvidia-smi", path="/usr/bin:/bin"):
        pytest.skip("this machine has an nvidia-smi in /usr/bin or /bin")
    out, python_ran, seconds = jit_check(smi=None)
    assert out.returncode == 0 and out.stdout == "END\n" and out.stderr == ""
    assert not python_ran and seconds < 2


def test_a_gpu_with_machine_code_is_silent(jit_check):
    out, python_ran, _ = jit_check("9.0, 560.35.03\n9.0, 560.35.03\n")
    assert out.stdout == "END\n" and out.stderr == "" and python_ran


def test_a_ptx_only_gpu_gets_the_jit_note_and_the_volume(jit_check):
    out, _, _ = jit_check("12.0, 570.86.10\n")
    assert out.returncode == 0 and out.stdout.endswith("END\n"), out.stderr
    text = out.stdout
    assert (
        "TensorFlow's kernels have no machine code for this GPU (compute capability 12.0), only PTX (compute_90)"
        in text
    )
    assert "for minutes" in text
    assert f"{InImage.JIT_CACHE} (up to 4 GiB)" not in text  # CUDA_CACHE_* come from the image's ENV
    assert f"docker run --gpus all -v tf-jit-cache:{InImage.JIT_CACHE} ..." in text
    assert "WARNING" not in text


def test_the_cache_settings_shown_are_the_environment_s(jit_check):
    out, _, _ = jit_check("12.0, 570.86.10\n", env={"CUDA_CACHE_PATH": "/cache/x", "CUDA_CACHE_MAXSIZE": "4294967296"})
    assert "/cache/x (up to 4 GiB); keep it across containers" in out.stdout
    assert "docker run --gpus all -v tf-jit-cache:/cache/x ..." in out.stdout


def test_a_driver_too_old_for_the_ptx_or_the_libraries_is_named(jit_check):
    out, _, _ = jit_check("12.0, 535.104.05\n")
    assert "compiling that PTX needs NVIDIA driver 545.23.06 or newer; this one is 535.104.05" in out.stdout
    out, _, _ = jit_check("9.0, 470.82.01\n")
    assert "NVIDIA driver 470.82.01 is older than 525.60.13" in out.stdout and "PTX" not in out.stdout


def test_a_gpu_outside_the_table_is_judged_from_the_binaries(jit_check):
    out, _, _ = jit_check("12.1, 580.65.06\n")  # not a coverage row: cuda_binaries decide
    assert "(compute capability 12.1), only PTX (compute_90)" in out.stdout
    assert "cuFFT" not in out.stdout  # its stub module is no verdict on it
    out, _, _ = jit_check("5.2, 580.65.06\n")  # older than TensorFlow's oldest code
    assert "TensorFlow's kernels carry no code for this GPU (compute capability 5.2)" in out.stdout
    assert "WARNING: the extension (tfext) carries no code for this GPU (compute capability 5.2)." in out.stdout


@pytest.mark.parametrize(
    "smi, rc, env",
    [
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", 9, None),
        ('Field "compute_cap" is not a valid field to query.', 2, None),
        ("garbage\n", 0, None),
        ("12.0, 570.86.10\n", 0, {"NVIDIA_CPU_ONLY": "1"}),
    ],
)
def test_a_failing_or_odd_nvidia_smi_is_ignored(jit_check, smi, rc, env):
    out, _, _ = jit_check(smi, smi_rc=rc, env=env)
    assert out.returncode == 0 and out.stdout == "END\n" and out.stderr == ""


def test_own_code_keeps_the_ptx_nvcc_embeds_when_every_capability_is_assembled():
    rel = catalog.load().get("26.11")
    code = driver.own_code(rel, ["10.0"])  # nvcc 12.4 compiles none of it: it writes compute_90 PTX
    assert code.sass == ("10.0",) and code.ptx == ("9.0",)

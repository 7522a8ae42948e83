"""Read-back logic (pure): an image's own report checked against the catalog, turned into
labels and a coverage table. Reports here are shaped like image_report.py's output."""

import copy
import functools
import json

import pytest

from builder import catalog, components
from builder.image import readback
from builder.in_image import cuda_arch
from builder.in_image.image_report import coverage_table

TF_LIB = "/usr/local/lib/python3.9/dist-packages/tensorflow/python/_pywrap_tensorflow_internal.so"
EXT_LIB = "/usr/local/lib/python3.9/dist-packages/tfext/_tfext_ops.so"
HVD_LIB = "/usr/local/lib/python3.9/dist-packages/horovod/tensorflow/mpi_lib.cpython-39-x86_64-linux-gnu.so"
REQUESTED = ["5.2", "6.0", "6.1", "7.0", "7.5", "8.0", "8.6"]
TOGGLES = {"xla": True, "gcp": False, "hdfs": False}


@pytest.fixture(scope="module")
def rel():
    return catalog.load().get("21.08")


@pytest.fixture
def report():
    return sample_report()


@functools.cache  # sample_report() is asked for on every fake image report
def _release(name: str):
    return catalog.load().get(name)


def components_held(release_name: str = "21.08") -> dict:
    """The report's components entry of an image that holds what release RELEASE_NAME pins."""
    rel = _release(release_name)
    return {n: components.get(n).held_example(spec) for n, spec in rel.components.items()}


def sample_report() -> dict:
    """A report shaped like image_report.py's for 21.08 tf2-py3 that matches the catalog."""
    binaries = [
        {"component": "tensorflow", "path": TF_LIB, "sass": ["35", "50", "60", "70", "75", "80"], "ptx": ["80"]},
        {"component": "extension", "path": EXT_LIB, "sass": ["52", "60", "61", "70", "75", "80", "86"], "ptx": ["86"]},
        {"component": "horovod", "path": HVD_LIB, "sass": ["52", "60", "61", "70", "75", "80", "86"], "ptx": ["86"]},
    ]
    lib = lambda so, v: {"soname": so, "loaded": True, "version": v, "path": f"/x/{so}"}  # noqa: E731
    return {
        "framework_name": "TensorFlow",
        "version": "2.5.0",
        "python": "3.9.2",
        "cuda_version": "11.2",
        "cudnn_version": "8.5.0",
        "nccl_version": "2.13.4",
        "tensorrt_version": "",
        "tf_trt_available": False,
        "tensorflow": {
            "build_info": {"is_cuda_build": True, "cuda_version": "11.2", "cudnn_version": "8"},
            "tensorrt_linked": "7.2.2",
        },
        "libraries": {
            "cudart": lib("libcudart.so.11.0", "11.2"),
            "cublas": lib("libcublas.so.11", "11.4.1"),
            "cublasLt": lib("libcublasLt.so.11", "11.4.1"),
            "cufft": lib("libcufft.so.10", "10401"),
            "curand": lib("libcurand.so.10", "10203"),
            "cusolver": lib("libcusolver.so.11", "11.1.0"),
            "cusparse": lib("libcusparse.so.11", "11.4.1"),
            "cudnn": lib("libcudnn.so.8", "8.5.0"),
            "nccl": lib("libnccl.so.2", "2.13.4"),
            "tensorrt": {"soname": "libnvinfer.so.7", "loaded": False, "error": "libnvinfer.so.7: cannot open"},
        },
        "driver_libraries": [],
        "filesystems": {
            "gs": {"available": True, "detail": "no network"},
            "hdfs": {"available": False, "detail": "libhdfs.so"},
        },
        "xla": {
            "xla_flags": "",
            "data_dir_searched": ["/x/nvidia/cuda_nvcc", "/usr/local/cuda", "/usr/local/cuda"],
            "ptxas": "/usr/local/cuda/bin/ptxas",
            "libdevice": "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc",
            "ptxas_version": "11.2.152",
            "cpu_jit_compile": {"ok": True, "result": 22.5, "expected": 22.5},
        },
        "extension": {
            "framework_name": "tfext",
            "version": "0.2.0",
            "is_xla_build": True,
            "library": EXT_LIB,
            "cuda_compute_capabilities": [f"sm_{a.replace('.', '')}" for a in REQUESTED] + ["compute_86"],
        },
        "components": components_held(),
        "cuda_binaries": binaries,
        "coverage": coverage_table(binaries, REQUESTED),
    }


def test_coverage_policy():
    assert cuda_arch.coverage("8.6", ["80"], []) == ("sass", "sm_80")  # same major, older minor
    assert cuda_arch.coverage("8.6", ["75"], ["80"]) == ("ptx", "compute_80")
    assert cuda_arch.coverage("9.0", ["86"], ["86"]) == ("ptx", "compute_86")  # no 9.x SASS: JIT
    assert cuda_arch.coverage("7.0", ["75"], ["75"]) == ("none", "")  # PTX newer than the GPU
    assert cuda_arch.coverage("12.0", ["100"], ["90"]) == ("ptx", "compute_90")  # 10.0 SASS is not 12.x


def test_a_matching_report_passes_with_warnings_only(report, rel):
    v = readback.check(report, rel, rel.variant("tf2-py3"), REQUESTED, TOGGLES, expect_components=tuple(rel.components))
    assert v.problems == []
    assert any("TF-TRT is unavailable" in w and "TensorRT 7.2.2" in w for w in v.warnings)
    assert any("gs:// built in" in w for w in v.warnings)


@pytest.mark.parametrize(
    "mutate,expected",
    [
        (lambda r: r.update(version="2.5.1"), "holds TensorFlow 2.5.1, the catalog says 2.5.0"),
        (lambda r: r["libraries"]["cudnn"].update(loaded=False, error="not found"), "GPU library cudnn"),
        (lambda r: r["libraries"].pop("nccl"), "GPU library nccl"),
        (lambda r: r.update(driver_libraries=["/usr/lib/x86_64-linux-gnu/libcuda.so.1"]), "driver library"),
        (lambda r: r.update(extension=None), "extension (tfext) is not installed"),
        (lambda r: r["extension"].update(is_xla_build=False), "XLA kernels are not in the build"),
        (lambda r: r["components"]["horovod"].update(version="0.22.0"), "holds Horovod 0.22.0"),
        (lambda r: r["components"].pop("horovod"), "Horovod is not installed"),
        (lambda r: r["extension"].update(cuda_compute_capabilities=["sm_70", "compute_70"]), "compiled for"),
    ],
)
def test_each_disagreement_is_a_problem(report, rel, mutate, expected):
    bad = copy.deepcopy(report)
    mutate(bad)
    v = readback.check(bad, rel, rel.variant("tf2-py3"), REQUESTED, TOGGLES, expect_components=tuple(rel.components))
    assert any(expected in p for p in v.problems), v.problems


def test_a_capability_no_binary_can_run_is_a_problem(report, rel):
    binaries = copy.deepcopy(report["cuda_binaries"])
    binaries[1]["sass"], binaries[1]["ptx"] = ["80"], ["80"]  # the extension lacks 7.0 entirely
    bad = dict(report, cuda_binaries=binaries, coverage=coverage_table(binaries, ["7.0"]))
    v = readback.check(bad, rel, rel.variant("tf2-py3"), ["7.0"], TOGGLES, expect_extension=False)
    assert v.problems == [
        "compute capability 7.0: extension binary _tfext_ops.so carries no code a GPU of it "
        "can run (no SASS, no older PTX)"
    ]


def test_tensorflow_ptx_jit_is_a_warning_naming_its_source(report, rel):
    binaries = report["cuda_binaries"]
    more = dict(report, coverage=coverage_table(binaries, REQUESTED + ["9.0"]))
    v = readback.check(more, rel, rel.variant("tf2-py3"), REQUESTED, TOGGLES)
    assert v.problems == []
    assert any("9.0: TensorFlow's own kernels run by PTX JIT from compute_80" in w for w in v.warnings)


def test_labels_come_from_the_report(report):
    labels = readback.measured_labels(report)
    assert labels["dev.tfbuilder.framework-version"] == "2.5.0"
    assert labels["dev.tfbuilder.cudnn"] == "8.5.0" and labels["dev.tfbuilder.tf-trt"] == "unavailable"
    assert labels["dev.tfbuilder.horovod"] == "0.22.1 (mpi, gloo, nccl, cuda)"
    assert labels["dev.tfbuilder.filesystems"] == "gs"
    assert labels["dev.tfbuilder.coverage"].split() == [f"{a}=sass" for a in REQUESTED]
    assert labels["org.opencontainers.image.description"].startswith("TensorFlow 2.5.0 (upstream wheel); CUDA 11.2")
    changed = copy.deepcopy(report)
    changed["version"] = "9.9.9"
    assert readback.measured_labels(changed)["dev.tfbuilder.framework-version"] == "9.9.9"


def test_coverage_rows(report):
    more = dict(report, coverage=coverage_table(report["cuda_binaries"], ["8.6", "9.0"]))
    header, rows = readback.coverage_rows(more)
    assert header == ["COMPONENT / BINARY", "8.6", "9.0"]
    assert rows == [
        ["TensorFlow 2.5.0", "sm_80", "compute_80"],
        ["  _pywrap_tensorflow_internal.so", "sm_80", "compute_80"],
        ["tfext 0.2.0", "sm_86", "compute_86"],
        ["  _tfext_ops.so", "sm_86", "compute_86"],
        ["Horovod 0.22.1", "sm_86", "compute_86"],
        ["  mpi_lib.cpython-39-x86_64-linux-gnu.so", "sm_86", "compute_86"],
    ]
    assert readback.coverage_summary(more) == {"8.6": "sass", "9.0": "ptx (tensorflow, extension, horovod)"}


class ReportingEngine:
    """An engine whose images run a report: counts the containers it starts."""

    def __init__(self, images: dict[str, dict]):
        self.images, self.runs = images, 0

    def inspect(self, ref):
        return self.images[ref]

    def run_capture(self, image, cmd, stdout_only=False, timeout=0):
        self.runs += 1
        return 0, f'log line\n{{"image": "{image}", "cmd": {len(cmd)}}}\n'


def image(layers, env=("PATH=/usr/bin",), labels=None):
    return {"RootFS": {"Layers": list(layers)}, "Config": {"Env": list(env), "Labels": labels or {}}}


def test_report_is_reused_only_for_the_same_layers_and_config(tmp_path):
    engine = ReportingEngine(
        {
            "first": image(["sha256:a", "sha256:b"], labels={"org.opencontainers.image.created": "monday"}),
            "same-content-new-date": image(
                ["sha256:a", "sha256:b"], labels={"org.opencontainers.image.created": "tuesday"}
            ),
            "other-layer": image(["sha256:a", "sha256:c"]),
            "other-env": image(["sha256:a", "sha256:b"], env=("PATH=/usr/bin", "TF_CUDA_COMPUTE_CAPABILITIES=8.6")),
        }
    )
    first = readback.read_report(engine, "first", ["8.6"], store=tmp_path)
    assert engine.runs == 1 and first["image"] == "first"
    assert readback.read_report(engine, "same-content-new-date", ["8.6"], store=tmp_path) == first
    assert engine.runs == 1  # labels are not content: nothing ran
    readback.read_report(engine, "first", ["7.0"], store=tmp_path)
    readback.read_report(engine, "other-layer", ["8.6"], store=tmp_path)
    readback.read_report(engine, "other-env", ["8.6"], store=tmp_path)
    assert engine.runs == 4  # request, layers and env are all part of the key
    readback.read_report(engine, "first", ["8.6"])
    assert engine.runs == 5  # without a store, always measured


def test_a_damaged_kept_report_is_measured_again(tmp_path):
    engine = ReportingEngine({"img": image(["sha256:a"])})
    readback.read_report(engine, "img", store=tmp_path)
    (kept,) = tmp_path.glob("*.json")
    kept.write_text("{not json")
    assert readback.read_report(engine, "img", store=tmp_path)["image"] == "img"
    assert engine.runs == 2 and json.loads(kept.read_text())["image"] == "img"


@pytest.mark.parametrize(
    "change,expected",
    [
        (lambda x: x.update(ptxas=None), "XLA's GPU compiler finds no ptxas where it looks (/x/nvidia/cuda_nvcc, "),
        (lambda x: x.update(libdevice=None), "finds no libdevice.10.bc where it looks"),
        (lambda x: x.update(ptxas=None, libdevice=None), "finds no ptxas and no libdevice.10.bc"),
        (
            lambda x: x.update(cpu_jit_compile={"ok": False, "result": 1.0, "expected": 22.5}),
            "a jit_compile run on the CPU failed: got 1.0, expected 22.5",
        ),
        (
            lambda x: x.update(cpu_jit_compile={"ok": False, "error": "XLA compilation disabled"}),
            "a jit_compile run on the CPU failed: XLA compilation disabled",
        ),
    ],
)
def test_xla_that_cannot_compile_fails_the_build(rel, report, change, expected):
    change(report["xla"])
    problems = readback.check(report, rel, rel.variants["tf2-py3"], REQUESTED, TOGGLES).problems
    assert [p for p in problems if "XLA" in p and expected in p], problems


def test_xla_is_checked_only_when_it_is_on_and_reported(rel, report):
    assert not [
        p for p in readback.check(report, rel, rel.variants["tf2-py3"], REQUESTED, TOGGLES).problems if "XLA" in p
    ]
    report["xla"]["ptxas"] = None
    report["extension"]["is_xla_build"] = False
    off = readback.check(report, rel, rel.variants["tf2-py3"], REQUESTED, {**TOGGLES, "xla": False}).problems
    assert not [p for p in off if "ptxas" in p]
    del report["xla"]  # a report from before the image reported XLA
    assert not [
        p for p in readback.check(report, rel, rel.variants["tf2-py3"], REQUESTED, TOGGLES).problems if "ptxas" in p
    ]
    # a CPU-only TensorFlow needs no ptxas, but its jit_compile run must still work
    cpu = sample_report()
    cpu["tensorflow"]["build_info"]["is_cuda_build"] = False
    cpu["xla"]["ptxas"] = None
    assert not [
        p for p in readback.check(cpu, rel, rel.variants["tf2-py3"], REQUESTED, TOGGLES).problems if "ptxas" in p
    ]


def test_coverage_rows_come_in_capability_order_not_text_order(report):
    # the report's JSON sorts its keys as text; Blackwell's rows must come last, not first
    report["coverage"] = coverage_table(report["cuda_binaries"], ["6.0", "8.6", "9.0", "10.0", "12.0"])
    report["coverage"] = dict(sorted(report["coverage"].items()))  # as json.dumps(sort_keys=True) leaves it
    assert list(report["coverage"])[:2] == ["10.0", "12.0"]
    header, _ = readback.coverage_rows(report)
    assert header[1:] == ["6.0", "8.6", "9.0", "10.0", "12.0"]
    assert list(readback.coverage_summary(report)) == ["6.0", "8.6", "9.0", "10.0", "12.0"]
    assert list(readback.coverage_verdicts(report)) == ["6.0", "8.6", "9.0", "10.0", "12.0"]
    assert list(readback.coverage_components(report)[0]["coverage"]) == ["6.0", "8.6", "9.0", "10.0", "12.0"]


# --- every CUDA binary of the image, grouped by component -------------------------------------------
SITE = "/usr/local/lib/python3.9/dist-packages"


def full_report(archs=("8.6", "9.0", "12.0")) -> dict:
    """21.08's report with NVIDIA's libraries too, shaped like what image_report.py reads there:
    cuDNN 8's sub-libraries (PTX in a few modules only), NCCL (no PTX), cuBLAS with a
    shadowed copy from the CUDA toolkit and an empty module of libnvblas."""
    report = sample_report()
    cudnn = lambda name, modules, ptx: {  # noqa: E731
        "component": "cudnn",
        "path": f"{SITE}/nvidia/cudnn/lib/{name}",  # noqa: E731
        "sass": ["35", "50", "60", "61", "70", "75", "80", "86"],
        "ptx": ["70"],
        "modules": modules,
        "ptx_modules": {"70": ptx},
    }
    report["cuda_binaries"] = [dict(b, modules=1, ptx_modules={b["ptx"][0]: 1}) for b in report["cuda_binaries"]] + [
        cudnn("libcudnn_ops_infer.so.8", 17, 17),
        cudnn("libcudnn_cnn_infer.so.8", 1439, 70),
        {
            "component": "cublas",
            "path": f"{SITE}/nvidia/cublas/lib/libcublasLt.so.11",
            "soname": "libcublasLt.so.11",
            "sass": ["35", "50", "60", "61", "70", "75", "80", "86", "90"],
            "ptx": ["90"],
            "modules": 796,
            "ptx_modules": {"90": 87},
        },
        {
            "component": "cublas",
            "path": "/usr/lib/x86_64-linux-gnu/libcublasLt.so.11.4.1.1043",
            "soname": "libcublasLt.so.11",
            "sass": ["35", "50", "60", "61", "70", "75", "80"],
            "ptx": ["80"],
            "modules": 258,
            "ptx_modules": {"80": 75},
            "shadowed_by": f"{SITE}/nvidia/cublas/lib/libcublasLt.so.11",
        },
        {
            "component": "cublas",
            "path": "/usr/lib/x86_64-linux-gnu/libnvblas.so.11.4.1.1043",
            "sass": [],
            "ptx": [],
            "modules": 0,
            "ptx_modules": {},
            "no_kernels": True,
        },
        {
            "component": "nccl",
            "path": f"{SITE}/nvidia/nccl/lib/libnccl.so.2",
            "sass": ["35", "50", "60", "61", "70", "80"],
            "ptx": [],
            "modules": 1,
            "ptx_modules": {},
        },
    ]
    report["coverage"] = coverage_table(report["cuda_binaries"], list(archs))
    report["components"].pop("dali")
    return report


def test_components_are_grouped_in_order_with_their_worst_binary():
    components = readback.coverage_components(full_report())
    assert [(c["component"], c["name"]) for c in components] == [
        ("tensorflow", "TensorFlow 2.5.0"),
        ("extension", "tfext 0.2.0"),
        ("horovod", "Horovod 0.22.1"),
        ("cudnn", "cuDNN 8.5.0"),
        ("cublas", "cuBLAS 11.4.1"),
        ("nccl", "NCCL 2.13.4"),
    ]
    cudnn, cublas, nccl = components[3:]
    assert cudnn["coverage"]["8.6"] == {"kind": "sass", "from": "sm_86", "binaries": [2, 2]}
    # 12.0: PTX in every cuDNN file, but in 87 of its 1456 modules only (the rest: SASS of one GPU generation)
    assert cudnn["coverage"]["12.0"] == {"kind": "ptx", "from": "compute_70", "binaries": [2, 2], "modules": [87, 1456]}
    assert cublas["binaries"] == [f"{SITE}/nvidia/cublas/lib/libcublasLt.so.11"]  # the loader's copy only
    assert cublas["not_counted"] == {
        "/usr/lib/x86_64-linux-gnu/libcublasLt.so.11.4.1.1043": f"not loaded: the loader takes {SITE}/nvidia/cublas/lib/libcublasLt.so.11 for libcublasLt.so.11",
        "/usr/lib/x86_64-linux-gnu/libnvblas.so.11.4.1.1043": "no kernels: its device code is empty modules only",
    }
    assert cublas["coverage"]["9.0"]["kind"] == "sass" and nccl["coverage"]["9.0"]["kind"] == "none"


def test_a_component_is_as_weak_as_its_weakest_binary():
    report = full_report(["12.0"])
    ops = next(b for b in report["cuda_binaries"] if b["path"].endswith("libcudnn_ops_infer.so.8"))
    ops["ptx"], ops["ptx_modules"] = [], {}  # one sub-library without PTX: cuDNN cannot run there
    report["coverage"] = coverage_table(report["cuda_binaries"], ["12.0"])
    cudnn = next(c for c in readback.coverage_components(report) if c["component"] == "cudnn")
    assert cudnn["coverage"]["12.0"] == {"kind": "none", "from": "", "binaries": [1, 2]}


def test_verdicts_per_capability_name_the_components():
    verdicts = readback.coverage_verdicts(full_report())
    assert (
        verdicts["8.6"]["verdict"] == "sass" and verdicts["8.6"]["text"] == "runs natively: SASS in every component (6)"
    )
    assert verdicts["9.0"]["verdict"] == "none" and verdicts["9.0"]["none"] == ["nccl"]
    assert verdicts["12.0"]["text"] == (
        "cannot run: NCCL 2.13.4 has no code for 12.0; by JIT: TensorFlow (compute_80), tfext (compute_86), "
        "Horovod (compute_86), cuDNN (compute_70, 87/1456 modules), cuBLAS (compute_90, 87/796 modules)"
    )
    report = full_report(["9.0"])
    report["cuda_binaries"] = [b for b in report["cuda_binaries"] if b["component"] != "nccl"]
    report["coverage"] = coverage_table(report["cuda_binaries"], ["9.0"])
    assert readback.coverage_verdicts(report)["9.0"] == {
        "verdict": "ptx",
        "none": [],
        "sass": ["cublas"],
        "ptx": {"tensorflow": "compute_80", "extension": "compute_86", "horovod": "compute_86", "cudnn": "compute_70"},
        "text": "runs after JIT; by JIT: TensorFlow (compute_80), tfext (compute_86), Horovod (compute_86), "
        "cuDNN (compute_70, 87/1456 modules); SASS in cuBLAS",
    }


def test_the_coverage_label_stays_short():
    report = full_report(("8.6", "9.0", "12.0"))
    label = readback.measured_labels(report)["dev.tfbuilder.coverage"]
    assert label == "8.6=sass 9.0=none(nccl) 12.0=none(nccl)"
    report["cuda_binaries"] = [b for b in report["cuda_binaries"] if b["component"] != "nccl"]
    report["coverage"] = coverage_table(report["cuda_binaries"], ["12.0"])
    assert readback.measured_labels(report)["dev.tfbuilder.coverage"] == "12.0=ptx(tensorflow,extension,horovod,+2)"


def test_gaps_in_pinned_libraries_are_warnings_gaps_in_built_binaries_problems(rel):
    report = full_report(REQUESTED + ["9.0"])
    v = readback.check(report, rel, rel.variant("tf2-py3"), REQUESTED, TOGGLES)
    assert v.problems == []
    assert (
        "compute capability 9.0: NCCL 2.13.4 has no code a GPU of it can run (libnccl.so.2: no SASS, no older PTX)"
        in v.warnings
    )
    assert (
        "compute capability 9.0: cuDNN 8.5.0 runs by PTX JIT from compute_70 (2 of its 2 binaries; 87 of its "
        "1456 modules have PTX)" in v.warnings
    )
    assert not [w for w in v.warnings if "cuBLAS" in w]  # sm_90 SASS
    bad = copy.deepcopy(report)
    tf = bad["cuda_binaries"][0]
    tf["sass"], tf["ptx"] = ["80"], []
    bad["coverage"] = coverage_table(bad["cuda_binaries"], ["9.0"])
    assert readback.check(bad, rel, rel.variant("tf2-py3"), REQUESTED, TOGGLES).problems == [
        "compute capability 9.0: tensorflow binary _pywrap_tensorflow_internal.so carries no code a GPU of it can run "
        "(no SASS, no older PTX)"
    ]


def test_inspect_coverage_prints_the_table_what_is_not_counted_and_the_verdicts():
    import re

    from builder.image import describe

    lines = describe.coverage_text(full_report()).splitlines()
    table = lines[: lines.index("")]
    assert re.split(r"\s{2,}", table[0]) == ["COMPONENT / BINARY", "8.6", "9.0", "12.0"]
    rows = {cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", line.strip()) for line in table[1:])}
    assert rows["cuDNN 8.5.0"] == ["sm_86", "compute_70 (87/1456)", "compute_70 (87/1456)"]
    assert rows["libcudnn_cnn_infer.so.8"] == ["sm_86", "compute_70 (70/1439)", "compute_70 (70/1439)"]
    assert rows["NCCL 2.13.4"] == rows["libnccl.so.2"] == ["sm_80", "none", "none"]
    assert rows["cuBLAS 11.4.1"] == ["sm_86", "sm_90", "compute_90 (87/796)"]
    assert "libcublasLt.so.11.4.1.1043" not in rows and "libnvblas.so.11.4.1.1043" not in rows
    assert table[1].startswith("TensorFlow") and table[2].startswith("  _pywrap")  # binaries under their component
    assert "Not counted:" in lines and any("libnvblas" in line and "no kernels" in line for line in lines)
    assert any(line.startswith("12.0  cannot run: NCCL 2.13.4 has no code for 12.0") for line in lines)
    assert "8.6   runs natively: SASS in every component (6)" in lines


def test_a_fatbin_the_parser_could_not_read_is_said():
    from builder.image import describe

    report = full_report(["8.6"])
    nccl = next(b for b in report["cuda_binaries"] if b["component"] == "nccl")
    nccl.update(sass=[], ptx=[], error="the fatbin entry at offset 0x40 overruns its container")
    report["coverage"] = coverage_table(report["cuda_binaries"], ["8.6"])
    text = describe.coverage_text(report)
    assert f"  {nccl['path']}: the fatbin entry at offset 0x40 overruns its container; counted as no code" in text
    assert readback.coverage_verdicts(report)["8.6"]["none"] == ["nccl"]


def test_a_report_from_before_dali_was_a_component_reads_as_one(report, rel):
    """An image whose own image_report.py puts DALI at the top (a parent built before
    builder/components/dali) is checked and labelled like a current one."""
    entry = report["components"]["dali"]
    old = {**report, "dali": entry, "components": {k: v for k, v in report["components"].items() if k != "dali"}}
    read = readback.with_components(old)
    assert read["components"]["dali"] == entry
    variant = rel.variant("tf2-py3")
    assert readback.check(read, rel, variant, [], {"xla": True}, True, ("dali",)).problems == []
    assert readback.measured_labels(read)["dev.tfbuilder.dali"] == "1.34.0 (TensorFlow plugin 1.34.0)"
    assert readback.with_components(report) == report  # a current one is left as it is

"""Read-back logic (pure): an image's own report checked against the catalog, turned into
labels and a coverage table. Reports here are shaped like image_report.py's output."""
import copy
import json

import pytest

from builder import catalog, cuda_arch, readback
from builder.image_report import coverage_table

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


def sample_report() -> dict:
    """A report shaped like image_report.py's for 21.08 tf2-py3 that matches the catalog."""
    binaries = [
        {"component": "tensorflow", "path": TF_LIB, "sass": ["35", "50", "60", "70", "75", "80"], "ptx": ["80"]},
        {"component": "extension", "path": EXT_LIB, "sass": ["52", "60", "61", "70", "75", "80", "86"], "ptx": ["86"]},
        {"component": "horovod", "path": HVD_LIB, "sass": ["52", "60", "61", "70", "75", "80", "86"], "ptx": ["86"]},
    ]
    lib = lambda so, v: {"soname": so, "loaded": True, "version": v, "path": f"/x/{so}"}  # noqa: E731
    return {
        "framework_name": "TensorFlow", "version": "2.5.0", "python": "3.9.2",
        "cuda_version": "11.2", "cudnn_version": "8.5.0", "nccl_version": "2.13.4", "tensorrt_version": "",
        "tf_trt_available": False,
        "tensorflow": {"build_info": {"is_cuda_build": True, "cuda_version": "11.2", "cudnn_version": "8"},
                       "tensorrt_linked": "7.2.2"},
        "libraries": {"cudart": lib("libcudart.so.11.0", "11.2"), "cublas": lib("libcublas.so.11", "11.4.1"),
                      "cublasLt": lib("libcublasLt.so.11", "11.4.1"), "cufft": lib("libcufft.so.10", "10401"),
                      "curand": lib("libcurand.so.10", "10203"), "cusolver": lib("libcusolver.so.11", "11.1.0"),
                      "cusparse": lib("libcusparse.so.11", "11.4.1"), "cudnn": lib("libcudnn.so.8", "8.5.0"),
                      "nccl": lib("libnccl.so.2", "2.13.4"),
                      "tensorrt": {"soname": "libnvinfer.so.7", "loaded": False, "error": "libnvinfer.so.7: cannot open"}},
        "driver_libraries": [],
        "filesystems": {"gs": {"available": True, "detail": "no network"}, "hdfs": {"available": False, "detail": "libhdfs.so"}},
        "xla": {"xla_flags": "", "data_dir_searched": ["/x/nvidia/cuda_nvcc", "/usr/local/cuda", "/usr/local/cuda"],
                "ptxas": "/usr/local/cuda/bin/ptxas", "libdevice": "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc",
                "ptxas_version": "11.2.152", "cpu_jit_compile": {"ok": True, "result": 22.5, "expected": 22.5}},
        "extension": {"framework_name": "tfext", "version": "0.2.0", "is_xla_build": True, "library": EXT_LIB,
                      "cuda_compute_capabilities": [f"sm_{a.replace('.', '')}" for a in REQUESTED] + ["compute_86"]},
        "horovod": {"version": "0.22.1", "mpi_built": True, "gloo_built": True, "nccl_built": True, "cuda_built": True},
        "cuda_binaries": binaries,
        "coverage": coverage_table(binaries, REQUESTED),
    }


def test_coverage_policy():
    assert cuda_arch.coverage("8.6", ["80"], []) == ("sass", "sm_80")          # same major, older minor
    assert cuda_arch.coverage("8.6", ["75"], ["80"]) == ("ptx", "compute_80")
    assert cuda_arch.coverage("9.0", ["86"], ["86"]) == ("ptx", "compute_86")  # no 9.x SASS: JIT
    assert cuda_arch.coverage("7.0", ["75"], ["75"]) == ("none", "")           # PTX newer than the GPU
    assert cuda_arch.coverage("12.0", ["100"], ["90"]) == ("ptx", "compute_90")  # 10.0 SASS is not 12.x


def test_a_matching_report_passes_with_warnings_only(report, rel):
    v = readback.check(report, rel, rel.variant("tf2-py3"), REQUESTED, TOGGLES)
    assert v.problems == []
    assert any("TF-TRT is unavailable" in w and "TensorRT 7.2.2" in w for w in v.warnings)
    assert any("gs:// built in" in w for w in v.warnings)


@pytest.mark.parametrize("mutate,expected", [
    (lambda r: r.update(version="2.5.1"), "holds TensorFlow 2.5.1, the catalog says 2.5.0"),
    (lambda r: r["libraries"]["cudnn"].update(loaded=False, error="not found"), "GPU library cudnn"),
    (lambda r: r["libraries"].pop("nccl"), "GPU library nccl"),
    (lambda r: r.update(driver_libraries=["/usr/lib/x86_64-linux-gnu/libcuda.so.1"]), "driver library"),
    (lambda r: r.update(extension=None), "extension (tfext) is not installed"),
    (lambda r: r["extension"].update(is_xla_build=False), "XLA kernels are not in the build"),
    (lambda r: r["horovod"].update(version="0.22.0"), "holds Horovod 0.22.0"),
    (lambda r: r.update(horovod=None), "Horovod 0.22.1 is not installed"),
    (lambda r: r["extension"].update(cuda_compute_capabilities=["sm_70", "compute_70"]), "compiled for"),
])
def test_each_disagreement_is_a_problem(report, rel, mutate, expected):
    bad = copy.deepcopy(report)
    mutate(bad)
    v = readback.check(bad, rel, rel.variant("tf2-py3"), REQUESTED, TOGGLES)
    assert any(expected in p for p in v.problems), v.problems


def test_a_capability_no_binary_can_run_is_a_problem(report, rel):
    binaries = copy.deepcopy(report["cuda_binaries"])
    binaries[1]["sass"], binaries[1]["ptx"] = ["80"], ["80"]       # the extension lacks 7.0 entirely
    bad = dict(report, cuda_binaries=binaries, coverage=coverage_table(binaries, ["7.0"]))
    v = readback.check(bad, rel, rel.variant("tf2-py3"), ["7.0"], TOGGLES, expect_extension=False)
    assert v.problems == ["compute capability 7.0: extension binary _tfext_ops.so carries no code a GPU of it "
                          "can run (no SASS, no older PTX)"]


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
    assert header == ["capability", "tensorflow:_pywrap_tensorflow_internal.so", "extension:_tfext_ops.so",
                      "horovod:mpi_lib.cpython-39-x86_64-linux-gnu.so"]
    assert rows == [["8.6", "SASS sm_80", "SASS sm_86", "SASS sm_86"],
                    ["9.0", "PTX JIT compute_80", "PTX JIT compute_86", "PTX JIT compute_86"]]
    assert readback.coverage_summary(more) == {"8.6": "sass", "9.0": "ptx (extension, horovod, tensorflow)"}


class ReportingEngine:
    """An engine whose images run a report: counts the containers it starts."""

    def __init__(self, images: dict[str, dict]):
        self.images, self.runs = images, 0

    def inspect(self, ref):
        return self.images[ref]

    def run_capture(self, image, cmd, stdout_only=False, timeout=0):
        self.runs += 1
        return 0, f"log line\n{{\"image\": \"{image}\", \"cmd\": {len(cmd)}}}\n"


def image(layers, env=("PATH=/usr/bin",), labels=None):
    return {"RootFS": {"Layers": list(layers)}, "Config": {"Env": list(env), "Labels": labels or {}}}


def test_report_is_reused_only_for_the_same_layers_and_config(tmp_path):
    engine = ReportingEngine({
        "first": image(["sha256:a", "sha256:b"], labels={"org.opencontainers.image.created": "monday"}),
        "same-content-new-date": image(["sha256:a", "sha256:b"], labels={"org.opencontainers.image.created": "tuesday"}),
        "other-layer": image(["sha256:a", "sha256:c"]),
        "other-env": image(["sha256:a", "sha256:b"], env=("PATH=/usr/bin", "TF_CUDA_COMPUTE_CAPABILITIES=8.6")),
    })
    first = readback.read_report(engine, "first", ["8.6"], store=tmp_path)
    assert engine.runs == 1 and first["image"] == "first"
    assert readback.read_report(engine, "same-content-new-date", ["8.6"], store=tmp_path) == first
    assert engine.runs == 1                              # labels are not content: nothing ran
    readback.read_report(engine, "first", ["7.0"], store=tmp_path)
    readback.read_report(engine, "other-layer", ["8.6"], store=tmp_path)
    readback.read_report(engine, "other-env", ["8.6"], store=tmp_path)
    assert engine.runs == 4                              # request, layers and env are all part of the key
    readback.read_report(engine, "first", ["8.6"])
    assert engine.runs == 5                              # without a store, always measured


def test_a_damaged_kept_report_is_measured_again(tmp_path):
    engine = ReportingEngine({"img": image(["sha256:a"])})
    readback.read_report(engine, "img", store=tmp_path)
    (kept,) = tmp_path.glob("*.json")
    kept.write_text("{not json")
    assert readback.read_report(engine, "img", store=tmp_path)["image"] == "img"
    assert engine.runs == 2 and json.loads(kept.read_text())["image"] == "img"


@pytest.mark.parametrize("change,expected", [
    (lambda x: x.update(ptxas=None), "XLA's GPU compiler finds no ptxas where it looks (/x/nvidia/cuda_nvcc, "),
    (lambda x: x.update(libdevice=None), "finds no libdevice.10.bc where it looks"),
    (lambda x: x.update(ptxas=None, libdevice=None), "finds no ptxas and no libdevice.10.bc"),
    (lambda x: x.update(cpu_jit_compile={"ok": False, "result": 1.0, "expected": 22.5}),
     "a jit_compile run on the CPU failed: got 1.0, expected 22.5"),
    (lambda x: x.update(cpu_jit_compile={"ok": False, "error": "XLA compilation disabled"}),
     "a jit_compile run on the CPU failed: XLA compilation disabled"),
])
def test_xla_that_cannot_compile_fails_the_build(rel, report, change, expected):
    change(report["xla"])
    problems = readback.check(report, rel, rel.variants["tf2-py3"], REQUESTED, TOGGLES).problems
    assert [p for p in problems if "XLA" in p and expected in p], problems


def test_xla_is_checked_only_when_it_is_on_and_reported(rel, report):
    assert not [p for p in readback.check(report, rel, rel.variants["tf2-py3"], REQUESTED, TOGGLES).problems if "XLA" in p]
    report["xla"]["ptxas"] = None
    report["extension"]["is_xla_build"] = False
    off = readback.check(report, rel, rel.variants["tf2-py3"], REQUESTED, {**TOGGLES, "xla": False}).problems
    assert not [p for p in off if "ptxas" in p]
    del report["xla"]  # a report from before the image reported XLA
    assert not [p for p in readback.check(report, rel, rel.variants["tf2-py3"], REQUESTED, TOGGLES).problems if "ptxas" in p]
    # a CPU-only TensorFlow needs no ptxas, but its jit_compile run must still work
    cpu = sample_report()
    cpu["tensorflow"]["build_info"]["is_cuda_build"] = False
    cpu["xla"]["ptxas"] = None
    assert not [p for p in readback.check(cpu, rel, rel.variants["tf2-py3"], REQUESTED, TOGGLES).problems if "ptxas" in p]


def test_coverage_rows_come_in_capability_order_not_text_order(report):
    # the report's JSON sorts its keys as text; Blackwell's rows must come last, not first
    report["coverage"] = coverage_table(report["cuda_binaries"], ["6.0", "8.6", "9.0", "10.0", "12.0"])
    report["coverage"] = dict(sorted(report["coverage"].items()))  # as json.dumps(sort_keys=True) leaves it
    assert list(report["coverage"])[:2] == ["10.0", "12.0"]
    _, rows = readback.coverage_rows(report)
    assert [r[0] for r in rows] == ["6.0", "8.6", "9.0", "10.0", "12.0"]
    assert list(readback.coverage_summary(report)) == ["6.0", "8.6", "9.0", "10.0", "12.0"]

"""`builder doctor` against a release: the disk a cold build needs, the NVIDIA container
runtime or CDI where a GPU is, the driver against the release's minimum. The machine's
facts are fakes: a fake nvidia-smi on PATH, a CDI directory in tmp, a free-disk function."""

from __future__ import annotations

import stat

import pytest

from builder import catalog
from builder.cli import doctor, doctor_gpu, doctor_report

CONTAINERD_INFO = {
    "DockerRootDir": "/var/lib/docker",
    "Driver": "overlayfs",
    "DriverStatus": [["driver-type", "io.containerd.snapshotter.v1"]],
}


@pytest.fixture(scope="module")
def releases():
    return catalog.load().releases


def free_gb(gb: float):
    return lambda path: gb


# ---- disk -------------------------------------------------------------------------------------
def test_a_44_gb_need_fails_with_30_gb_free_naming_both(releases, monkeypatch):
    monkeypatch.setitem(doctor.COLD_BUILD_GB, "26.11", 40.0)  # + the engine's 4 GB
    check = doctor.disk_check(releases["26.11"], ["/var/lib/docker"], free_gb(30.4))
    assert check.status == "fail" and check.name == "free disk"
    assert check.detail.startswith("needs ~44 GB free for a cold 26.11 build, 30 GB free on /var/lib/docker")
    assert "docker builder prune" in check.advice and "warm cache needs less" in check.advice
    text, healthy = doctor_report.report([check])
    assert not healthy and text.splitlines()[0].startswith("FAIL free disk")
    assert "hint: free 14 GB or more" in text


def test_enough_disk_passes(releases, monkeypatch):
    monkeypatch.setitem(doctor.COLD_BUILD_GB, "26.11", 40.0)
    check = doctor.disk_check(releases["26.11"], ["/var/lib/docker"], free_gb(44.5))
    assert check.ok and check.status == "ok" and "needs ~44 GB" in check.detail and not check.advice


def test_the_measured_table_decides_per_release(releases):
    """30 GB free: too little for 26.11 (26.6 GB at its peak + 4), enough for 21.08 (17.2 + 4)."""
    assert not doctor.disk_check(releases["26.11"], ["/d"], free_gb(30)).ok
    assert doctor.disk_check(releases["26.11"], ["/d"], free_gb(31)).ok
    assert doctor.disk_check(releases["21.08"], ["/d"], free_gb(30)).ok
    assert not doctor.disk_check(releases["21.08"], ["/d"], free_gb(20)).ok


def test_without_a_release_the_largest_figure_is_named(monkeypatch):
    monkeypatch.setattr(doctor, "COLD_BUILD_GB", {"21.08": 17.2, "26.11": 26.6, "99.01": 50.0})
    check = doctor.disk_check(None, ["/d"], free_gb(45))
    assert not check.ok and "cold 99.01 build" in check.detail and "the largest measured figure" in check.detail
    assert "--release R" in check.detail


def test_an_unmeasured_release_is_an_estimate_by_its_cuda_major(releases):
    name, peak, how = doctor.cold_build_need(releases["22.12"])  # the offline base's CUDA 11.2
    assert (name, peak) == ("22.12", doctor.COLD_BUILD_GB["21.08"]) and how.startswith("an estimate")
    assert "estimate" in doctor.disk_check(releases["22.12"], ["/d"], free_gb(100)).detail


def test_the_least_free_store_decides(monkeypatch):
    paths = doctor.store_paths(CONTAINERD_INFO, exists=lambda p: True)
    assert paths == ["/var/lib/docker", "/var/lib/containerd"]
    assert doctor.store_paths({**CONTAINERD_INFO, "DriverStatus": []}, exists=lambda p: True) == ["/var/lib/docker"]
    check = doctor.disk_check(None, paths, {"/var/lib/docker": 80.0, "/var/lib/containerd": 10.0}.get)
    assert not check.ok and "10 GB free on /var/lib/containerd" in check.detail


def test_a_data_root_not_on_this_machine_warns(releases):
    check = doctor.disk_check(releases["21.08"], ["/remote"], lambda p: None)
    assert check.status == "warn" and "cannot see /remote" in check.detail


# ---- GPU: fakes ---------------------------------------------------------------------------------
@pytest.fixture
def machine(tmp_path, monkeypatch):
    """PATH of one tmp directory; `gpu(...)` puts a fake nvidia-smi there, `tool(name)` another
    program; `cdi` an empty CDI directory; `device` a /dev/nvidia0 that does not exist."""
    bin_dir, cdi = tmp_path / "bin", tmp_path / "cdi"
    bin_dir.mkdir()
    cdi.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))

    class Machine:
        def __init__(self):
            self.cdi, self.device = cdi, str(tmp_path / "nvidia0")

        def tool(self, name: str, script: str = "exit 0") -> None:
            path = bin_dir / name
            path.write_text(f"#!/bin/sh\n{script}\n")
            path.chmod(path.stat().st_mode | stat.S_IEXEC)

        def gpu(self, *lines: str, old_driver: bool = False) -> None:
            refuse = (
                'case "$1" in *compute_cap*) echo "Field compute_cap is not valid"; exit 2;; esac\n'
                if old_driver
                else ""
            )
            # builtins only: PATH holds nothing but this directory
            self.tool("nvidia-smi", refuse + "".join(f"echo '{line}'\n" for line in lines))

        def checks(self, release=None, info=None):
            return doctor_gpu.gpu_checks(release, info or {}, device=self.device, cdi_dirs=[str(self.cdi)])

    return Machine()


def by_name(items):
    return {c.name: c for c in items}


H100 = "0, 550.54.15, NVIDIA H100 80GB HBM3, 9.0"
HOOK = "nvidia-container-runtime-hook"


def gpu_side_never_fails(items):
    """Building needs no GPU: no GPU-side check is required, none fails, the machine stays healthy."""
    assert all(c.gpu and not c.required and c.status != "fail" for c in items), items
    text, healthy = doctor_report.report(items)
    assert (
        healthy and doctor_report.report_json(items)["healthy"] and text.splitlines()[-1].startswith("ready to build")
    )
    assert "FAIL" not in text
    return text


def test_no_gpu_skips_with_its_reason(machine, releases):
    items = machine.checks(releases["26.11"])
    assert len(items) == 1 and items[0].status == "info"
    assert "GPU checks skipped" in items[0].detail and "no GPU" in items[0].detail
    assert gpu_side_never_fails(items).splitlines()[-1] == "ready to build"


@pytest.mark.parametrize("release", [None, "26.11"])
def test_a_gpu_without_a_container_runtime_warns_with_advice(machine, releases, release):
    machine.gpu(H100)
    items = machine.checks(releases.get(release), {"Runtimes": {"runc": {"path": "runc"}}})
    runtime = by_name(items)["GPU runtime"]
    assert runtime.status == "warn" and runtime.stops and "no NVIDIA container runtime" in runtime.detail
    assert "nvidia-ctk runtime configure --runtime=docker" in runtime.advice and "restart dockerd" in runtime.advice
    assert "--device nvidia.com/gpu=all" in runtime.advice
    assert "GPU 0 NVIDIA H100 80GB HBM3 (9.0)" in by_name(items)["GPU"].detail
    text = gpu_side_never_fails(items)
    assert text.splitlines()[-1] == (
        "ready to build (images will not run on this machine's GPU as it is: see the GPU warnings)"
    )
    assert "--   GPU runtime" in text and "hint: " in text


def test_a_gpu_with_dockers_nvidia_runtime_passes(machine, releases):
    machine.gpu(H100)
    info = {"Runtimes": {"runc": {"path": "runc"}, "nvidia": {"path": "nvidia-container-runtime"}}}
    items = machine.checks(releases["26.11"], info)
    runtime = by_name(items)["GPU runtime"]
    assert runtime.ok and "nvidia runtime" in runtime.detail
    assert gpu_side_never_fails(items).splitlines()[-1] == "ready to build"


def test_the_gpus_hook_on_path_passes(machine, releases):
    machine.gpu(H100)
    machine.tool(HOOK)
    runtime = by_name(machine.checks(releases["26.11"]))["GPU runtime"]
    assert runtime.ok and HOOK in runtime.detail and "--gpus all" in runtime.detail


def test_a_cdi_spec_alone_warns_that_gpus_all_needs_the_hook(machine, releases):
    machine.gpu(H100)
    (machine.cdi / "other.yaml").write_text("cdiVersion: 0.5.0\nkind: vendor.com/device\n")
    assert "no NVIDIA container runtime" in by_name(machine.checks(releases["26.11"]))["GPU runtime"].detail
    (machine.cdi / "nvidia.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n")
    items = machine.checks(releases["26.11"])
    runtime = by_name(items)["GPU runtime"]
    assert runtime.status == "warn" and "nvidia.yaml" in runtime.detail
    assert "`docker run --gpus all`" in runtime.detail and HOOK in runtime.detail
    assert "CDI works with `--device nvidia.com/gpu=all` where the daemon has CDI enabled" in runtime.detail
    assert "nvidia-ctk runtime configure --runtime=docker" in runtime.advice and "restart dockerd" in runtime.advice
    gpu_side_never_fails(items)
    # an engine that lists no CDI directories has CDI off: said
    off = by_name(machine.checks(releases["26.11"], {"CDISpecDirs": []}))["GPU runtime"]
    assert off.status == "warn" and '"cdi": true' in off.detail and "CDI is off" in off.detail
    # with the hook too, `--gpus all` works: passes
    machine.tool(HOOK)
    assert by_name(machine.checks(releases["26.11"]))["GPU runtime"].ok


def test_nvidia_ctk_alone_warns(machine, releases):
    machine.gpu(H100)
    machine.tool("nvidia-ctk")
    items = machine.checks(releases["26.11"])
    runtime = by_name(items)["GPU runtime"]
    assert runtime.status == "warn" and "nvidia-ctk (NVIDIA container toolkit)" in runtime.detail
    assert "`docker run --gpus all` (`builder test`) needs Docker's nvidia runtime or " + HOOK in runtime.detail
    assert "nvidia-ctk runtime configure --runtime=docker" in runtime.advice
    gpu_side_never_fails(items)


def test_a_driver_below_the_release_minimum_warns_naming_both(machine, releases):
    machine.gpu("0, 470.57.02, NVIDIA A100-SXM4-40GB, 8.0")
    machine.tool(HOOK)
    items = machine.checks(releases["26.11"])
    drv = by_name(items)["NVIDIA driver"]
    assert drv.status == "warn" and drv.stops
    assert "470.57.02 is older than 26.11's minimum 525.60.13" in drv.detail
    assert "will not run on this machine's GPUs" in drv.detail and "525.60.13" in drv.advice
    text = gpu_side_never_fails(items)
    assert "(images will not run on this machine's GPU as it is" in text.splitlines()[-1]
    assert doctor_report.report_json(items)["summary"] == text.splitlines()[-1]
    # the same driver runs 21.08 (450.80.02)
    ok = by_name(machine.checks(releases["21.08"]))
    assert ok["NVIDIA driver"].ok and ok["GPU 0"].ok and "SASS sm_80" in ok["GPU 0"].detail


def test_a_gpu_newer_than_the_release_s_code_warns_of_ptx_jit(machine, releases):
    machine.gpu("0, 575.51.03, NVIDIA B200, 10.0")
    machine.tool(HOOK)
    items = machine.checks(releases["26.11"])
    assert by_name(items)["NVIDIA driver"].ok
    gpu = by_name(items)["GPU 0"]
    assert gpu.status == "warn" and not gpu.stops and "PTX JIT" in gpu.detail and "NVIDIA B200 (10.0)" in gpu.detail
    # slower, not stopped: the last line does not say the images will not run
    assert gpu_side_never_fails(items).splitlines()[-1] == (
        "ready to build (see the GPU warnings for running the images here)"
    )


def test_a_driver_too_old_for_what_the_gpu_needs_warns(machine, releases):
    machine.gpu("0, 560.35.03, NVIDIA B200, 10.0")  # above 26.11's floor, below Blackwell's 570.26
    machine.tool(HOOK)
    items = machine.checks(releases["26.11"])
    assert by_name(items)["NVIDIA driver"].ok
    gpu = by_name(items)["GPU 0"]
    assert gpu.status == "warn" and gpu.stops and "older than the 570.26 26.11 needs" in gpu.detail
    assert "will not run on this GPU" in gpu.detail and "570.26" in gpu.advice
    gpu_side_never_fails(items)


def test_a_gpu_the_release_cannot_run_warns(machine, releases):
    machine.gpu(H100)
    machine.tool(HOOK)
    items = machine.checks(releases["21.08"])
    gpu = by_name(items)["GPU 0"]
    assert gpu.status == "warn" and gpu.stops and "cannot run" in gpu.detail
    assert "will not run on this GPU" in gpu.detail
    assert "images will not run on this machine's GPU" in gpu_side_never_fails(items).splitlines()[-1]


def test_an_old_driver_without_compute_cap_is_asked_again(machine, releases):
    machine.gpu("0, 470.57.02, Tesla V100-SXM2-16GB", old_driver=True)
    machine.tool(HOOK)
    items = by_name(machine.checks(releases["21.08"]))
    assert items["NVIDIA driver"].ok and items["GPU 0"].status == "warn" and not items["GPU 0"].stops
    assert "capability unknown" in items["GPU 0"].detail


def test_a_device_node_without_nvidia_smi_still_checks_the_runtime(machine, tmp_path):
    (tmp_path / "nvidia0").write_text("")
    items = machine.checks()
    assert by_name(items)["GPU runtime"].status == "warn" and by_name(items)["NVIDIA driver"].status == "warn"
    gpu_side_never_fails(items)


def test_without_a_release_the_driver_is_held_against_every_release(machine, releases):
    machine.gpu("0, 470.57.02, NVIDIA A100-SXM4-40GB, 8.0")
    machine.tool(HOOK)
    items = machine.checks()
    drv = by_name(items)["NVIDIA driver"]
    assert drv.status == "warn" and "26.11 (525.60.13)" in drv.detail and "21.08" not in drv.detail
    assert "will not run" in drv.detail
    gpu_side_never_fails(items)
    assert doctor_gpu.catalog_driver_check("580.65.06", releases).ok


def test_gpus_are_numbered_by_nvidia_smi_index_one_line_per_model(machine, releases):
    # listed out of order, a model on indices 0-1 and 3, another on 2
    machine.gpu(
        "3, 550.54.15, NVIDIA H100 80GB HBM3, 9.0",
        H100,
        "2, 550.54.15, NVIDIA L4, 8.9",
        "1, 550.54.15, NVIDIA H100 80GB HBM3, 9.0",
    )
    machine.tool(HOOK)
    items = by_name(machine.checks(releases["26.11"]))
    assert "GPU 0-1,3" in items and "GPU 2" in items
    assert not {"GPU 0", "GPU 1", "GPU 3"} & set(items)
    assert "NVIDIA H100 80GB HBM3 (9.0)" in items["GPU 0-1,3"].detail and "NVIDIA L4 (8.9)" in items["GPU 2"].detail
    assert items["GPU"].detail == ("GPU 0-1,3 NVIDIA H100 80GB HBM3 (9.0); GPU 2 NVIDIA L4 (8.9); driver 550.54.15")


def test_eight_of_one_model_are_gpu_0_7():
    gpus = doctor_gpu.parse_gpus("\n".join(f"{i}, 550.54.15, NVIDIA H100 80GB HBM3, 9.0" for i in range(8)))
    assert [g.index for g in gpus] == list(range(8))
    assert doctor_gpu.gpu_summary(gpus) == "GPU 0-7 NVIDIA H100 80GB HBM3 (9.0); driver 550.54.15"
    assert doctor_gpu.gpu_label([5]) == "GPU 5" and doctor_gpu.gpu_label([4, 0, 2, 1]) == "GPU 0-2,4"


def test_nvidia_smi_is_asked_for_the_index(machine):
    asked = []

    def run(*cmd):
        asked.append(cmd)
        return ""

    doctor_gpu.nvidia_smi(which=lambda name: "/bin/nvidia-smi", run=run)
    assert [c[1] for c in asked] == [
        "--query-gpu=index,driver_version,name,compute_cap",
        "--query-gpu=index,driver_version,name",
    ]


# ---- report and JSON -------------------------------------------------------------------------------
def test_report_json_lists_every_check_with_status_value_and_advice(machine, releases):
    machine.gpu(H100)
    items = [doctor.disk_check(releases["26.11"], ["/d"], free_gb(10)), *machine.checks(releases["26.11"])]
    out = doctor_report.report_json(items)
    assert out["healthy"] is False and out["summary"].startswith("not ready to build")
    rows = {r["name"]: r for r in out["checks"]}
    assert set(rows["free disk"]) == {"name", "status", "value", "advice"}
    assert rows["free disk"]["status"] == "fail" and rows["GPU runtime"]["status"] == "warn"
    assert rows["NVIDIA driver"]["status"] == "ok" and rows["GPU"]["status"] == "ok"
    assert all(r["status"] in ("ok", "warn", "fail", "info") for r in out["checks"])


def test_warnings_and_info_do_not_make_the_machine_unhealthy():
    items = [
        doctor_report.Check("a", True, "x"),
        doctor_report.Check("b", False, "y", required=False),
        doctor_report.Check("GPU", True, "none", required=False, info=True),
    ]
    text, healthy = doctor_report.report(items)
    assert healthy and doctor_report.report_json(items)["healthy"] and text.endswith("ready to build")
    assert [line[:4] for line in text.splitlines()[:3]] == ["ok  ", "--  ", "--  "]


def test_a_gpu_check_marked_required_by_mistake_still_cannot_fail_the_build():
    items = [
        doctor_report.Check("engine", True, "x"),
        doctor_report.Check("GPU 0", False, "y", required=True, gpu=True, stops=True),
    ]
    assert items[1].status == "warn"
    text, healthy = doctor_report.report(items)
    assert healthy and text.splitlines()[-1].startswith("ready to build (images will not run")


# ---- checks() with a fake engine ------------------------------------------------------------------
class FakeEngine:
    where = "unix:///fake.sock"

    def __init__(self, timeout: float = 0):
        pass

    def ping(self) -> dict:
        return {**CONTAINERD_INFO, "Runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}}

    def version(self):
        from types import SimpleNamespace

        return SimpleNamespace(server="26.1.5", api="1.45", client_api="1.45")


@pytest.fixture
def fake_engine(monkeypatch, machine):
    monkeypatch.setattr(doctor, "DockerEngine", FakeEngine)
    monkeypatch.setattr(doctor, "buildx_version", lambda: "")
    monkeypatch.setattr(doctor, "disk_free", lambda path: 30.0)
    monkeypatch.setattr(doctor, "GPU_DEVICE", machine.device)
    monkeypatch.setattr(doctor, "CDI_DIRS", (str(machine.cdi),))
    return machine


def test_checks_with_and_without_a_release(fake_engine, releases):
    fake_engine.gpu(H100)
    rows = by_name(doctor.checks())
    assert not rows["free disk"].ok and "cold 26.11 build" in rows["free disk"].detail
    assert rows["GPU runtime"].ok and "NVIDIA driver" in rows
    rows = by_name(doctor.checks(releases["21.08"]))
    assert rows["free disk"].ok and "cold 21.08 build" in rows["free disk"].detail
    assert rows["GPU 0"].status == "warn"  # 21.08 cannot run on an H100


def test_checks_on_a_gpu_machine_without_the_toolkit_fail_on_nothing_gpu_side(fake_engine, releases, monkeypatch):
    """A GPU, a driver below the release's minimum, no nvidia runtime, no hook: builds anyway."""
    monkeypatch.setattr(FakeEngine, "ping", lambda self: dict(CONTAINERD_INFO))
    monkeypatch.setattr(doctor, "disk_free", lambda path: 100.0)
    fake_engine.gpu("0, 470.57.02, NVIDIA A100-SXM4-40GB, 8.0")
    for release in (None, releases["26.11"]):
        items = doctor.checks(release)
        rows = by_name(items)
        assert rows["GPU runtime"].status == "warn" and rows["NVIDIA driver"].status == "warn"
        assert not [c.name for c in items if c.gpu and c.status == "fail"]
        gpu_fails = [line for line in doctor_report.report(items)[0].splitlines() if line.startswith("FAIL")]
        assert not [line for line in gpu_fails if line[5:].startswith(("GPU", "NVIDIA"))]

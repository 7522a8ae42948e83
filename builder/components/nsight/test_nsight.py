"""Nsight's conformance tests: nsys profiles a few CPU training steps of the image's own CNN
example and writes a report that `nsys stats` reads; ncu answers; both are the versions the
catalog pins. Run with the image's suite; no GPU needed (CPU sampling and CUDA tracing stay
off, as a container without perf_event_open and a GPU allows)."""

from __future__ import annotations

import shlex

import pytest

from builder.components.conformance import held
from builder.components.nsight import Nsight
from builder.core.contract import InImage

PROFILE = "/tmp/nsight-conformance/cnn"
TRAIN = f"python3 {InImage.NVIDIA_EXAMPLES}/cnn/cnn.py --model small_cnn --batch_size 8 --num_iter 3 --warmup 1"


@pytest.fixture(scope="module")
def nsight(report, release_data, labels):
    return held(Nsight, report, release_data, labels)


def test_the_profilers_are_the_catalogs_versions(nsight, release_data, labels):
    release = release_data[0]
    assert Nsight.problems(release.components[Nsight.NAME], nsight) == []
    assert labels[Nsight.LABEL] == Nsight.versions_text(nsight)


def test_nsys_profiles_training_steps_and_stats_reads_the_report(nsight, host):
    # nsys 2020.4 (bullseye) sometimes aborts (rc 134) after writing its report: the report
    # is what counts, so one such run is tried again before the test fails.
    for _ in range(2):
        out = host.run(
            f"rm -rf {PROFILE}* && mkdir -p {shlex.quote(PROFILE.rsplit('/', 1)[0])} && cd / && "
            "TF_CPP_MIN_LOG_LEVEL=2 timeout 900 nsys profile --sample=none --cpuctxsw=none --trace=osrt "
            f"--force-overwrite=true -o {PROFILE} {TRAIN}"
        )
        reports = host.run(f"ls {PROFILE}.qdrep {PROFILE}.nsys-rep 2>/dev/null").stdout.split()
        if reports and "final loss:" in out.stdout:
            break
    assert "final loss:" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]
    assert len(reports) == 1, f"no report written (rc {out.rc}): {out.stdout[-1500:]} {out.stderr[-1500:]}"
    stats = host.run(f"nsys stats --report osrtsum --format csv {shlex.quote(reports[0])}")
    assert stats.rc == 0, stats.stdout[-2000:] + stats.stderr[-2000:]
    # the OS runtime summary of the training process: CSV with a Name column and a row per call kind
    rows = [line for line in stats.stdout.splitlines() if line.count(",") >= 6]
    assert rows and "Name" in rows[0], stats.stdout[-2000:]
    assert len(rows) > 1, stats.stdout[-2000:]


def test_ncu_runs_and_knows_its_sections(nsight, host):
    out = host.run("ncu --list-sets")
    assert out.rc == 0, out.stdout[-1500:] + out.stderr[-1500:]
    assert "default" in out.stdout.lower() or "full" in out.stdout.lower(), out.stdout


def test_no_driver_library_came_with_the_profilers(nsight, host):
    out = host.run(
        "find /usr/lib/x86_64-linux-gnu/nsight-systems /usr/lib/x86_64-linux-gnu/nsight-compute "
        "/usr/lib/nsight-systems -name 'libcuda.so*' -o -name 'libnvidia-ml.so*'"
    )
    assert out.stdout.strip() == ""

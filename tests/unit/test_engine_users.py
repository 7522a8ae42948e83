"""registry.Pusher and describe.describe against the in-memory FakeEngine: push retries,
the tag put back after a failed or interrupted push, and what `builder inspect` reports.
No daemon and no registry: probe() and the manifest read-back are stubbed to answer what
the fake engine pushed."""

from __future__ import annotations

import json
import signal

import pytest

from builder import registry as reg
from builder.core.contract import LABEL_PREFIX as LABEL
from builder.core.errors import UserError
from builder.engine import Interrupted
from builder.engine.progress import ProgressMode
from builder.image import describe
from tests.unit.fake_engine import FakeEngine

REF = "registry.example:5000/ml/img:1"
CREDS = reg.Credentials("alice", "pw-unit-s3cret")


@pytest.fixture
def engine(monkeypatch) -> FakeEngine:
    engine = FakeEngine()
    engine.add_image("local/img:1", layers=["sha256:" + "1" * 64, "sha256:" + "2" * 64])
    monkeypatch.setattr(reg, "probe", lambda host, insecure=False: reg.Transport(host, "https", True))
    monkeypatch.setattr(reg, "config_credentials", lambda host: None)
    monkeypatch.setattr(reg, "served_manifest", lambda ref, creds, transport: (engine.pushed[ref], b"{}"))
    monkeypatch.setattr(reg.time, "sleep", lambda seconds: None)  # the backoff, not waited for
    return engine


def pusher(engine: FakeEngine, tries: int = 3) -> reg.Pusher:
    return reg.Pusher(engine, tries=tries, backoff=2.0, progress=ProgressMode.QUIET)


def test_transient_push_failures_are_retried_with_backoff(engine, capsys):
    engine.push_transient_failures = 2
    result = pusher(engine, tries=3).push("local/img:1", REF, CREDS)
    assert result.attempts == 3 and result.digest == engine.pushed[REF] and result.layers_pushed == 2
    assert engine.tags[REF] == engine.tags["local/img:1"]
    assert [c[0] for c in engine.calls if c[0] in ("login", "tag", "push")] == ["login", "tag", "push", "push", "push"]
    assert ("login", "registry.example:5000", "alice") in engine.calls
    err = capsys.readouterr().err
    assert "push: attempt 1 failed (received unexpected HTTP status: 503 Service Unavailable); retrying in 2s" in err
    assert "push: attempt 2 failed" in err and "retrying in 4s" in err
    assert "pw-unit-s3cret" not in repr(engine.calls)


def test_a_push_failing_every_try_removes_the_new_tag(engine):
    engine.push_transient_failures = 5
    with pytest.raises(reg.PushError, match=r"push of .* failed after 3 tries: received unexpected HTTP status: 503"):
        pusher(engine, tries=3).push("local/img:1", REF, None)
    assert engine.names().count("push") == 3
    assert REF not in engine.tags and ("remove_image", REF) in engine.calls
    assert engine.image_id("local/img:1")  # the local image itself stays


def test_a_failed_push_puts_a_moved_tag_back(engine):
    older = engine.add_image(REF)
    engine.push_transient_failures = 5
    with pytest.raises(reg.PushError):
        pusher(engine, tries=2).push("local/img:1", REF, None)
    assert engine.tags[REF] == older and ("remove_image", REF) not in engine.calls


def test_a_permanent_push_error_is_not_retried(engine):
    engine.push_transient_failures, engine.push_error = 1, "manifest invalid: manifest invalid"
    with pytest.raises(reg.PushError, match=r"push of .* failed: manifest invalid") as exc:
        pusher(engine).push("local/img:1", REF, None)
    assert "tries" not in str(exc.value) and engine.names().count("push") == 1
    assert REF not in engine.tags


def test_a_registry_refusing_the_push_is_bad_input_and_moves_no_tag(engine):
    older = engine.add_image(REF)
    engine.push_transient_failures, engine.push_error = 1, "denied: requested access to the resource is denied"
    with pytest.raises(UserError, match="refused the push"):
        pusher(engine).push("local/img:1", REF, None)
    assert engine.tags[REF] == older


def test_an_interrupted_push_puts_the_tag_back(engine):
    older = engine.add_image(REF)
    engine.interrupt("push", signal.SIGTERM)
    with pytest.raises(Interrupted) as exc:
        pusher(engine).push("local/img:1", REF, None)
    assert exc.value.exit_code == 143 and engine.tags[REF] == older


def test_a_wrong_password_fails_before_anything_is_tagged_or_pushed(engine):
    engine.passwords["registry.example:5000"] = "the-right-one"
    with pytest.raises(UserError, match="refused the credentials for user 'alice'"):
        pusher(engine).push("local/img:1", REF, CREDS)
    assert "tag" not in engine.names() and "push" not in engine.names() and REF not in engine.tags


def test_pushing_a_missing_image_is_bad_input(engine):
    with pytest.raises(UserError, match="no image 'local/none:1' in the engine"):
        pusher(engine).push("local/none:1", REF, None)
    assert engine.names() == ["image_id"]


REPORT = {
    "framework_name": "tensorflow",
    "version": "2.5.0",
    "python": "3.8.10",
    "cuda_version": "11.4",
    "cudnn_version": "8.2.2",
    "nccl_version": "2.10.3",
    "tensorrt_version": "",
    "tf_trt_available": False,
    "horovod": {"version": "0.22.1"},
    "extension": {"version": "1.0"},
    "libraries": {"cudart": {"soname": "libcudart.so.11.0", "loaded": True, "version": "11.4", "extra": 1}},
    "driver_libraries": [],
    "filesystems": {"gcs": {"available": True}},
    "cuda_binaries": [{"component": "tensorflow", "path": "/x/_pywrap.so"}],
    "coverage": {
        "8.6": {"/x/_pywrap.so": {"kind": "sass", "component": "tensorflow", "from": "sm_86"}},
        "9.0": {"/x/_pywrap.so": {"kind": "ptx", "component": "tensorflow", "from": "compute_86"}},
    },
}


def test_describe_reads_labels_and_the_images_own_report():
    engine = FakeEngine()
    image_id = engine.add_image(
        "local/tensorflow:21.08-tf2-py3",
        size=123,
        labels={
            f"{LABEL}.release": "21.08",
            f"{LABEL}.variant": "tf2-py3",
            f"{LABEL}.cuda-compute-capabilities": "8.6,local",
            f"{LABEL}.xla": "1",
            f"{LABEL}.patches": '["a.patch"]',
            "com.nvidia.build.id": "b-1",
        },
    )
    commands = []

    def run(image, command):
        commands.append(command)
        return 0, "some log line\n" + json.dumps(REPORT) + "\n"

    engine.run_handler = run
    out = describe.describe(engine, "local/tensorflow:21.08-tf2-py3", ["9.0"])
    # the label's and the asked capabilities, and the fleet's rows (7.5 to 12.0) with them
    assert commands == [["python3", "/opt/tensorflow/image_report.py", "--requested", "7.5,8.0,8.6,8.9,9.0,10.0,12.0"]]
    assert out["id"] == image_id and out["size_bytes"] == 123
    assert (out["release"], out["variant"], out["framework"]) == ("21.08", "tf2-py3", "tensorflow 2.5.0")
    # Horovod at the top of the report: an image built before builder/components/horovod
    assert out["components"]["horovod"] == {"version": "0.22.1"} and out["tf_trt"] == "unavailable"
    assert out["libraries"] == {"cudart": {"soname": "libcudart.so.11.0", "loaded": True, "version": "11.4"}}
    assert out["coverage"] == {"8.6": "sass", "9.0": "ptx (tensorflow)"}
    assert out["toggles"] == {"xla": True, "gcp": False, "hdfs": False} and out["patches"] == ["a.patch"]
    assert out["build_id"] == "b-1" and out["cuda_compute_capabilities"] == "8.6,9.0"
    text = describe.coverage_text(out["_report"]).splitlines()
    assert text[0].split() == ["COMPONENT", "/", "BINARY", "8.6", "9.0"]
    assert text[1].split() == ["TensorFlow", "2.5.0", "sm_86", "compute_86"]  # the component, then its binaries
    assert text[2].split() == ["_pywrap.so", "sm_86", "compute_86"]
    assert text[-2:] == [
        "8.6  runs natively: SASS in every component (1)",
        "9.0  runs after JIT; by JIT: TensorFlow (compute_86)",
    ]


def test_describe_refuses_images_the_builder_did_not_make():
    engine = FakeEngine()
    engine.add_image("ubuntu:22.04", labels={"org.opencontainers.image.version": "22.04"})
    with pytest.raises(UserError, match="was not built by this builder"):
        describe.describe(engine, "ubuntu:22.04")
    with pytest.raises(UserError, match="no image 'nothing:1' in the engine"):
        describe.describe(engine, "nothing:1")
    assert "run_capture" not in engine.names()

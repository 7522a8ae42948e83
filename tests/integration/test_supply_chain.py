"""Supply chain against the real tools: syft's SBOM of the release image plus what the
builder compiled in it, `builder push --sign` (cosign, a key pair, no transparency log)
to Debian's docker-registry on loopback, and `builder verify`: a good image passes, a
retagged one and a wrong key fail in one line with exit 1, a missing key password stops
the push before anything is uploaded."""

import json
import os
import subprocess

import pytest

from builder import catalog
from builder.core.grammar import canonical_name

from .conftest import builder, docker, labels
from .registries import ANONYMOUS_TOKENS, api, registry_manifest, running

PASSWORD = "itest-key-pw-4712"


@pytest.fixture(scope="module")
def signing_registry(tmp_path_factory):
    with running(tmp_path_factory.mktemp("signing-registry"), token=ANONYMOUS_TOKENS) as reg:  # token mode
        yield reg


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Two cosign key pairs: the signer's and somebody else's."""
    found = {}
    for who in ("ours", "theirs"):
        d = tmp_path_factory.mktemp(f"keys-{who}")
        out = subprocess.run(
            ["cosign", "generate-key-pair"],
            cwd=d,
            capture_output=True,
            text=True,
            env={**os.environ, "COSIGN_PASSWORD": PASSWORD},
        )
        assert out.returncode == 0, out.stderr
        found[who] = (d / "cosign.key", d / "cosign.pub")
    return found


def test_the_sbom_lists_the_framework_the_os_packages_and_what_was_compiled(release_image, cache_dir, tmp_path):
    image_id = docker("image", "inspect", "--format", "{{.Id}}", release_image).stdout.strip()
    made = cache_dir / "sbom" / f"{image_id.removeprefix('sha256:')}.cdx.json"
    assert made.is_file(), "builder build makes the SBOM once the image is tagged"
    out = builder("sbom", release_image, "-o", str(tmp_path / "sbom.json"))
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "sbom.json").read_text())
    by_name = {}
    for c in doc["components"]:
        by_name.setdefault(c["name"], []).append(c)
    wanted = catalog.load().get("21.08").variant("tf2-py3").framework_version
    assert [c["version"] for c in by_name["tensorflow"]] == [wanted]
    assert "libc6" in by_name and "numpy" in by_name  # a Debian package, a Python one
    # a component's Debian packages, at the catalog's versions, marked as the component's
    pinned = catalog.load().get("21.08").components["nsight"]
    [nsys] = by_name["nsight-systems-target"]
    assert nsys["version"] == pinned.systems
    assert {"name": "dev.tfbuilder:component", "value": "nsight"} in nsys["properties"]
    # and a component's Python distributions (DALI's wheel and its compiled plugin, TensorBoard)
    for name, component in (("nvidia-dali-cuda110", "dali"), ("tensorboard", "tensorboard")):
        found = [
            c
            for c in doc["components"]
            if canonical_name(c["name"]) == name and str(c.get("purl", "")).startswith("pkg:pypi/")
        ]
        assert found, name
        assert all({"name": "dev.tfbuilder:component", "value": component} in c["properties"] for c in found)
    info = json.loads(
        docker("run", "--rm", "--entrypoint", "cat", release_image, "/opt/tensorflow/build-info.json").stdout
    )
    ext = {p["name"]: p["value"] for p in by_name["tfext"][0]["properties"]}
    assert ext["dev.tfbuilder:source-sha256"] == info["extension"]["source_digest"]  # measured in the image
    [hvd] = by_name["horovod"]
    assert hvd["version"] == info["components"]["horovod"]["version"]
    assert any(p["name"] == "dev.tfbuilder:source-sha256" for p in hvd["properties"])
    assert doc["metadata"]["component"] == {
        "bom-ref": "tfbuilder:image",
        "type": "container",
        "name": release_image,
        "version": image_id,
    }
    assert json.loads(made.read_text()) == doc  # the build's, not made again


def test_a_signed_push_verifies_and_a_retagged_image_or_another_key_does_not(
    release_image, offline_base, signing_registry, keys, tmp_path
):
    (key, pub), (_, other_pub) = keys["ours"], keys["theirs"]
    host = signing_registry.host
    env = {**os.environ, "TFB_KEY_PW": PASSWORD}
    # no password for the key: refused before anything is uploaded
    out = builder(
        "push",
        release_image,
        "--registry",
        f"{host}/ml",
        "--insecure-registry",
        "--sign",
        str(key),
        "--key-password-env",
        "TFB_NO_SUCH_VAR",
        "-q",
    )
    assert out.returncode == 2 and "TFB_NO_SUCH_VAR, which is not set" in out.stderr
    assert "ml/tensorflow" not in api(signing_registry, "_catalog", "registry:catalog:*").read().decode()

    out = builder(
        "push",
        release_image,
        "--registry",
        f"{host}/ml",
        "--insecure-registry",
        "--sign",
        str(key),
        "--key-password-env",
        "TFB_KEY_PW",
        "-q",
        env=env,
    )
    assert out.returncode == 0, out.stderr
    pinned = out.stdout.strip()
    ref, digest = pinned.split("@")
    assert PASSWORD not in out.stdout + out.stderr
    tags = json.load(api(signing_registry, "ml/tensorflow/tags/list", "repository:ml/tensorflow:pull"))["tags"]
    sig = digest.replace(":", "-")
    assert f"{sig}.sig" in tags and f"{sig}.att" in tags  # cosign's tag scheme, beside the image

    out = builder("verify", ref, "--key", str(pub), "--insecure-registry")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("signature: ") and digest in lines[0]
    assert lines[1].startswith("sbom: signed, ") and "tensorflow 2.5.0 as the catalog's 21.08 tf2-py3" in lines[1]
    base_id = docker("image", "inspect", "--format", "{{.Id}}", offline_base).stdout.strip()
    assert labels(release_image)["org.opencontainers.image.base.digest"] == base_id
    assert lines[2].endswith(f"from {offline_base}@{base_id}"), lines[2]

    out = builder("verify", ref, "--key", str(other_pub), "--insecure-registry")
    assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
    assert "signature: no matching signatures" in out.stderr

    # another image pushed under the same tag (the registry's tag moved, not the signature)
    assert docker("tag", offline_base, ref).returncode == 0
    assert docker("push", "-q", ref).returncode == 0
    try:
        out = builder("verify", ref, "--key", str(pub), "--insecure-registry")
        assert out.returncode == 1 and out.stderr.count("\n") == 1, out.stderr
        assert out.stderr.startswith("error: ") and "signature: no signatures found" in out.stderr
    finally:
        docker("rmi", ref)


def test_build_push_sign_checks_the_key_first_then_signs_what_it_pushed(
    release_image, compile_cache, signing_registry, keys, cache_dir
):
    from .conftest import BUILD_ID, REPO

    key, pub = keys["ours"]
    host = signing_registry.host
    # the release image's own options (every step cached), another tag naming the registry:
    # --push sends it there (buildx's way), signed
    tag = f"{host}/built/signed:21.08"
    args = [
        "build",
        "--release",
        "21.08",
        "--variant",
        "tf2-py3",
        "--repo",
        REPO,
        "--build-id",
        BUILD_ID,
        "--compile-cache",
        compile_cache,
        "-t",
        tag,
        "--no-sbom",
        "--push",
        "--insecure-registry",
        "--sign",
        str(key),
        "--key-password-env",
        "TFB_KEY_PW",
        "-q",
    ]
    wrong = builder(*args, env={**os.environ, "TFB_KEY_PW": "not-the-password"})
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1, wrong.stderr
    assert "the key does not open with $TFB_KEY_PW" in wrong.stderr and "base:" not in wrong.stderr  # nothing built
    out = builder(*args, env={**os.environ, "TFB_KEY_PW": PASSWORD})
    try:
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.split()[0] == tag
        pinned = out.stdout.split()[-1]
        assert pinned.startswith(f"{tag}@sha256:"), out.stdout
        verified = builder("verify", pinned, "--key", str(pub), "--insecure-registry")
        assert verified.returncode == 0, verified.stderr
        assert "tensorflow 2.5.0 as the catalog's 21.08 tf2-py3" in verified.stdout
    finally:
        docker("rmi", tag)


def test_a_zstd_image_reaches_the_registry_with_every_layer_in_zstd_and_smaller(release_image, signing_registry):
    """Last of the engine tests on purpose: once an engine holds layers in two compressions,
    BuildKit's registry cache export can exhaust its memory (moby/buildkit#6088, measured
    here: dockerd at 20 GB in the next --layer-cache build); no cache export follows it."""
    plain_registry = signing_registry
    parent = builder("push", release_image, "--registry", f"{plain_registry.host}/ml", "--insecure-registry", "-q")
    assert parent.returncode == 0, parent.stderr
    tag = "itest/derived-zstd:jq"
    out = builder(
        "derive",
        "--no-sbom",
        "--from",
        release_image,
        "--apt",
        "jq",
        "--tag",
        tag,
        "--no-test",
        "--compression",
        "zstd",
        "-q",
    )
    assert out.returncode == 0, out.stderr
    try:
        assert docker("run", "--rm", "--entrypoint", "jq", tag, "--version").stdout.startswith("jq-")  # it unpacks
        out = builder("push", tag, "--registry", f"{plain_registry.host}/ml", "--insecure-registry", "--json", "-q")
        assert out.returncode == 0, out.stderr
    finally:
        docker("rmi", tag)
    report = json.loads(out.stdout)
    zstd = registry_manifest(plain_registry, "ml/derived-zstd", "jq")
    gzip = registry_manifest(plain_registry, "ml/tensorflow", "21.08-tf2-py3")
    assert {layer["mediaType"] for layer in zstd["layers"]} == {"application/vnd.oci.image.layer.v1.tar+zstd"}
    assert report["layer_compression"] == {"zstd": len(zstd["layers"])}  # what push read back, not what it asked
    assert all(layer["mediaType"].endswith("gzip") for layer in gzip["layers"])
    # every layer, the parent's too, recompressed: none is shared, and together they are smaller
    assert not {layer["digest"] for layer in zstd["layers"]} & {layer["digest"] for layer in gzip["layers"]}
    assert sum(layer["size"] for layer in zstd["layers"]) < 0.95 * sum(layer["size"] for layer in gzip["layers"])

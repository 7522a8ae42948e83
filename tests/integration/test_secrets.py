"""Corporate settings reach the build but never the image: not a layer, not the config,
not the history; the CA and the pip credentials not even the build log."""

import functools
import io
import json
import os
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from .conftest import builder, docker
from .registries import Registry

TOKEN = f"S3CRET-{uuid.uuid4().hex}"
MIRROR = "http://deb.debian.org:80/debian"  # the real archive, spelled so it can be recognised


@pytest.fixture(scope="module")
def test_ca(tmp_path_factory):
    d = tmp_path_factory.mktemp("ca")
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            f"/CN=itest-corp-ca-{uuid.uuid4().hex[:8]}",
            "-keyout",
            str(d / "ca.key"),
            "-out",
            str(d / "ca.pem"),
        ],
        check=True,
        capture_output=True,
    )
    pem = (d / "ca.pem").read_text()
    marker = pem.splitlines()[5]  # a line of the certificate body, unique to this CA
    return d / "ca.pem", marker


def image_meta(ref: str) -> dict:
    return json.loads(docker("image", "inspect", ref).stdout)[0]


def new_layers(image: str, base: str) -> list[str]:
    """The layers IMAGE adds on top of BASE (diff ids, bottom first)."""
    ours, theirs = image_meta(image)["RootFS"]["Layers"], image_meta(base)["RootFS"]["Layers"]
    assert ours[: len(theirs)] == theirs, f"{image} is not built on {base}"
    return ours[len(theirs) :]


def _entries(top: Path):
    for path in sorted(top.rglob("*")):
        rel = str(path.relative_to(top))
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        yield str(top), rel.encode() + data


def _tar_entries(name: str, blob):
    """Each entry of one layer tar (plain or gzip, as the engine stored or saved it)."""
    with tarfile.open(fileobj=blob, mode="r:*") as layer:
        for member in layer.getmembers():
            data = member.name.encode()
            if member.isfile():
                data += layer.extractfile(member).read()
            yield name, data


@functools.cache
def content_store() -> Path:
    """The containerd store's content store (the engine's own containerd), asked once."""
    root = docker("info", "--format", "{{.DockerRootDir}}").stdout.strip()
    return Path(root, "containerd/daemon/io.containerd.content.v1.content/blobs")


def content_blob(digest: str) -> Path:
    return content_store().joinpath(*digest.split(":", 1))


def stored_manifest(image_id: str) -> dict | None:
    """The manifest an image id names on the containerd store (None on the classic one)."""
    path = content_blob(image_id)
    return json.loads(path.read_text()) if path.is_file() else None


def layer_files_on_disk(image: str, count: int):
    """(where, bytes) of each entry in the top COUNT layers, read where the engine stores
    them, without `docker save` writing the whole 5.6 GB image (100 s here): overlay2's
    layer directories on the classic store, the layer blobs of the image's manifest in
    containerd's content store on the containerd store (its inspect has no GraphDriver
    data, and its image id is that manifest's digest). None when neither is readable."""
    meta = image_meta(image)
    driver = meta.get("GraphDriver") or {}
    data = driver.get("Data") or {}
    dirs = [data.get("UpperDir", "")] + data.get("LowerDir", "").split(":")
    if driver.get("Name") == "overlay2" and all(Path(d).is_dir() for d in dirs[:count]):
        return (entry for top in dirs[:count] for entry in _entries(Path(top)))
    manifest = stored_manifest(meta["Id"])
    if manifest is None:
        return None
    layers = manifest.get("layers", [])[-count:] if count else []
    if any(not layer["mediaType"].endswith(("tar", "tar+gzip", "tar.gzip")) for layer in layers):
        return None  # zstd: tarfile cannot read it; docker save below can't either, and says so

    def walk():
        for layer in layers:
            with open(content_blob(layer["digest"]), "rb") as f:
                yield from _tar_entries(layer["digest"][:19], f)

    return walk()


def layer_files_saved(image: str, wanted: list[str], tmp: Path):
    """The same from `docker save` (any storage driver; the layers as saved, plain or gzip)."""
    tar_path = tmp / "image.tar"
    subprocess.run(["docker", "save", "-o", str(tar_path), image], check=True)
    try:
        with tarfile.open(tar_path) as outer:
            manifest = json.load(outer.extractfile("manifest.json"))[0]
            diff_ids = json.loads(outer.extractfile(manifest["Config"]).read())["rootfs"]["diff_ids"]
            for layer_path, diff_id in zip(manifest["Layers"], diff_ids):
                if diff_id in wanted:
                    yield from _tar_entries(diff_id[:19], io.BytesIO(outer.extractfile(layer_path).read()))
    finally:
        tar_path.unlink(missing_ok=True)


def scan(image: str, base: str, needles: list[str], tmp: Path) -> list[str]:
    """Where any needle occurs in the layers the build added (each entry's path and
    content), the image config or the history."""
    meta = image_meta(image)  # config, container config, labels, env
    found = [f"image config: {n}" for n in needles if n in json.dumps(meta)]
    wanted = new_layers(image, base)
    entries = layer_files_on_disk(image, len(wanted))
    if entries is None:
        entries = layer_files_saved(image, wanted, tmp)
    for layer, data in entries:
        found += [f"layer {layer}: {n}" for n in needles if n.encode() in data]
    history = docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", image).stdout
    found += [f"history: {n}" for n in needles if n in history]
    return found


@pytest.fixture(scope="module")
def cache_registry(tmp_path_factory):
    reg = Registry(tmp_path_factory.mktemp("secrets-cache")).start()
    yield reg
    reg.cleanup()


def registry_blobs(reg: Registry):
    """(digest, path) of every blob the registry stored."""
    for path in (reg.storage / "docker/registry/v2/blobs").rglob("data"):
        yield "sha256:" + path.parent.name, path


def cache_entries(reg: Registry, skip: set[str]):
    """What the layer cache the registry holds says: each layer blob's entries (paths and
    contents, gzip or plain), and every other blob (cache config, manifests) as it is."""
    for digest, path in registry_blobs(reg):
        if digest in skip:
            continue
        with open(path, "rb") as f:
            head = f.read(262)
        if head[:2] == b"\x1f\x8b" or head[257:262] == b"ustar":
            with open(path, "rb") as f:
                yield from _tar_entries(digest[:19], f)
        else:
            yield digest[:19], path.read_bytes()


def test_settings_are_used_but_not_kept(release_image, test_ca, scratch_tag, tmp_path, cache_dir, cache_registry):
    """A derived image that installs a Debian package through the settings (the release
    build's own RUN steps use the same with-build-settings wrapper), writing its layer
    cache to a registry: the settings are neither in the image nor in the cache."""
    ca, marker = test_ca
    # The pip credentials come from the environment (argv would show them in `ps`).
    # --no-cache: settings are not part of BuildKit's cache keys, so a cached step would not show them used
    out = builder(
        "derive",
        "--no-sbom",
        "--from",
        release_image,
        "--apt",
        "jq",
        "--tag",
        scratch_tag,
        "--no-test",
        "--no-cache",
        "--layer-cache",
        f"{cache_registry.host}/derived-cache",
        "--apt-mirror",
        MIRROR,
        "--pip-index",
        "https://pypi.invalid/simple",
        "--pip-index-credentials-env",
        "ITEST_PIP_CREDS",
        "--ca-bundle",
        str(ca),
        "-q",
        env={**os.environ, "ITEST_PIP_CREDS": f"itest:{TOKEN}"},
    )
    assert out.returncode == 0, out.stderr
    log = (cache_dir / "logs" / f"derive-{scratch_tag.replace('/', '_').replace(':', '_')}.log").read_text()
    assert "deb.debian.org:80" in log, "the apt mirror from the settings was not used"
    assert TOKEN not in log and marker not in log
    # jq's dpkg record is in the derived layers: the scan sees what a layer holds.
    found = scan(
        scratch_tag, release_image, ["Package: jq\n", TOKEN, marker, "deb.debian.org:80", "pypi.invalid"], tmp_path
    )
    assert [f for f in found if f.endswith("Package: jq\n")], "the scan did not see the derived layers"
    assert [f for f in found if not f.endswith("Package: jq\n")] == []
    # The exported cache: every blob but the parent's own layers (the image scan above
    # covers those; they are the release image's, built without these settings).
    parent = stored_manifest(image_meta(release_image)["Id"])
    skip = {layer["digest"] for layer in (parent or {}).get("layers", [])}
    needles = ["Package: jq\n", TOKEN, marker, "deb.debian.org:80", "pypi.invalid"]
    in_cache = [
        f"{where}: {n}" for where, data in cache_entries(cache_registry, skip) for n in needles if n.encode() in data
    ]
    assert [f for f in in_cache if f.endswith("Package: jq\n")], "the scan did not see the cache's new layers"
    assert [f for f in in_cache if not f.endswith("Package: jq\n")] == []


def test_bake_ca_puts_the_ca_in_the_trust_store(release_image, scratch_tag, compile_cache):
    """--bake-ca with the host's bundle (the settings every test build uses, so only the
    steps after the compile run again): a certificate the image did not trust before is
    in its trust store afterwards."""
    host = Path("/etc/ssl/certs/ca-certificates.crt").read_text()
    before = docker("run", "--rm", "--entrypoint", "cat", release_image, "/etc/ssl/certs/ca-certificates.crt").stdout
    new = [line for line in host.splitlines() if len(line) == 64 and line not in before]
    if not new:
        pytest.skip("this machine's CA bundle holds nothing Debian's does not")
    out = builder(
        "build",
        "--no-sbom",
        "--release",
        "21.08",
        "--tag",
        scratch_tag,
        "--ca-bundle",
        "/etc/ssl/certs/ca-certificates.crt",
        "--bake-ca",
        "--compile-cache",
        compile_cache,
        "-q",
    )
    assert out.returncode == 0, out.stderr
    bundle = docker("run", "--rm", "--entrypoint", "cat", scratch_tag, "/etc/ssl/certs/ca-certificates.crt")
    assert new[0] in bundle.stdout


def test_bake_ca_without_a_bundle_is_refused():
    out = builder("build", "--no-sbom", "--release", "21.08", "--bake-ca")
    assert out.returncode == 2 and "--bake-ca needs at least one --ca-bundle" in out.stderr


def test_credentials_on_the_command_line_are_refused():
    out = builder(
        "derive",
        "--no-sbom",
        "--from",
        "x:y",
        "--apt",
        "jq",
        "--tag",
        "a/b:c",
        "--pip-index",
        f"https://itest:{TOKEN}@pypi.invalid/simple",
    )
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "--pip-index-credentials-file" in out.stderr and TOKEN not in out.stderr


def test_settings_server_answers_containers_only(release_image, tmp_path, monkeypatch):
    """The settings server gives a build container (host network, like a RUN step) its
    settings and a host process 403; a container with a wrong token gets nothing."""
    import urllib.error
    import urllib.request

    from builder.core import paths
    from builder.engine import settings_server
    from builder.engine.buildsettings import BuildSettings

    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    wrapper = paths.templates_dir() / "with-build-settings"
    pip = f"https://itest:{TOKEN}@pypi.invalid/simple"

    def in_container(url):
        return docker(
            "run",
            "--rm",
            "--network",
            "host",
            "-v",
            f"{wrapper}:/w:ro",
            "-e",
            f"BUILD_SETTINGS={url}",
            "--entrypoint",
            "bash",
            release_image,
            "/w",
            "bash",
            "-c",
            'printf "%s" "$PIP_INDEX_URL"',
        )

    with settings_server.serve_settings(BuildSettings(pip_index=pip)) as url:
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(url + "/pip-index", timeout=10)
        assert exc.value.code == 403
        out = in_container(url)
        assert out.returncode == 0 and out.stdout == pip, out.stderr
        wrong = in_container(url[:-8] + "00000000")
        assert wrong.returncode != 0 and TOKEN not in wrong.stdout + wrong.stderr

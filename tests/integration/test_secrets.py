"""Corporate settings reach the build but never the image: not a layer, not the config,
not the history; the CA and the pip credentials not even the build log."""
import io
import json
import os
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from .conftest import builder, docker

TOKEN = f"S3CRET-{uuid.uuid4().hex}"
MIRROR = "http://deb.debian.org:80/debian"   # the real archive, spelled so it can be recognised


@pytest.fixture(scope="module")
def test_ca(tmp_path_factory):
    d = tmp_path_factory.mktemp("ca")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", f"/CN=itest-corp-ca-{uuid.uuid4().hex[:8]}", "-keyout", str(d / "ca.key"),
                    "-out", str(d / "ca.pem")], check=True, capture_output=True)
    pem = (d / "ca.pem").read_text()
    marker = pem.splitlines()[5]  # a line of the certificate body, unique to this CA
    return d / "ca.pem", marker


def image_meta(ref: str) -> dict:
    return json.loads(docker("image", "inspect", ref).stdout)[0]


def new_layers(image: str, base: str) -> list[str]:
    """The layers IMAGE adds on top of BASE (diff ids, bottom first)."""
    ours, theirs = image_meta(image)["RootFS"]["Layers"], image_meta(base)["RootFS"]["Layers"]
    assert ours[:len(theirs)] == theirs, f"{image} is not built on {base}"
    return ours[len(theirs):]


def layer_files_on_disk(image: str, count: int):
    """(path, bytes) of each entry in the top COUNT layers, read from overlay2's layer
    directories: the layers as the engine stores them, without `docker save` writing the
    whole 5.6 GB image (100 s here). None when the engine does not use overlay2."""
    driver = image_meta(image)["GraphDriver"]
    dirs = [driver["Data"].get("UpperDir", "")] + driver["Data"].get("LowerDir", "").split(":")
    if driver["Name"] != "overlay2" or not all(Path(d).is_dir() for d in dirs[:count]):
        return None

    def walk():
        for top in dirs[:count]:
            for path in sorted(Path(top).rglob("*")):
                rel = str(path.relative_to(top))
                data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
                yield top, rel.encode() + data
    return walk()


def layer_files_saved(image: str, wanted: list[str], tmp: Path):
    """The same from `docker save` (any storage driver)."""
    tar_path = tmp / "image.tar"
    subprocess.run(["docker", "save", "-o", str(tar_path), image], check=True)
    try:
        with tarfile.open(tar_path) as outer:
            manifest = json.load(outer.extractfile("manifest.json"))[0]
            diff_ids = json.loads(outer.extractfile(manifest["Config"]).read())["rootfs"]["diff_ids"]
            for layer_path, diff_id in zip(manifest["Layers"], diff_ids):
                if diff_id not in wanted:
                    continue
                with tarfile.open(fileobj=io.BytesIO(outer.extractfile(layer_path).read())) as layer:
                    for member in layer.getmembers():
                        data = member.name.encode()
                        if member.isfile():
                            data += layer.extractfile(member).read()
                        yield diff_id[:19], data
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


def test_settings_are_used_but_not_kept(release_image, test_ca, scratch_tag, tmp_path, cache_dir):
    """A derived image that installs a Debian package through the settings (the release
    build's own RUN steps use the same with-build-settings wrapper)."""
    ca, marker = test_ca
    # The pip credentials come from the environment (argv would show them in `ps`).
    # --no-cache: settings are not part of BuildKit's cache keys, so a cached step would not show them used
    out = builder("derive", "--from", release_image, "--apt", "jq", "--tag", scratch_tag, "--no-test", "--no-cache",
                  "--apt-mirror", MIRROR, "--pip-index", "https://pypi.invalid/simple",
                  "--pip-index-credentials-env", "ITEST_PIP_CREDS", "--ca-bundle", str(ca), "-q",
                  env={**os.environ, "ITEST_PIP_CREDS": f"itest:{TOKEN}"})
    assert out.returncode == 0, out.stderr
    log = (cache_dir / "logs" / f"derive-{scratch_tag.replace('/', '_').replace(':', '_')}.log").read_text()
    assert "deb.debian.org:80" in log, "the apt mirror from the settings was not used"
    assert TOKEN not in log and marker not in log
    # jq's dpkg record is in the derived layers: the scan sees what a layer holds.
    found = scan(scratch_tag, release_image, ["Package: jq\n", TOKEN, marker, "deb.debian.org:80", "pypi.invalid"],
                 tmp_path)
    assert [f for f in found if f.endswith("Package: jq\n")], "the scan did not see the derived layers"
    assert [f for f in found if not f.endswith("Package: jq\n")] == []


def test_bake_ca_puts_the_ca_in_the_trust_store(release_image, scratch_tag, compile_cache):
    """--bake-ca with the host's bundle (the settings every test build uses, so only the
    steps after the compile run again): a certificate the image did not trust before is
    in its trust store afterwards."""
    host = Path("/etc/ssl/certs/ca-certificates.crt").read_text()
    before = docker("run", "--rm", "--entrypoint", "cat", release_image, "/etc/ssl/certs/ca-certificates.crt").stdout
    new = [line for line in host.splitlines() if len(line) == 64 and line not in before]
    if not new:
        pytest.skip("this machine's CA bundle holds nothing Debian's does not")
    out = builder("build", "--release", "21.08", "--tag", scratch_tag, "--ca-bundle", "/etc/ssl/certs/ca-certificates.crt",
                  "--bake-ca", "--compile-cache", compile_cache, "-q")
    assert out.returncode == 0, out.stderr
    bundle = docker("run", "--rm", "--entrypoint", "cat", scratch_tag, "/etc/ssl/certs/ca-certificates.crt")
    assert new[0] in bundle.stdout


def test_bake_ca_without_a_bundle_is_refused():
    out = builder("build", "--release", "21.08", "--bake-ca")
    assert out.returncode == 2 and "--bake-ca needs at least one --ca-bundle" in out.stderr


def test_credentials_on_the_command_line_are_refused():
    out = builder("derive", "--from", "x:y", "--apt", "jq", "--tag", "a/b:c",
                  "--pip-index", f"https://itest:{TOKEN}@pypi.invalid/simple")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "--pip-index-credentials-file" in out.stderr and TOKEN not in out.stderr


def test_settings_server_answers_containers_only(release_image, tmp_path, monkeypatch):
    """The settings server gives a build container (host network, like a RUN step) its
    settings and a host process 403; a container with a wrong token gets nothing."""
    import urllib.error
    import urllib.request

    from builder import buildsettings, paths
    from builder.buildsettings import BuildSettings

    monkeypatch.setenv("BUILDER_CACHE_DIR", str(tmp_path / "cache"))
    wrapper = paths.templates_dir() / "with-build-settings"
    pip = f"https://itest:{TOKEN}@pypi.invalid/simple"

    def in_container(url):
        return docker("run", "--rm", "--network", "host", "-v", f"{wrapper}:/w:ro", "-e", f"BUILD_SETTINGS={url}",
                      "--entrypoint", "bash", release_image, "/w", "bash", "-c", 'printf "%s" "$PIP_INDEX_URL"')

    with buildsettings.serve(BuildSettings(pip_index=pip)) as url:
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(url + "/pip-index", timeout=10)
        assert exc.value.code == 403
        out = in_container(url)
        assert out.returncode == 0 and out.stdout == pip, out.stderr
        wrong = in_container(url[:-8] + "00000000")
        assert wrong.returncode != 0 and TOKEN not in wrong.stdout + wrong.stderr

"""An image archive read from the tar (builder/engine/image_archive.py), and a load that tries a
sound archive once more when the engine refuses it (buildx.load)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from builder.core.errors import BuildError
from builder.engine import buildx, image_archive

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def write_archive(
    path: Path,
    layers: int = 2,
    diff_ids: int | None = None,
    drop: tuple[str, ...] = (),
    nested: bool = False,
    last_type: str = "application/vnd.oci.image.layer.v1.tar+gzip",
) -> Path:
    """An OCI layout tar as buildx's docker exporter writes one: LAYERS layer blobs (the last
    of media type LAST_TYPE), a config with DIFF_IDS diff ids (LAYERS unless given), blobs of
    the kinds in DROP left out."""
    blobs: dict[str, bytes] = {}

    def add(data: bytes) -> dict:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": digest, "size": len(data)}

    layer_descs = [
        {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **add(f"layer {i}".encode())}
        for i in range(layers)
    ]
    if layer_descs:
        layer_descs[-1]["mediaType"] = last_type
    config = {
        "rootfs": {
            "type": "layers",
            "diff_ids": [f"sha256:{i:064x}" for i in range(layers if diff_ids is None else diff_ids)],
        }
    }
    config_desc = {"mediaType": "application/vnd.oci.image.config.v1+json", **add(json.dumps(config).encode())}
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config_desc, "layers": layer_descs}
    top = {"mediaType": OCI_MANIFEST, **add(json.dumps(manifest).encode())}
    if nested:
        top = {"mediaType": OCI_INDEX, **add(json.dumps({"schemaVersion": 2, "manifests": [top]}).encode())}
    dropped = {"layer": [d["digest"] for d in layer_descs], "config": [config_desc["digest"]]}
    files = {"index.json": json.dumps({"schemaVersion": 2, "manifests": [top]}).encode(), "oci-layout": b"{}"}
    files.update(
        {
            "blobs/" + d.replace(":", "/"): data
            for d, data in blobs.items()
            if not any(d in dropped[kind] for kind in drop)
        }
    )
    with tarfile.open(path, "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_sound_archive_has_no_problems(tmp_path):
    assert image_archive.problems(write_archive(tmp_path / "a.tar")) == []
    assert image_archive.problems(write_archive(tmp_path / "b.tar", nested=True)) == []


def test_a_manifest_and_config_that_disagree_are_named(tmp_path):
    found = image_archive.problems(write_archive(tmp_path / "a.tar", layers=3, diff_ids=2))
    assert len(found) == 1 and "lists 3 layers, its config 2 diff_ids" in found[0]


def test_a_layer_type_the_engine_does_not_unpack_is_named(tmp_path):
    # what BuildKit wrote into a gzip image that reused a zstd blob (reproduced on Docker 26:
    # its `docker load` refused the archive, "mismatched image rootfs and manifest layers")
    found = image_archive.problems(
        write_archive(tmp_path / "a.tar", layers=3, last_type="application/vnd.docker.image.rootfs.diff.tar.zstd")
    )
    assert len(found) == 1 and "1 of its 3 layers are application/vnd.docker.image.rootfs.diff.tar.zstd" in found[0]
    for fine in (
        "application/vnd.oci.image.layer.v1.tar+zstd",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        "application/vnd.docker.image.rootfs.diff.tar",
        "application/vnd.oci.image.layer.v1.tar+gzip+encrypted",
    ):
        assert image_archive.problems(write_archive(tmp_path / "b.tar", last_type=fine)) == [], fine


def test_missing_blobs_are_named(tmp_path):
    assert (
        "1 of its 1 layers are not in the archive"
        in image_archive.problems(write_archive(tmp_path / "a.tar", layers=1, drop=("layer",)))[0]
    )
    assert "its config" in image_archive.problems(write_archive(tmp_path / "b.tar", drop=("config",)))[0]


def test_what_is_not_an_image_archive_is_said_in_one_line(tmp_path):
    (tmp_path / "junk.tar").write_bytes(b"not a tar")
    assert image_archive.problems(tmp_path / "junk.tar")[0].startswith("not a readable image archive")
    with tarfile.open(tmp_path / "empty.tar", "w"):
        pass
    assert "index.json is missing" in image_archive.problems(tmp_path / "empty.tar")[0]


# `docker load` that refuses the first N calls (counted in a file), then loads
FAKE_DOCKER = r"""#!/bin/sh
n=$(cat "$COUNT" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > "$COUNT"
if [ "$n" -le "$REFUSE" ]; then
  echo "Error response from daemon: failed to unpack loaded image: mismatched image rootfs and manifest layers" >&2
  exit 1
fi
echo "Loaded image ID: sha256:feed"
"""


@pytest.fixture
def fake_docker(tmp_path, monkeypatch):
    where = tmp_path / "bin"
    where.mkdir()
    (where / "docker").write_text(FAKE_DOCKER)
    (where / "docker").chmod(0o755)
    count = tmp_path / "count"
    monkeypatch.setenv("PATH", f"{where}:/usr/bin:/bin")
    monkeypatch.setenv("COUNT", str(count))
    return lambda refuse: (monkeypatch.setenv("REFUSE", str(refuse)), count.unlink(missing_ok=True))


def calls(tmp_path) -> int:
    return int((tmp_path / "count").read_text())


def test_a_sound_archive_the_engine_refuses_once_is_loaded_on_the_second_try(tmp_path, fake_docker):
    fake_docker(1)
    assert buildx.load(write_archive(tmp_path / "a.tar"), None) == "sha256:feed"
    assert calls(tmp_path) == 2


def test_a_sound_archive_refused_twice_fails_saying_the_archive_is_sound(tmp_path, fake_docker):
    fake_docker(5)
    with pytest.raises(
        BuildError,
        match=r"mismatched image rootfs and manifest layers \(2 tries; the archive "
        r"itself is sound\)",
    ) as err:
        buildx.load(write_archive(tmp_path / "a.tar"), None)
    assert err.value.step == "load" and calls(tmp_path) == 2


def test_an_unsound_archive_is_not_tried_again_and_its_fault_is_named(tmp_path, fake_docker):
    fake_docker(5)
    with pytest.raises(BuildError, match=r"\(the archive: manifest sha256:\w+ lists 3 layers, its config 1 diff_ids\)"):
        buildx.load(write_archive(tmp_path / "a.tar", layers=3, diff_ids=1), None)
    assert calls(tmp_path) == 1

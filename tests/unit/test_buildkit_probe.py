"""The pure parts of `builder doctor`'s BuildKit probe: the CLI's reason for a refusal, the
image store from `docker info`, and the bake file with a target context."""

from pathlib import Path

from builder.cli import doctor
from builder.engine import buildkit_probe


def test_the_error_line_is_the_reason():
    stderr = (
        '#0 building with "default" instance using docker driver\n\n'
        "ERROR: Cache export is not supported for the docker driver.\n"
        "Switch to a different driver, or turn on the containerd image store, and try again.\n"
    )
    assert buildkit_probe._why(stderr) == "Cache export is not supported for the docker driver."


def test_without_an_error_line_the_last_line_is_the_reason():
    assert buildkit_probe._why("a\n\nunknown flag: --cache-to\n  \n") == "unknown flag: --cache-to"
    assert buildkit_probe._why("") == "failed without a message"


def test_image_store_from_docker_info():
    containerd = {"Driver": "overlayfs", "DriverStatus": [["driver-type", "io.containerd.snapshotter.v1"]]}
    classic = {"Driver": "overlay2", "DriverStatus": [["Backing Filesystem", "extfs"], ["Supports d_type", "true"]]}
    assert doctor.image_store(containerd) == "containerd (overlayfs snapshotter)"
    assert doctor.image_store(classic) == "classic (overlay2 graph driver)"
    assert doctor.image_store({}) == "classic (? graph driver)"
    assert doctor.image_store({"DriverStatus": None}) == "classic (? graph driver)"


def test_bake_file_builds_app_from_the_base_target(tmp_path: Path):
    bake = buildkit_probe.bake_file(tmp_path)["target"]
    assert bake["app"]["contexts"] == {"base": "target:base"}
    # Both write into the probe's directory only, never into the engine's image store.
    for target in bake.values():
        assert target["context"] == str(tmp_path)
        assert all(o.startswith("type=tar,dest=" + str(tmp_path)) for o in target["output"])

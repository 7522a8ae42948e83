"""--compression: gzip (the default, every client) or zstd (every layer, forced) from the
option to buildx's output, in single builds, bakes and archives from another builder; the
refusals; and what a push reads back from the registry's manifest."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from builder import catalog
from builder import registry as reg
from builder.core.errors import UserError
from builder.engine import BuildRequest, DockerEngine, buildsettings, buildx
from builder.engine.buildkit_engine import to_archives
from builder.image import bake
from builder.render import RenderOptions, render
from builder.render.base_recipe import BaseRecipe


def test_every_layer_is_forced_into_the_compression_asked_for():
    # gzip forced too: unforced, a cached step keeps a zstd blob an earlier zstd build gave
    # it, under Docker's `rootfs.diff.tar.zstd`, which Docker's engine does not unpack
    assert buildx.output() == "type=docker,compression=gzip,force-compression=true"
    assert buildx.output(Path("/t/i.tar")) == "type=docker,dest=/t/i.tar,compression=gzip,force-compression=true"
    # and zstd: BuildKit otherwise keeps the gzip blobs a layer already has (the base's, cached steps')
    assert buildx.output(None, "zstd") == "type=docker,compression=zstd,force-compression=true,oci-mediatypes=true"
    req = buildx.BuildxRequest(Path("/ctx"), builder="e2", output_file=Path("/t/i.tar"), compression="zstd")
    cmd = buildx.argv(req, Path("/m.json"))
    assert cmd[cmd.index("--output") + 1] == (
        "type=docker,dest=/t/i.tar,compression=zstd,force-compression=true,oci-mediatypes=true"
    )
    assert cmd.count("--output") == 1


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_every_target_of_a_bake_and_its_archive_keep_the_compression(compression, tmp_path):
    release = catalog.load().get("21.08")
    rendered = [
        render(
            release,
            release.variant("tf2-py3"),
            RenderOptions(base="offline", offline_base_image=BaseRecipe(release.offline).tag),
        )
    ]
    run = bake.RunInputs(compression=compression)
    definition = bake.definition(release, rendered, bake.Layout(tmp_path), "b1", run)
    outputs = {name: t["output"] for name, t in definition["target"].items()}
    assert len(outputs) >= 2  # the variants and the base
    assert set(map(tuple, outputs.values())) == {(buildx.output(None, compression),)}
    archived = to_archives(definition, Path("/arch"))["target"]
    for name, target in archived.items():
        spec = target["output"][0].split(",")
        assert f"dest=/arch/{name}.tar" in spec and spec[0] == "type=docker"
        assert ("compression=zstd" in spec) == (compression == "zstd")


def test_an_unknown_compression_is_refused_in_one_line():
    with pytest.raises(UserError) as err:
        buildsettings.from_options(None, None, [], compression="lz4")
    assert str(err.value) == "--compression 'lz4': use one of gzip, zstd"
    assert buildsettings.from_options(None, None, [], compression="zstd").compression == "zstd"
    assert buildsettings.from_options(None, None, []).compression == "gzip"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "builder.cli",
            "derive",
            "--from",
            "x",
            "--tag",
            "y:1",
            "--apt",
            "jq",
            "--compression",
            "xz",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--compression 'xz'" in out.stderr, out.stderr


def test_the_legacy_builder_refuses_zstd_before_building(tmp_path):
    engine = DockerEngine.__new__(DockerEngine)  # no engine is reached: the refusal comes first
    with pytest.raises(UserError, match="--compression zstd needs the BuildKit backend"):
        engine.build(BuildRequest(context=tmp_path, compression="zstd"))


@pytest.mark.parametrize("command", ["build", "base", "derive"])
def test_every_building_command_takes_the_option(command):
    out = subprocess.run(
        [sys.executable, "-m", "builder.cli", command, "--help"],
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert "--compression" in out.stdout, out.stdout + out.stderr


DOCKER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"
OCI = "application/vnd.oci.image.layer.v1.tar"


@pytest.mark.parametrize(
    "types, counts",
    [
        ([DOCKER_GZIP] * 3, {"gzip": 3}),
        ([f"{OCI}+zstd"] * 2 + [f"{OCI}+gzip"], {"zstd": 2, "gzip": 1}),
        ([OCI, f"{OCI}+zstd"], {"uncompressed": 1, "zstd": 1}),
        ([], {}),
    ],
)
def test_a_manifests_layers_are_counted_by_compression(types, counts):
    manifest = json.dumps({"schemaVersion": 2, "layers": [{"mediaType": t, "size": 1} for t in types]}).encode()
    assert reg.layer_compression(manifest) == counts


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not json",
        b"[]",
        json.dumps({"manifests": [{"digest": "x"}]}).encode(),
        json.dumps({"layers": ["x", 3, {"mediaType": 5}, {"size": 1}]}).encode(),
    ],
)
def test_an_index_or_a_broken_body_names_no_compression(body):
    assert reg.layer_compression(body) == {}

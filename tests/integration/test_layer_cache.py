"""`builder build --all` through one bake, and --layer-cache: BuildKit's layer cache in a
registry (Debian's docker-registry on loopback). The release's variants are baked on this
engine, writing every step's layers to the registry under the variant's tag; a second
engine, which has never built anything (a machine with a wiped build cache), then bakes
the same release from that cache: every step comes from the registry, none runs, and the
image has the same layers as the first engine's.

The bake is given the run's compile cache, which listens on docker0's address (reached
over the default network, as by the session's release image): its steps share their cache
keys with the release image's, so it compiles nothing and holds no second copy of its
layers. Every build below gets the same --compile-cache, as a CI runner would.

The second engine keeps its images in containerd, in the host's network namespace with a
bridge of its own and no route out (tests/integration/engines.py): if a step did run, it
could not download anything, so the rebuild could not pass by building again."""

import json
import os
import re
import uuid

import pytest

from builder import catalog
from builder.engine.progress import ProgressMode
from builder.render.base_recipe import BaseRecipe
from tests import two_variants

from .conftest import BUILD_ID, builder, docker
from .engines import second_engine
from .registries import ANONYMOUS_TOKENS, Registry, api, running

CACHE_TAG = "21.08-tf2-py3"


@pytest.fixture(scope="module")
def cache_registry(tmp_path_factory):
    with running(tmp_path_factory.mktemp("layer-cache"), token=ANONYMOUS_TOKENS) as reg:  # token mode
        yield reg


def registry_json(reg: Registry, path: str, accept: str = "application/json") -> dict:
    with api(reg, path, f"repository:{path.split('/')[0]}:pull", accept) as r:
        return json.load(r)


BAKED = "itest/baked"


@pytest.fixture(scope="module")
def written_cache(release_image, cache_registry, compile_cache):
    """`builder build --all` of 21.08 with --layer-cache (the base exists: the bake takes it
    from the image store): the registry then holds the cache; returns (repository, tag)."""
    repo = f"{cache_registry.host}/tf-cache"
    out = builder(
        "build",
        "--no-sbom",
        "--release",
        "21.08",
        "--all",
        "--repo",
        BAKED,
        "--build-id",
        BUILD_ID,
        "--layer-cache",
        repo,
        "--compile-cache",
        compile_cache,
        "-q",
    )
    assert out.returncode == 0, out.stderr
    assert "--all: one bake of 1 variant(s)" in out.stderr, out.stderr
    assert out.stdout.split() == [f"{BAKED}:21.08-tf2-py3", f"{BAKED}:21.08-tf2-py3-{BUILD_ID}"]
    yield repo, out.stdout.split()[0]
    for ref in out.stdout.split():
        docker("rmi", ref)


def test_the_baked_image_is_checked_and_labelled_like_a_single_build(written_cache, release_image):
    from .conftest import labels

    _, tag = written_cache
    baked, single = labels(tag), labels(release_image)
    # what the read-back measured in the image: the same release, the same compiled parts
    measured = [
        "dev.tfbuilder.framework-version",
        "dev.tfbuilder.coverage",
        "dev.tfbuilder.horovod",
        "dev.tfbuilder.extension",
        "dev.tfbuilder.cudnn",
        "dev.tfbuilder.nccl",
        "dev.tfbuilder.python",
    ]
    assert {k: baked.get(k) for k in measured} == {k: single[k] for k in measured}
    assert baked["org.opencontainers.image.created"] != single["org.opencontainers.image.created"]
    # the same Dockerfile steps: the images differ only where the compile did
    assert len(layers(tag)) == len(layers(release_image))


def layers(ref: str, env=None) -> list[str]:
    out = docker("image", "inspect", "--format", "{{json .RootFS.Layers}}", ref, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_cache_holds_every_steps_layers_under_the_images_tag(written_cache, cache_registry):
    assert CACHE_TAG in registry_json(cache_registry, "tf-cache/tags/list")["tags"]
    index = registry_json(
        cache_registry,
        f"tf-cache/manifests/{CACHE_TAG}",
        "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json",
    )
    entries = index.get("manifests") or index.get("layers") or []
    config = [m for m in entries if m["mediaType"] == "application/vnd.buildkit.cacheconfig.v0"]
    blobs = [m for m in entries if "layer" in m["mediaType"]]
    assert len(config) == 1, index
    # mode=max: at least one blob per layer of the image (its base's included)
    assert len(blobs) >= len(layers(written_cache[1])), (len(blobs), index)


def test_another_engine_bakes_the_release_from_the_registry_cache_and_builds_for_this_one(
    written_cache, cache_registry, offline_base, cache_dir, tmp_path, compile_cache, monkeypatch
):
    repo, tag = written_cache
    base_in_registry = f"{cache_registry.host}/base/{offline_base.split('/', 1)[1]}"
    assert docker("tag", offline_base, base_in_registry).returncode == 0
    pushed = docker("push", "-q", base_in_registry)  # the base, as a team's registry would hold it
    assert pushed.returncode == 0, pushed.stderr
    with second_engine({"features": {"containerd-snapshotter": True}}, in_host_netns=True) as env:
        assert docker("images", "-q", env=env).stdout.strip() == "", "the second engine is not empty"
        for args in (("pull", "-q", base_in_registry), ("tag", base_in_registry, offline_base)):
            out = docker(*args, env=env)
            assert out.returncode == 0, out.stderr
        # the same options (--repo too: the docker-examples name the image), as a CI runner has
        out = builder(
            "build",
            "--no-sbom",
            "--release",
            "21.08",
            "--all",
            "--repo",
            BAKED,
            "--build-id",
            BUILD_ID,
            "--layer-cache",
            repo,
            "--compile-cache",
            compile_cache,
            "-q",
            env=env,
        )
        assert out.returncode == 0, out.stderr
        log = (cache_dir / "logs" / f"21.08-all-{BUILD_ID}.log").read_text()
        runs = set(re.findall(r"^#builder-step (\d+)/\d+ at [\d.]+s: RUN ", log, re.M))
        cached = set(re.findall(r"^#builder-cached (\d+)/\d+: ", log, re.M))
        assert runs and runs <= cached, f"steps that ran on the second engine: {sorted(runs - cached)}"
        assert layers(tag, env=env) == layers(tag)

        # --builder: this engine's build runs on the second one (a Docker context, which
        # buildx knows as a builder). The contexts live in a Docker config of the test's own.
        here = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
        here["DOCKER_CONFIG"] = str(tmp_path / "docker-config")
        made = docker("context", "create", "tfb-e2", "--docker", f"host={env['DOCKER_HOST']}", env=here)
        assert made.returncode == 0, made.stderr
        build_on_the_other_engine(env, here, tmp_path, monkeypatch)
        spread_over_both_engines(env, here, repo, offline_base, cache_dir, tmp_path, compile_cache)
        unknown = builder("build", "--no-sbom", "--release", "21.08", "--builder", "no-such-builder", env=here)
        assert unknown.returncode == 2 and unknown.stderr.startswith("error: --builder no-such-builder: ")


def build_on_the_other_engine(e2_env: dict, here: dict, tmp_path, monkeypatch) -> None:
    """One build (the engine's single-image path, which `build --builder` and `derive
    --builder` take) on tfb-e2: the image it starts FROM, which only this engine has, is
    copied there first; the image comes back here. A small image on the base's root file
    system: a release through --builder takes the same path and loads 8 GB back here."""
    from builder.engine import BuildRequest
    from builder.engine.buildkit_engine import BuildKitEngine

    rootfs = BaseRecipe.for_release(catalog.load().get("21.08")).rootfs_image  # left by the base build
    assert docker("image", "inspect", rootfs).returncode == 0, f"{rootfs}: the base build keeps it"
    assert docker("image", "inspect", rootfs, env=e2_env).returncode != 0
    nonce = uuid.uuid4().hex
    context = tmp_path / "small"
    context.mkdir()
    (context / "Dockerfile").write_text(f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}}\nRUN echo {nonce} > /marker\n")
    monkeypatch.setenv("DOCKER_CONFIG", here["DOCKER_CONFIG"])
    log = tmp_path / "small.log"
    result = BuildKitEngine().build(
        BuildRequest(context, {"BASE_IMAGE": rootfs}, log_path=log, progress=ProgressMode.QUIET, builder="tfb-e2")
    )
    try:
        assert re.search(r"^#builder-note built by tfb-e2/", log.read_text(), re.M), log.read_text()[-2000:]
        assert docker("image", "inspect", rootfs, env=e2_env).returncode == 0  # copied there first
        shown = docker("run", "--rm", "--entrypoint", "cat", result.image_id, "/marker")
        assert shown.stdout.strip() == nonce, shown.stderr
        assert layers(result.image_id)[:-1] == layers(rootfs)
    finally:
        docker("rmi", result.image_id)


def ran_runs(log: str) -> list[str]:
    """The RUN steps of a bake log that ran (came from no cache): their first two words."""
    runs = dict(re.findall(r"^#builder-step (\d+)/\d+ at [\d.]+s: RUN (\S+ \S+)", log, re.M))
    cached = set(re.findall(r"^#builder-cached (\d+)/\d+: ", log, re.M))
    return [cmd for n, cmd in sorted(runs.items(), key=lambda kv: int(kv[0])) if n not in cached]


def spread_over_both_engines(
    e2_env: dict, here: dict, repo: str, offline_base: str, cache_dir, tmp_path, compile_cache: str
) -> None:
    """--builders tfb-e2,default: a release with two variants (a private catalog: the
    shipped releases have one buildable variant each) baked at once, one variant on each
    engine. The second engine has lost the base's name, so the builder copies the base
    there first; each image comes back here, is read back, labelled and tagged here."""
    assert docker("rmi", offline_base, env=e2_env).returncode == 0
    spread_env = {**here, "BUILDER_CATALOG": str(two_variants.write(tmp_path / "catalog"))}
    bid = f"{BUILD_ID}-sp"
    out = builder(
        "build",
        "--no-sbom",
        "--release",
        "21.08",
        "--all",
        "--builders",
        "tfb-e2,default",
        "--repo",
        "itest/spread",
        "--build-id",
        bid,
        "--layer-cache",
        repo,
        "--compile-cache",
        compile_cache,
        "-q",
        env=spread_env,
    )
    refs = out.stdout.split()
    try:
        assert out.returncode == 0, out.stderr
        assert refs == [f"itest/spread:21.08-tf2-py3{s}" for s in ("", f"-{bid}", "-amp", f"-amp-{bid}")]
        assert "--all: 2 variant(s) spread over 2 builders, one bake each" in out.stderr
        assert f"copying {offline_base} to tfb-e2 (docker save | docker load)" in out.stderr, out.stderr
        # buildx's own metadata says where each bake ran
        for where, target in (("tfb-e2", "21-08-tf2-py3"), ("default", "21-08-tf2-py3-amp")):
            log = (cache_dir / "logs" / f"21.08-all-{bid}-on-{where}.log").read_text()
            assert re.search(rf"^#builder-note {target} built by {where}/", log, re.M), log[-2000:]
            assert not re.search(r"^#builder-note \S+ built by (?!" + where + "/)", log, re.M)
            if where == "tfb-e2":  # no network there: it compiled nothing, its RUN steps came from caches
                assert ran_runs(log) == ["chmod 0755"], ran_runs(log)
        assert docker("image", "inspect", offline_base, env=e2_env).returncode == 0
        # each image holds what its variant says (read back here, not copied from the request)
        envs = {ref: docker("image", "inspect", "--format", "{{json .Config.Env}}", ref).stdout for ref in refs[::2]}
        assert '"TF_ENABLE_AUTO_MIXED_PRECISION=1"' in envs["itest/spread:21.08-tf2-py3-amp"]
        assert "TF_ENABLE_AUTO_MIXED_PRECISION=1" not in envs["itest/spread:21.08-tf2-py3"]
        from .conftest import labels

        for ref in refs[::2]:
            assert labels(ref)["dev.tfbuilder.framework-version"] == "2.5.0"
    finally:
        for ref in refs:
            docker("rmi", ref)

"""The BuildKit probe (`builder doctor`, builder/engine/buildkit_probe.py) on the real engine leaves
no image in the user's store: buildx's docker driver loads a bake target that another
target uses as its context, and the probe removes exactly that."""

from builder.engine import buildkit_probe

from .conftest import docker


def probe_images() -> list[str]:
    out = docker("image", "ls", "--all", "--quiet", "--no-trunc", "--filter", "label=dev.tfbuilder.probe")
    assert out.returncode == 0, out.stderr
    return sorted(set(out.stdout.split()))


def test_the_probe_leaves_no_image_labelled_dev_tfbuilder_probe():
    before = probe_images()
    features = buildkit_probe.probe()
    assert any(f.name == "bake contexts" and f.works for f in features), features  # the case that loads one
    assert probe_images() == before

"""One engine interface: DockerEngine and the tests' FakeEngine implement exactly the
methods of builder.engine.Engine (its roles: ImageStore, Runs, Builds, Pushes), with the
same signatures, so they cannot drift apart. No daemon: only the classes are compared."""

import inspect

import pytest

from builder import engine as eng
from builder.engine import DockerEngine, Engine
from tests.unit.fake_engine import SETUP_METHODS, FakeEngine


def public_methods(cls) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(cls).items()
        if callable(member) and not name.startswith("_")
    }


ROLES = (eng.ImageStore, eng.Runs, eng.Builds, eng.Pushes)
INTERFACE = {name: sig for cls in (Engine, *ROLES) for name, sig in public_methods(cls).items()}


def test_the_interface_is_what_the_builder_uses():
    assert {
        "build",
        "bake",
        "tag",
        "remove_image",
        "run_capture",
        "remove_container",
        "inspect",
        "image_id",
        "image_labels",
        "images",
        "push",
        "login",
        "pull",
        "import_rootfs",
        "ping",
        "version",
    } == set(INTERFACE)


def test_each_method_belongs_to_one_role():
    """A fake or a backend implements what its callers need: the roles do not overlap."""
    owners = [name for cls in ROLES for name in public_methods(cls)]
    assert len(owners) == len(set(owners))
    assert set(public_methods(Engine)) == {"ping", "version"} and set(ROLES) <= set(Engine.__mro__)


@pytest.mark.parametrize("cls,extra", [(DockerEngine, set()), (FakeEngine, SETUP_METHODS)])
def test_engines_implement_exactly_the_interface(cls, extra):
    methods = public_methods(cls)
    assert set(methods) - extra == set(INTERFACE), "a method outside the Engine Protocol, or one missing"
    for name, signature in INTERFACE.items():
        assert methods[name] == signature, f"{cls.__name__}.{name}{methods[name]} is not Engine.{name}{signature}"
    assert (
        "where" in eng.ImageStore.__annotations__
        and "backend" in eng.Builds.__annotations__
        and isinstance(getattr(cls, "where", ""), str)
    )


def test_the_fake_records_calls_and_keeps_tags_apart_from_images():
    engine = FakeEngine()
    first = engine.add_image("local/img:1", labels={"k": "v"})
    engine.tag(first, "local/img:latest")
    assert engine.image_id("local/img") == first and engine.image_labels("local/img:1") == {"k": "v"}
    engine.remove_image("local/img:latest")
    assert engine.image_id("local/img") is None and engine.image_id("local/img:1") == first
    assert [s.id for s in engine.images(repository="local/img")] == [first]
    assert engine.images(label="k=other") == [] and [s.id for s in engine.images(label="k")] == [first]
    assert engine.names() == [
        "tag",
        "image_id",
        "image_labels",
        "remove_image",
        "image_id",
        "image_id",
        "images",
        "images",
        "images",
    ]

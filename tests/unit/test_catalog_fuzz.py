"""Property: whatever the catalog files hold, loading ends in a valid catalog or a
CatalogError of located problems; the command line prints them and exits 2, never a traceback."""

import copy

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builder import catalog
from builder.catalog import lock, policy
from builder.cli import main as cli
from builder.core.errors import CatalogError

from .conftest import GOOD

GOOD_DATA = yaml.safe_load(GOOD)
# The same release with every wheel key: the upstream package, its Pythons and pins, the GPU
# wheels and Horovod, so mutations reach their validation too.
WHEEL_DATA = copy.deepcopy(GOOD_DATA)
WHEEL_DATA["variants"]["tf2-py3"]["framework"].update(
    package="tensorflow", pythons=["3.10", "3.11"], pins=["numpy==1.26.4", "protobuf==4.24.4"]
)
WHEEL_DATA["gpu_wheels"] = {"cudnn": "nvidia-cudnn-cu11==8.7.0.84", "nccl": "nvidia-nccl-cu11==2.16.5"}
WHEEL_DATA["horovod"] = {"version": "0.28.1", "requires": ["cloudpickle", "cffi>=1.4.0"]}
# A release that declares Horovod absent, with its reason (26.11's form).
ABSENT_DATA = copy.deepcopy(WHEEL_DATA)
ABSENT_DATA["horovod"] = "absent: 0.28.1 does not build against TensorFlow 2.21"

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 100),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(
        [
            "7.0",
            "9.9",
            "all",
            "_common",
            "30.01",
            "local",
            "3.9",
            "numpy==1.19.5",
            "numpy==",
            "tensorflow",
            "numpy==1.19.5\n",
            "a==1 --hash=x",
            "absent: why",
            "absent:",
            "absent: ",
            "absent:\n",
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))


ALL_PATHS = [p for p in _paths(WHEEL_DATA) if p]


@st.composite
def mutated_release(draw):
    data = copy.deepcopy(draw(st.sampled_from([GOOD_DATA, WHEEL_DATA, ABSENT_DATA])))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(ALL_PATHS))
        node = data
        for key in path[:-1]:
            if not isinstance(node, dict):
                break
            node = node.setdefault(key, {})
        if isinstance(node, dict):
            node[path[-1]] = draw(values)
    return yaml.safe_dump(data)


raw_text = st.one_of(
    st.text(max_size=200),
    st.builds(lambda a, b: GOOD[:a] + b + GOOD[a:], st.integers(0, len(GOOD)), st.text(max_size=10)),
)


def _check(make_catalog, capsys, text):
    directory = make_catalog({"30.01.yaml": text})
    try:
        cat = catalog.load(directory)
    except CatalogError as exc:
        assert exc.problems and all(p.file and p.message for p in exc.problems)
    else:
        for release in cat.releases.values():  # what loads is what the lock functions can use
            for v in release.variants.values():
                assert all(catalog.PIN.fullmatch(p) for p in v.pins)
                policy.pythons_for(release, v)
                if policy.why_not_buildable(release, v) is None:
                    lock.requirements(release, v)
    import os

    os.environ["BUILDER_CATALOG"] = str(directory)
    try:
        code = cli.main(["releases"])
    finally:
        del os.environ["BUILDER_CATALOG"]
    err = capsys.readouterr().err
    assert code in (0, 2)
    assert "Traceback" not in err and "internal error" not in err


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=mutated_release())
def test_mutated_releases_never_crash(make_catalog, capsys, text):
    _check(make_catalog, capsys, text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=raw_text)
def test_malformed_yaml_never_crashes(make_catalog, capsys, text):
    _check(make_catalog, capsys, text)

"""Loading, inheritance and validation of the release catalog (builder/catalog.py)."""
import pytest

from builder import catalog
from builder.errors import CatalogError

from .conftest import GOOD


@pytest.fixture(scope="module")
def real():
    return catalog.load()


def test_the_shipped_catalog_is_valid_and_ordered(real):
    assert list(real.releases) == ["21.06", "21.08", "21.10", "22.12", "23.03", "26.11"]


def test_release_21_08_matches_the_reference_facts(real):
    r = real.get("21.08")
    assert (r.os_distro, r.os_version, r.python, r.cuda) == ("ubuntu", "20.04", "3.8", "11.4.1")
    assert r.components == {"cublas": "11.5.4", "cudnn": "8.2.2.26", "nccl": "2.10.3", "tensorrt": "8.0.1.6"}
    assert r.cuda_cc == ["5.2", "6.0", "6.1", "7.0", "7.5", "8.0", "8.6"]
    assert r.toggles == {"xla": True, "gcp": False, "hdfs": False}
    assert {v: (r.variants[v].tag, r.variants[v].framework_version) for v in r.variants} == {
        "tf1-py3": ("21.08-tf1-py3", "1.15.5"), "tf2-py3": ("21.08-tf2-py3", "2.5.0")}
    assert r.offline.debian == "bullseye" and r.offline.cuda == "11.2" and r.offline.python == "3.9"
    assert r.upstream_image == "nvcr.io/nvidia/cuda:11.4.1-cudnn8-devel-ubuntu20.04"


def test_guide_section_7_env_defaults_with_documented_values(real):
    env = real.get("21.08").env
    assert {k: env[k] for k in ("TF_ADJUST_HUE_FUSED", "TF_ADJUST_SATURATION_FUSED",
                                "TF_ENABLE_WINOGRAD_NONFUSED", "TF_AUTOTUNE_THRESHOLD",
                                "CUDA_DEVICE_MAX_CONNECTIONS", "TF_DISABLE_NVTX_RANGES")} == {
        "TF_ADJUST_HUE_FUSED": "1", "TF_ADJUST_SATURATION_FUSED": "1", "TF_ENABLE_WINOGRAD_NONFUSED": "1",
        "TF_AUTOTUNE_THRESHOLD": "2", "CUDA_DEVICE_MAX_CONNECTIONS": "12", "TF_DISABLE_NVTX_RANGES": "0"}


def test_children_state_only_differences(real):
    # 21.10 names only tf2 but inherits tf1 from 21.08; 26.11 drops tf1 with null.
    assert real.get("21.10").variants["tf1-py3"].framework_version == "1.15.5"
    assert real.get("21.10").variants["tf2-py3"].framework_version == "2.6.0"
    assert list(real.get("26.11").variants) == ["tf2-py3"]
    assert real.get("22.12").components == {}
    assert real.get("22.12").offline.debian == "bookworm"
    assert real.get("26.11").env["TF_AUTOTUNE_THRESHOLD"] == "2"   # from _common, three levels up


def test_abstract_releases_are_not_listed(real):
    assert "_common" not in real.releases


def test_merge_semantics():
    assert catalog.merge({"a": {"x": 1, "y": 2}, "l": [1]}, {"a": {"y": None, "z": 3}, "l": [2]}) == \
        {"a": {"x": 1, "z": 3}, "l": [2]}


def _problems(make_catalog, files):
    with pytest.raises(CatalogError) as exc:
        catalog.load(make_catalog(files))
    return [str(p) for p in exc.value.problems]


def test_a_good_minimal_release_loads(make_catalog):
    cat = catalog.load(make_catalog({"30.01.yaml": GOOD}))
    assert cat.get("30.01").variants["tf2-py3"].tag == "30.01-tf2-py3"


@pytest.mark.parametrize("old,new,expected", [
    ('parent: _common', 'parent: "19.99"', "30.01.yaml: parent: unknown parent '19.99'"),
    ('["7.0", "8.0"]', '["7.0", "9.9"]',
     "30.01.yaml: build.cuda_compute_capabilities: compute capability 9.9 is not a GPU architecture for CUDA 11.8.0"),
    ('cuda: "11.8.0"', 'cuda: "13.0"',
     "30.01.yaml: build.cuda_compute_capabilities: compute capability 7.0 cannot be compiled for CUDA 13.0; "
     "supported: 7.5-12.1"),
    ('build:\n', 'build:\n  xla: "yes"\n', "30.01.yaml: build.xla: must be a boolean (true or false), got 'yes'"),
    ('variants:', 'env: {"1BAD": "x"}\nvariants:', "30.01.yaml: env.1BAD: '1BAD' is not a valid environment variable name"),
    ('python: "3.10"\n', '', "30.01.yaml: python: missing required field"),
    ('framework: {version: "2.14.1"}', 'framework: {api: 2}', "30.01.yaml: variants.tf2-py3.framework.version: missing required field"),
    ('build:\n', 'build:\n  ccs: [1]\n', "30.01.yaml: build.ccs: unknown key"),
    ('offline: {debian: bookworm', 'offline: {debian: buster', "30.01.yaml: base.offline.debian: unknown Debian suite 'buster'"),
    ('{version: "2.14.1"}', '{version: "2.14.1", api: 3}', "30.01.yaml: variants.tf2-py3.framework.api: must be 1 or 2, got 3"),
])
def test_each_problem_is_reported_with_file_and_key(make_catalog, old, new, expected):
    assert old in GOOD
    problems = _problems(make_catalog, {"30.01.yaml": GOOD.replace(old, new, 1)})
    assert any(p.startswith(expected) for p in problems), problems


def test_compute_capability_checked_against_the_offline_toolkit_too(make_catalog):
    text = GOOD.replace('["7.0", "8.0"]', '["7.0", "8.9"]').replace(
        'offline: {debian: bookworm, cuda: "11.8"', 'offline: {debian: bullseye, cuda: "11.2"')
    problems = _problems(make_catalog, {"30.01.yaml": text})
    assert problems == ["30.01.yaml: build.cuda_compute_capabilities: compute capability 8.9 cannot be compiled "
                        "for CUDA 11.2; supported: 3.5-8.6 (3.5, 3.7, 5.0, 5.2, 5.3, 6.0, 6.1, 6.2, 7.0, 7.2, 7.5, "
                        "8.0, 8.6) (from base.offline.cuda)"]


def test_every_problem_of_every_file_is_reported_at_once(make_catalog):
    bad1 = GOOD.replace('build:\n', 'build:\n  gcp: 1\n').replace('python: "3.10"\n', '')
    bad2 = GOOD.replace('"30.01"', '"30.02"').replace("parent: _common", "parent: nope")
    problems = _problems(make_catalog, {"30.01.yaml": bad1, "30.02.yaml": bad2})
    assert len(problems) == 3, problems
    assert {p.split(":")[0] for p in problems} == {"30.01.yaml", "30.02.yaml"}


def test_duplicate_tag_and_duplicate_release(make_catalog):
    dup_tag = GOOD.replace('"30.01"', '"30.02"').replace(
        'framework: {version: "2.14.1"}', 'framework: {version: "2.14.1"}\n    tag: "30.01-tf2-py3"')
    problems = _problems(make_catalog, {"30.01.yaml": GOOD, "30.02.yaml": dup_tag})
    assert problems == ["30.02.yaml: variants.tf2-py3.tag: duplicate tag local/tensorflow:30.01-tf2-py3 (also 30.01/tf2-py3)"]
    problems = _problems(make_catalog, {"30.01.yaml": GOOD, "other.yaml": GOOD})
    assert problems == ["other.yaml: release: release '30.01' is already defined in 30.01.yaml"]


def test_inheritance_cycle(make_catalog):
    a = GOOD.replace("parent: _common", 'parent: "30.02"')
    b = 'release: "30.02"\nparent: "30.01"\n'
    problems = _problems(make_catalog, {"30.01.yaml": a, "30.02.yaml": b})
    assert any("inheritance cycle" in p for p in problems)


def test_unquoted_release_name_is_caught(make_catalog):
    problems = _problems(make_catalog, {"30.01.yaml": GOOD.replace('release: "30.01"', "release: 30.10")})
    assert problems == ['30.01.yaml: release: write the release name as a quoted string, e.g. "30.1"']


def test_malformed_yaml_names_file_and_line(make_catalog):
    problems = _problems(make_catalog, {"30.01.yaml": GOOD.replace("python: \"3.10\"", "python: [3.10")})
    assert len(problems) == 1 and problems[0].startswith("30.01.yaml: line ") and "malformed YAML" in problems[0]

"""Loading, inheritance and validation of the release catalog (builder/catalog/__init__.py)."""

import dataclasses

import pytest

from builder import catalog, components
from builder.core.errors import CatalogError

from .conftest import GOOD


@pytest.fixture(scope="module")
def real():
    return catalog.load()


def test_the_shipped_catalog_is_valid_and_ordered(real):
    assert list(real.releases) == ["21.06", "21.08", "21.10", "22.12", "23.03", "26.11"]


def test_release_21_08_matches_the_reference_facts(real):
    r = real.get("21.08")
    assert (r.os_distro, r.os_version, r.python, r.cuda) == ("ubuntu", "20.04", "3.8", "11.4.1")
    assert r.stack_versions == {"cublas": "11.5.4", "cudnn": "8.2.2.26", "nccl": "2.10.3", "tensorrt": "8.0.1.6"}
    assert r.cuda_cc == ["5.2", "6.0", "6.1", "7.0", "7.5", "8.0", "8.6"]
    assert r.toggles == {"xla": True, "gcp": False, "hdfs": False}
    assert {v: (r.variants[v].tag, r.variants[v].framework_version) for v in r.variants} == {
        "tf1-py3": ("21.08-tf1-py3", "1.15.5"),
        "tf2-py3": ("21.08-tf2-py3", "2.5.0"),
    }
    assert r.offline.debian == "bullseye" and r.offline.cuda == "11.2" and r.offline.python == "3.9"
    assert r.upstream_image == "nvcr.io/nvidia/cuda:11.4.1-cudnn8-devel-ubuntu20.04"


def test_guide_section_7_env_defaults_with_documented_values(real):
    env = real.get("21.08").env
    assert {
        k: env[k]
        for k in (
            "TF_ADJUST_HUE_FUSED",
            "TF_ADJUST_SATURATION_FUSED",
            "TF_ENABLE_WINOGRAD_NONFUSED",
            "TF_AUTOTUNE_THRESHOLD",
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "TF_DISABLE_NVTX_RANGES",
        )
    } == {
        "TF_ADJUST_HUE_FUSED": "1",
        "TF_ADJUST_SATURATION_FUSED": "1",
        "TF_ENABLE_WINOGRAD_NONFUSED": "1",
        "TF_AUTOTUNE_THRESHOLD": "2",
        "CUDA_DEVICE_MAX_CONNECTIONS": "12",
        "TF_DISABLE_NVTX_RANGES": "0",
    }


def test_children_state_only_differences(real):
    # 21.10 names only tf2 but inherits tf1 from 21.08; 26.11 drops tf1 with null.
    assert real.get("21.10").variants["tf1-py3"].framework_version == "1.15.5"
    assert real.get("21.10").variants["tf2-py3"].framework_version == "2.6.5"
    assert list(real.get("26.11").variants) == ["tf2-py3"]
    assert real.get("22.12").stack_versions == {}
    assert real.get("26.11").env["TF_AUTOTUNE_THRESHOLD"] == "2"  # from _common, three levels up
    # 21.08 inherits 21.06's wheel data; 21.10 changes Horovod's version and keeps its requires.
    assert real.get("21.08").variants["tf2-py3"].pins == real.get("21.06").variants["tf2-py3"].pins
    hvd = real.get("21.10").components["horovod"]
    assert (hvd.version, hvd.requires) == ("0.23.0", ["cloudpickle", "psutil", "pyyaml", "cffi"])


def test_upstream_wheels_of_the_shipped_releases(real):
    wheels = {
        (r.name, v.name): (v.package, v.framework_version, v.pythons)
        for r in real.releases.values()
        for v in r.variants.values()
    }
    tf1 = ("tensorflow", "1.15.5", ("3.5", "3.6", "3.7"))
    assert wheels == {
        ("21.06", "tf1-py3"): tf1,
        ("21.08", "tf1-py3"): tf1,
        ("21.10", "tf1-py3"): tf1,
        ("22.12", "tf1-py3"): tf1,
        ("23.03", "tf1-py3"): tf1,
        ("21.06", "tf2-py3"): ("tensorflow", "2.5.0", ("3.6", "3.7", "3.8", "3.9")),
        ("21.08", "tf2-py3"): ("tensorflow", "2.5.0", ("3.6", "3.7", "3.8", "3.9")),
        ("21.10", "tf2-py3"): ("tensorflow", "2.6.5", ("3.7", "3.8", "3.9")),
        ("22.12", "tf2-py3"): ("tensorflow", "2.10.1", ("3.7", "3.8", "3.9", "3.10")),
        ("23.03", "tf2-py3"): ("tensorflow", "2.11.0", ("3.7", "3.8", "3.9", "3.10")),
        ("26.11", "tf2-py3"): ("tensorflow", "2.21.0", ("3.10", "3.11", "3.12", "3.13")),
    }
    assert {r.name: r.components["horovod"].version for r in real.releases.values() if "horovod" in r.components} == {
        "21.06": "0.22.1",
        "21.08": "0.22.1",
        "21.10": "0.23.0",
        "22.12": "0.26.1",
        "23.03": "0.26.1",
        "26.11": "0.28.1",  # built against TensorFlow 2.21 by the patches for 0.28.1
    }
    assert [r.name for r in real.releases.values() if "horovod" in r.components_absent] == []
    assert real.get("21.08").gpu_wheels == {"cudnn": "nvidia-cudnn-cu11==8.5.0.96", "nccl": "nvidia-nccl-cu11==2.13.4"}
    # TensorFlow 2.21's CUDA 12 wheels, every one pinned exactly (its and-cuda extra has lower bounds only)
    cu12 = real.get("26.11").gpu_wheels
    assert cu12["cudnn"] == "nvidia-cudnn-cu12==9.28.0.42" and cu12["nccl"] == "nvidia-nccl-cu12==2.32.3"
    assert {"cublas", "cuda_runtime", "cuda_nvcc", "cufft", "curand", "cusolver", "cusparse", "nvjitlink"} <= set(cu12)
    assert all(w.startswith("nvidia-") and "-cu12==" in w for w in cu12.values())
    pins = real.get("21.08").variants["tf2-py3"].pins
    for pin in (
        "numpy==1.19.5",
        "protobuf==3.20.3",
        "h5py==3.1.0",
        "grpcio==1.34.1",
        "six==1.15.0",
        "typing-extensions==3.7.4.3",
        "wrapt==1.12.1",
        "flatbuffers==1.12",
        "gast==0.4.0",
        "absl-py==0.15.0",
        "keras-nightly==2.5.0.dev2021032900",
        "tensorflow-estimator==2.5.0",
    ):
        assert pin in pins
    # TensorBoard is a tool (TensorFlow 2.5 requires it); 26.11 installs it though TF 2.21 does not
    assert real.get("21.08").components["tensorboard"].requirement.startswith("tensorboard==2.11.")
    r2611 = real.get("26.11").components
    assert (r2611["jupyter"].requirement, r2611["tensorboard"].requirement) == (
        "jupyterlab==4.6.6",
        "tensorboard==2.21.0",
    )
    # JupyterLab of the era on 21.x: 3.0 (3.6 and 4.x need typing-extensions 4 at run time)
    r2108 = real.get("21.08").components["jupyter"]
    assert (r2108.requirement, r2108.pins) == ("jupyterlab==3.0.16", ["jsonschema<4.18"])
    assert "jupyter" not in real.get("21.08").components_absent
    assert real.get("21.08").components["dali"].wheel == "nvidia-dali-cuda110==1.34.0"
    assert real.get("26.11").components["dali"].plugin == "nvidia-dali-tf-plugin-cuda120"
    # the docker-examples' defaults: an apt package and one built on the release's TensorFlow
    assert real.get("21.08").example_packages == (("jq",), ("tensorflow-addons==0.13.0",))
    assert real.get("26.11").example_packages == (("jq",), ("tensorflow-hub==0.16.1",))


def test_tools_are_components_a_requirement_null_or_absent_with_a_reason(tmp_path):
    from builder.catalog import load
    from builder.core.errors import CatalogError

    def catalog(extra: str):
        (tmp_path / "r.yaml").write_text(
            "release: '30.01'\nrepository: local/t\nos: {distro: debian, version: '13'}\npython: '3.13'\ncuda: '12.4.1'\n"
            "base: {upstream: {image: 'x/cuda:12'}, offline: {debian: trixie, cuda: '12.4', python: '3.13'}}\n"
            "build: {cuda_compute_capabilities: ['9.0'], xla: true, gcp: false, hdfs: false}\n"
            "entrypoint: {title: T, upstream_copyright: U, shm_recommend: S}\nvendor: {name: V}\n"
            "variants: {tf2-py3: {framework: {name: TensorFlow, version: '2.21.0', api: 2}}}\n" + extra
        )
        return load(tmp_path)

    rel = catalog("jupyter: {requirement: 'jupyterlab>=4,<5'}\ntensorboard: null\ndali: 'absent: no wheel here'\n").get(
        "30.01"
    )
    assert rel.components["jupyter"].requirement == "jupyterlab>=4,<5" and "tensorboard" not in rel.components
    assert rel.components_absent == {"dali": "no wheel here"}
    assert components.get("jupyter").distribution(rel.components["jupyter"]) == "jupyterlab"
    for bad, says in (
        ("jupyter: {requirement: 'jupyterlab=='}", "jupyter.requirement: 'jupyterlab==' is not a pip requirement"),
        ("jupyter: {requirement: 'jupyter lab'}", "is not a pip requirement"),
        ("jupyter: 'jupyterlab==4.6.6'", 'give {requirement, pins}, null, or "absent: WHY"'),
        ("tools: {jupyter: 'jupyterlab==4.6.6'}", "tools: moved to each tool's own key"),
    ):
        with pytest.raises(CatalogError) as err:
            catalog(bad + "\n")
        assert says in str(err.value), str(err.value)


def test_releases_without_cp311_wheels_keep_an_offline_python_they_can_install(real):
    # TF 2.10/2.11 have no cp311 wheel: 22.12 and 23.03 stay on Debian 11 (Python 3.9, CUDA 11.2),
    # whose toolkit stops at 8.6, so 23.03 carries no 9.0.
    for name in ("22.12", "23.03"):
        r = real.get(name)
        assert (r.offline.debian, r.offline.cuda, r.offline.python) == ("bullseye", "11.2", "3.9")
        assert r.offline.python in r.variants["tf2-py3"].pythons
    assert "9.0" not in real.get("23.03").cuda_cc
    r = real.get("26.11")  # Debian 13: CUDA 12.4 and Python 3.13, Hopper and Blackwell included
    assert (r.offline.debian, r.offline.cuda, r.offline.python) == ("trixie", "12.4", "3.13")
    assert (r.os_distro, r.os_version) == ("ubuntu", "22.04")  # `os` is the upstream image's
    # Blackwell by the cuda_nvcc wheel's ptxas (12.9), which the catalog check accepts
    assert {"9.0", "10.0", "12.0"} <= set(r.cuda_cc) and r.ptxas == "12.9"


def test_abstract_releases_are_not_listed(real):
    assert "_common" not in real.releases


def test_merge_semantics():
    assert catalog.merge({"a": {"x": 1, "y": 2}, "l": [1]}, {"a": {"y": None, "z": 3}, "l": [2]}) == {
        "a": {"x": 1, "z": 3},
        "l": [2],
    }


def _problems(make_catalog, files):
    with pytest.raises(CatalogError) as exc:
        catalog.load(make_catalog(files))
    return [str(p) for p in exc.value.problems]


def test_a_good_minimal_release_loads(make_catalog):
    cat = catalog.load(make_catalog({"30.01.yaml": GOOD}))
    assert cat.get("30.01").variants["tf2-py3"].tag == "30.01-tf2-py3"
    # The wheel keys are optional: no package, no Pythons, no pins, no GPU wheels, no Horovod.
    v = cat.get("30.01").variants["tf2-py3"]
    assert (v.package, v.pythons, v.pins) == (None, (), ())
    assert (cat.get("30.01").gpu_wheels, cat.get("30.01").components.get("horovod")) == ({}, None)


WHEELS = GOOD.replace(
    'framework: {version: "2.14.1"}',
    """framework:
      version: "2.14.1"
      package: tensorflow
      pythons: ["3.11", "3.10"]
      pins: ["numpy==1.26.4", "protobuf==4.24.4"]
gpu_wheels: {cudnn: "nvidia-cudnn-cu11==8.7.0.84", nccl: "nvidia-nccl-cu11==2.16.5"}
horovod: {version: "0.28.1", requires: [cloudpickle, "cffi>=1.4.0"]}""",
)


def test_wheel_keys_load_into_tuples_and_specs(make_catalog):
    r = catalog.load(make_catalog({"30.01.yaml": WHEELS})).get("30.01")
    v = r.variants["tf2-py3"]
    assert (v.package, v.pythons, v.pins) == ("tensorflow", ("3.10", "3.11"), ("numpy==1.26.4", "protobuf==4.24.4"))
    assert r.gpu_wheels == {"cudnn": "nvidia-cudnn-cu11==8.7.0.84", "nccl": "nvidia-nccl-cu11==2.16.5"}
    hvd = r.components["horovod"]
    assert (hvd.version, hvd.requires) == ("0.28.1", ["cloudpickle", "cffi>=1.4.0"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.pins = ()  # type: ignore[misc]  # frozen
    child = 'release: "30.02"\nparent: "30.01"\nhorovod: null\n'
    assert (
        catalog.load(make_catalog({"30.01.yaml": WHEELS, "30.02.yaml": child})).get("30.02").components.get("horovod")
        is None
    )
    # a child that says why it has none replaces the parent's Horovod and keeps the reason
    absent = 'release: "30.03"\nparent: "30.01"\nhorovod: "absent: 0.28.1 does not build against TF 9"\n'
    r = catalog.load(make_catalog({"30.01.yaml": WHEELS, "30.03.yaml": absent})).get("30.03")
    assert (r.components.get("horovod"), r.components_absent["horovod"]) == (None, "0.28.1 does not build against TF 9")
    assert "horovod: 'absent: 0.28.1 does not build against TF 9'\n" in r.spec_text()  # one line in `builder show`


@pytest.mark.parametrize(
    "old,new,expected",
    [
        ('"numpy==1.26.4"', '"numpy>=1.26"', "variants.tf2-py3.framework.pins[0]: 'numpy>=1.26' is not an exact pin"),
        (
            '"numpy==1.26.4"',
            '"numpy==1.26.4\\n"',
            "variants.tf2-py3.framework.pins[0]: 'numpy==1.26.4\\n' is not an exact pin",
        ),  # shown escaped: one line
        ('"numpy==1.26.4"', '"numpy==1.26.4 ; os_name"', "variants.tf2-py3.framework.pins[0]:"),
        ('"numpy==1.26.4"', '"numpy==1.26.4 --hash=sha256:00"', "variants.tf2-py3.framework.pins[0]:"),
        ('"numpy==1.26.4"', '"numpy==1.26.4; rm -rf /"', "variants.tf2-py3.framework.pins[0]:"),
        ('"numpy==1.26.4"', '"protobuf==4.24.3"', "variants.tf2-py3.framework.pins[1]: protobuf is pinned twice"),
        (
            '"numpy==1.26.4"',
            '"TensorFlow==2.14.1"',
            "variants.tf2-py3.framework.pins: TensorFlow is also named in variants.tf2-py3.framework.package",
        ),
        (
            'pins: ["numpy==1.26.4", "protobuf==4.24.4"]',
            'pins: "numpy==1.26.4"',
            "variants.tf2-py3.framework.pins: must be a list",
        ),
        (
            "package: tensorflow",
            'package: "tensor flow"',
            "variants.tf2-py3.framework.package: 'tensor flow' is not a PyPI distribution name",
        ),
        ("package: tensorflow", 'package: "tensorflow\\n"', "variants.tf2-py3.framework.package:"),
        ("      package: tensorflow\n", "", "variants.tf2-py3.framework.package: missing required field"),
        (
            'pythons: ["3.11", "3.10"]',
            "pythons: [3.11, 3.10]",
            'variants.tf2-py3.framework.pythons[0]: write it as a quoted string, e.g. "3.11"',
        ),
        (
            'pythons: ["3.11", "3.10"]',
            'pythons: ["3.11", "3"]',
            "variants.tf2-py3.framework.pythons[1]: '3' is not a Python version",
        ),
        (
            'pythons: ["3.11", "3.10"]',
            'pythons: ["3.11", "3.11"]',
            "variants.tf2-py3.framework.pythons[1]: Python 3.11 is listed twice",
        ),
        ('pythons: ["3.11", "3.10"]', "pythons: []", "variants.tf2-py3.framework.pythons: missing required field"),
        (
            'cudnn: "nvidia-cudnn-cu11==8.7.0.84"',
            'cudnn: "nvidia-cudnn-cu11>=8"',
            "gpu_wheels.cudnn: must be an exact pip requirement",
        ),
        ('cudnn: "nvidia-cudnn-cu11==8.7.0.84"', "cudnn: 8", "gpu_wheels.cudnn: must be an exact pip requirement"),
        (
            'cudnn: "nvidia-cudnn-cu11==8.7.0.84"',
            'CuDNN: "nvidia-cudnn-cu11==8.7.0.84"',
            "gpu_wheels.CuDNN: component names",
        ),
        (
            'cudnn: "nvidia-cudnn-cu11==8.7.0.84"',
            'cudnn: "numpy==1.26.4"',
            "gpu_wheels.cudnn: numpy is also named in variants.tf2-py3.framework.pins",
        ),
        ('version: "0.28.1", requires', "version: latest, requires", "horovod.version: 'latest' is not a version"),
        ('version: "0.28.1", requires', 'version: "x1", requires', "horovod.version: 'x1' is not a version"),
        (
            'requires: [cloudpickle, "cffi>=1.4.0"]',
            'requires: [cloudpickle, "cffi>=1.4.0; os_name"]',
            "horovod.requires[1]:",
        ),
        ('requires: [cloudpickle, "cffi>=1.4.0"]', "requires: cloudpickle", "horovod.requires: must be a list"),
        (', requires: [cloudpickle, "cffi>=1.4.0"]', "", "horovod.requires: missing required field"),
        ("horovod: {version", "horovod: {vers", "horovod.vers: unknown key"),
        (
            'horovod: {version: "0.28.1", requires: [cloudpickle, "cffi>=1.4.0"]}',
            "horovod: [0.28.1]",
            "horovod: must be a mapping",
        ),
        (
            'horovod: {version: "0.28.1", requires: [cloudpickle, "cffi>=1.4.0"]}',
            "horovod: absent",
            "horovod: 'absent': give",
        ),
        (
            'horovod: {version: "0.28.1", requires: [cloudpickle, "cffi>=1.4.0"]}',
            'horovod: "absent: "',
            "horovod: 'absent: ': give",
        ),
        (
            'horovod: {version: "0.28.1", requires: [cloudpickle, "cffi>=1.4.0"]}',
            'horovod: "absent: x\\ny"',
            "horovod: 'absent: x\\ny': give",
        ),
        ("gpu_wheels: {", "gpu_wheel: {", "gpu_wheel: unknown key"),
        (
            "package: tensorflow",
            'package: tensorflow\n      python: ["3.11"]',
            "variants.tf2-py3.framework.python: unknown key",
        ),
    ],
)
def test_each_wheel_key_problem_is_reported(make_catalog, old, new, expected):
    assert old in WHEELS
    text = WHEELS.replace(old, new, 1)
    problems = _problems(make_catalog, {"30.01.yaml": text})
    assert any(p.startswith(f"30.01.yaml: {expected}") for p in problems), problems


def test_whole_string_matches_refuse_a_trailing_newline(make_catalog):
    text = GOOD.replace("  tf2-py3:\n", '  "tf2-py3\\n":\n')
    problems = _problems(make_catalog, {"30.01.yaml": text})
    assert any("variant names are lower-case" in p for p in problems), problems


@pytest.mark.parametrize(
    "old,new,expected",
    [
        ("parent: _common", 'parent: "19.99"', "30.01.yaml: parent: unknown parent '19.99'"),
        (
            '["7.0", "8.0"]',
            '["7.0", "9.9"]',
            "30.01.yaml: build.cuda_compute_capabilities: compute capability 9.9 is not a GPU architecture for CUDA 11.8.0",
        ),
        (
            'cuda: "11.8.0"',
            'cuda: "13.0"',
            "30.01.yaml: build.cuda_compute_capabilities: compute capability 7.0 cannot be compiled for CUDA 13.0; "
            "supported: 7.5-12.1",
        ),
        ("build:\n", 'build:\n  xla: "yes"\n', "30.01.yaml: build.xla: must be a boolean (true or false), got 'yes'"),
        (
            "variants:",
            'env: {"1BAD": "x"}\nvariants:',
            "30.01.yaml: env.1BAD: '1BAD' is not a valid environment variable name",
        ),
        ('python: "3.10"\n', "", "30.01.yaml: python: missing required field"),
        (
            'framework: {version: "2.14.1"}',
            "framework: {api: 2}",
            "30.01.yaml: variants.tf2-py3.framework.version: missing required field",
        ),
        ("build:\n", "build:\n  ccs: [1]\n", "30.01.yaml: build.ccs: unknown key"),
        (
            "offline: {debian: bookworm",
            "offline: {debian: buster",
            "30.01.yaml: base.offline.debian: unknown Debian suite 'buster'",
        ),
        (
            '{version: "2.14.1"}',
            '{version: "2.14.1", api: 3}',
            "30.01.yaml: variants.tf2-py3.framework.api: must be 1 or 2, got 3",
        ),
        ('python: "3.10"', 'python: "3.10\\n"', "30.01.yaml: python: '3.10\\n' is not a Python version"),
        ('python: "3.11"}', 'python: "3"}', "30.01.yaml: base.offline.python: '3' is not a Python version"),
        (
            '{version: "2.14.1"}',
            '{version: "2.14.1-nv"}',
            "30.01.yaml: variants.tf2-py3.framework.version: '2.14.1-nv' is not a version",
        ),
    ],
)
def test_each_problem_is_reported_with_file_and_key(make_catalog, old, new, expected):
    assert old in GOOD
    problems = _problems(make_catalog, {"30.01.yaml": GOOD.replace(old, new, 1)})
    assert any(p.startswith(expected) for p in problems), problems


def test_compute_capability_checked_against_the_offline_toolkit_too(make_catalog):
    text = GOOD.replace('["7.0", "8.0"]', '["7.0", "8.9"]').replace(
        'offline: {debian: bookworm, cuda: "11.8"', 'offline: {debian: bullseye, cuda: "11.2"'
    )
    problems = _problems(make_catalog, {"30.01.yaml": text})
    assert problems == [
        "30.01.yaml: build.cuda_compute_capabilities: compute capability 8.9 cannot be compiled "
        "for CUDA 11.2; supported: 3.5-8.6 (3.5, 3.7, 5.0, 5.2, 5.3, 6.0, 6.1, 6.2, 7.0, 7.2, 7.5, "
        "8.0, 8.6); CUDA 11.8 or newer compiles 8.9 (from base.offline.cuda)"
    ]


def test_every_problem_of_every_file_is_reported_at_once(make_catalog):
    bad1 = GOOD.replace("build:\n", "build:\n  gcp: 1\n").replace('python: "3.10"\n', "")
    bad2 = GOOD.replace('"30.01"', '"30.02"').replace("parent: _common", "parent: nope")
    problems = _problems(make_catalog, {"30.01.yaml": bad1, "30.02.yaml": bad2})
    assert len(problems) == 3, problems
    assert {p.split(":")[0] for p in problems} == {"30.01.yaml", "30.02.yaml"}


def test_duplicate_tag_and_duplicate_release(make_catalog):
    dup_tag = GOOD.replace('"30.01"', '"30.02"').replace(
        'framework: {version: "2.14.1"}', 'framework: {version: "2.14.1"}\n    tag: "30.01-tf2-py3"'
    )
    problems = _problems(make_catalog, {"30.01.yaml": GOOD, "30.02.yaml": dup_tag})
    assert problems == [
        "30.02.yaml: variants.tf2-py3.tag: duplicate tag local/tensorflow:30.01-tf2-py3 (also 30.01/tf2-py3)"
    ]
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
    problems = _problems(make_catalog, {"30.01.yaml": GOOD.replace('python: "3.10"', "python: [3.10")})
    assert len(problems) == 1 and problems[0].startswith("30.01.yaml: line ") and "malformed YAML" in problems[0]


def _one_line_refusal(capsys, code):
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_a_fifo_in_the_catalog_is_one_line_not_a_hang(make_catalog):
    """Reading a fifo blocks until a writer comes: `builder releases` hung for ever."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    directory = make_catalog({"30.01.yaml": GOOD})
    os.mkfifo(directory / "pipe.yaml")
    result = subprocess.run(
        [sys.executable, "-m", "builder.cli", "releases"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "BUILDER_CATALOG": str(directory)},
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0] == f"error: catalog {directory}: pipe.yaml is a fifo, not a regular file"


def test_duplicate_keys_are_problems_naming_file_line_and_key(make_catalog):
    """YAML lets the last of two equal keys win: a second `release:` made 30.01.yaml another release."""
    twice = GOOD + 'release: "30.02"\n'
    nested = GOOD.replace('"30.01"', '"30.03"').replace('{version: "2.14.1"}', '{version: "2.14.1", version: "2.15.0"}')
    other = GOOD.replace('"30.01"', '"30.04"').replace("parent: _common", "parent: nope")
    problems = _problems(make_catalog, {"30.01.yaml": twice, "30.03.yaml": nested, "30.04.yaml": other})
    assert "30.01.yaml: release: line 15: duplicate key (first on line 1); give each key once" in problems, problems
    assert (
        "30.03.yaml: variants.tf2-py3.framework.version: line 14: duplicate key (first on line 14); give each key once"
    ) in problems, problems
    assert "30.04.yaml: parent: unknown parent 'nope'" in problems  # every problem at once
    assert len(problems) == 3, problems


def test_a_catalog_that_is_a_file_says_so(tmp_path, monkeypatch, capsys):
    from builder.cli import main as cli

    (tmp_path / "21.08.yaml").write_text(GOOD)
    monkeypatch.setenv("BUILDER_CATALOG", str(tmp_path / "21.08.yaml"))
    line = _one_line_refusal(capsys, cli.main(["releases"]))
    assert line == f"error: catalog {tmp_path / '21.08.yaml'} is a file, not a directory of release files"
    monkeypatch.setenv("BUILDER_CATALOG", str(tmp_path / "nowhere"))
    line = _one_line_refusal(capsys, cli.main(["releases"]))
    assert line == f"error: catalog directory {tmp_path / 'nowhere'} does not exist"


def test_an_empty_catalog_directory_is_refused(tmp_path, monkeypatch, capsys):
    from builder.cli import main as cli

    (tmp_path / "README").write_text("no releases here")
    monkeypatch.setenv("BUILDER_CATALOG", str(tmp_path))
    line = _one_line_refusal(capsys, cli.main(["releases"]))
    assert line == f"error: catalog directory {tmp_path} holds no release files (*.yaml)"


def test_the_ptxas_beside_nvcc_is_the_cuda_nvcc_wheels_version():
    assert catalog.ptxas_version("nvidia-cuda-nvcc-cu12==12.9.86") == "12.9"
    assert catalog.ptxas_version("nvidia-cuda-nvcc==13.0.48") == "13.0"
    assert catalog.ptxas_version(None) is None and catalog.ptxas_version("nvidia-cudnn-cu12==9.1.0") is None
    assert catalog.load().get("21.08").ptxas is None  # no newer ptxas: 12.0 there needs the opt-in


# --- vendor: who makes the image ------------------------------------------------------------
def test_the_shipped_catalog_names_no_nvidia_maker(real):
    """Done-when: no image shows NVIDIA's name as its maker by default."""
    for rel in real.releases.values():
        assert rel.vendor == catalog.Vendor("tf-image-builder"), rel.name
        assert not rel.vendor.is_nvidia
        assert "copyright_holder" not in rel.entrypoint


def test_vendor_merges_key_by_key_and_null_removes(make_catalog):
    child = GOOD + (
        'vendor: {name: ML Platform, maintainer: "ML Platform <mlp@example.com>", '
        'url: "https://git.example.com/ml/images", copyright_holder: Example Inc}\n'
    )
    grandchild = 'release: "30.02"\nparent: "30.01"\nvendor: {name: Team B, copyright_holder: null}\n'
    cat = catalog.load(make_catalog({"30.01.yaml": child, "30.02.yaml": grandchild}))
    assert cat.get("30.01").vendor == catalog.Vendor(
        "ML Platform", "ML Platform <mlp@example.com>", "https://git.example.com/ml/images", "Example Inc"
    )
    assert cat.get("30.02").vendor == catalog.Vendor(
        "Team B", "ML Platform <mlp@example.com>", "https://git.example.com/ml/images", None
    )


@pytest.mark.parametrize(
    "holder,nvidia",
    [
        ("NVIDIA CORPORATION", True),
        ("NVIDIA CORPORATION & AFFILIATES", True),
        ("nvidia corporation", True),
        ("Acme, on NVIDIA's recipe", False),
        ("NVIDIAN Ltd", False),
        (None, False),
    ],
)
def test_the_image_is_nvidias_only_by_its_copyright_holder(holder, nvidia):
    assert catalog.Vendor("x", copyright_holder=holder).is_nvidia is nvidia
    assert catalog.Vendor("NVIDIA").is_nvidia is False  # a name alone claims no copyright


@pytest.mark.parametrize(
    "vendor,expected",
    [
        ("vendor: null", "30.01.yaml: vendor: missing required field (who makes the image"),
        ("vendor: {name: null}", "30.01.yaml: vendor.name: missing required field (the maker's name"),
        ("vendor: ML Platform", "30.01.yaml: vendor: must be a mapping, got str"),
        (
            "vendor: {name: X, email: a@b}",
            "30.01.yaml: vendor.email: unknown key (allowed: copyright_holder, maintainer, name, url)",
        ),
        ("vendor: {name: 42}", None),  # an integer name is text like any other
        ("vendor: {name: [a]}", "30.01.yaml: vendor.name: must be a string, got list"),
        ('vendor: {name: " padded"}', "30.01.yaml: vendor.name: ' padded' is not one line of text"),
        ('vendor: {name: "a\\nb"}', "30.01.yaml: vendor.name: 'a\\nb' is not one line of text"),
        ('vendor: {name: "' + "x" * 201 + '"}', "30.01.yaml: vendor.name: "),
        ('vendor: {maintainer: "tab\\there"}', "30.01.yaml: vendor.maintainer: 'tab\\there' is not one line of text"),
        ("vendor: {url: git.example.com/ml}", "30.01.yaml: vendor.url: 'git.example.com/ml' is not an http(s) URL"),
        (
            'vendor: {url: "https://x.example/a b"}',
            "30.01.yaml: vendor.url: 'https://x.example/a b' is not an http(s) URL",
        ),
        ("vendor: {url: 'https://u:p@x.example/'}", "30.01.yaml: vendor.url: holds a user:password@"),
        ('vendor: {copyright_holder: ""}', "30.01.yaml: vendor.copyright_holder: '' is not one line of text"),
        (
            "labels: {org.opencontainers.image.vendor: Me}",
            "30.01.yaml: labels.org.opencontainers.image.vendor: set by vendor.name: give it there",
        ),
        ("labels: {maintainer: Me}", "30.01.yaml: labels.maintainer: set by vendor.maintainer (or vendor.name)"),
    ],
)
def test_each_vendor_problem_is_one_line_naming_the_field(make_catalog, vendor, expected):
    text = GOOD + vendor + "\n"
    if expected is None:
        assert catalog.load(make_catalog({"30.01.yaml": text})).get("30.01").vendor.name == "42"
        return
    problems = _problems(make_catalog, {"30.01.yaml": text})
    assert any(p.startswith(expected) for p in problems), problems
    assert all("\n" not in p for p in problems)


def test_a_variants_label_cannot_name_the_maker_either(make_catalog):
    text = GOOD.replace(
        'framework: {version: "2.14.1"}',
        'framework: {version: "2.14.1"}\n    labels: {org.opencontainers.image.authors: Me}',
    )
    assert _problems(make_catalog, {"30.01.yaml": text}) == [
        "30.01.yaml: variants.tf2-py3.labels.org.opencontainers.image.authors: set by vendor.maintainer: give it there"
    ]


def test_the_old_entrypoint_copyright_holder_says_where_it_moved(make_catalog):
    problems = _problems(make_catalog, {"30.01.yaml": GOOD + "entrypoint: {copyright_holder: NVIDIA CORPORATION}\n"})
    assert problems == [
        "30.01.yaml: entrypoint.copyright_holder: moved to vendor.copyright_holder "
        "(set it only for an image its holder builds; see _common.yaml)"
    ]
    assert "copyright_holder" not in catalog.ENTRYPOINT_KEYS
    assert catalog.VENDOR_KEYS == {"name", "maintainer", "url", "copyright_holder"}

"""The image contract (builder/core/contract.py): well-formed keys and paths, the one reference
parser, and the in-image copies (image_report.py) agreeing with it."""

import re
from pathlib import Path

import pytest

from builder.core import contract, grammar
from builder.core.contract import BuildInfo, InImage, Label
from builder.in_image import image_report
from builder.in_image.report_types import ImageReport

ROOT = Path(__file__).resolve().parents[2]


def test_label_keys_are_unique_and_well_formed():
    keys = contract.label_keys()
    assert len(set(keys.values())) == len(keys)
    for name, key in keys.items():
        assert grammar.LABEL_KEY.fullmatch(key), name
    ours = [k for k in keys.values() if k.startswith(contract.LABEL_PREFIX + ".")]
    assert Label.REQUESTED_FRAMEWORK in ours and Label.BASE_RECIPE in ours


def test_in_image_paths_can_be_pasted_into_a_dockerfile_and_a_shell():
    """Templates paste InImage paths unquoted: nothing a shell or Dockerfile treats specially."""
    for name, value in vars(InImage).items():
        if name.isupper() and isinstance(value, str):
            assert re.fullmatch(r"/[a-z0-9_./-]+", value), name
    assert contract.lock_file("3.8") == "/opt/tensorflow/locks/requirements-py3.8.txt"


@pytest.mark.parametrize(
    "ref, expected, name",
    [
        ("ubuntu", (None, "ubuntu", None, None), "ubuntu"),
        (
            "nvcr.io/nvidia/tensorflow:21.08-tf2-py3",
            ("nvcr.io", "nvidia/tensorflow", "21.08-tf2-py3", None),
            "nvcr.io/nvidia/tensorflow",
        ),
        (
            "localhost:5000/a/b:t@sha256:" + "a" * 64,
            ("localhost:5000", "a/b", "t", "sha256:" + "a" * 64),
            "localhost:5000/a/b",
        ),
        ("local/tensorflow:21.08", (None, "local/tensorflow", "21.08", None), "local/tensorflow"),
    ],
)
def test_parse_reference(ref, expected, name):
    parsed = contract.parse_reference(ref)
    assert tuple(parsed) == expected
    assert parsed.name == name


@pytest.mark.parametrize("ref", ["", "local/Upper", "a:b:c", "x@sha256:zz"])
def test_parse_reference_refuses_what_reference_problem_refuses(ref):
    with pytest.raises(ValueError):
        contract.parse_reference(ref)
    assert contract.reference_problem(ref)


def test_split_ref_is_lenient_and_defaults_to_latest():
    assert contract.split_ref("host:5000/a/b:tag") == ("host:5000/a/b", "tag")
    assert contract.split_ref("host:5000/a/b") == ("host:5000/a/b", "latest")
    assert contract.split_ref("sha256:" + "a" * 12) == ("sha256", "a" * 12)  # as the engine code always did


def test_the_reference_grammar_is_defined_once():
    """grammar.py re-exports; the pattern itself is written in contract.py only."""
    assert grammar.REFERENCE is contract.REFERENCE and grammar.reference_problem is contract.reference_problem
    defining = [p for p in (ROOT / "builder").rglob("*.py") if "DIGEST_PATTERN =" in p.read_text(encoding="utf-8")]
    assert defining == [ROOT / "builder" / "core" / "contract.py"]


def test_image_report_copies_agree_with_the_contract():
    assert image_report.BUILD_INFO == InImage.BUILD_INFO
    assert image_report.COMPONENTS == InImage.COMPONENTS
    assert InImage.IMAGE_REPORT.rsplit("/", 1)[1] == Path(image_report.__file__).name


def test_the_report_has_the_build_info_keys(monkeypatch):
    """image_report.report() with every probe stubbed: its top-level keys are the schema."""
    tf = {
        "version": "2.5.0",
        "path": "/nowhere",
        "build_info": {"cuda_version": "11.2", "cudnn_version": "8"},
        "tensorrt_linked": "",
    }
    monkeypatch.setattr(image_report, "tensorflow_report", lambda: tf)
    monkeypatch.setattr(
        image_report, "probe_library", lambda name, soname: {"soname": soname, "loaded": True, "version": "1.0"}
    )
    monkeypatch.setattr(image_report, "driver_libraries", lambda: [])
    monkeypatch.setattr(image_report, "filesystems", lambda: {})
    monkeypatch.setattr(image_report, "xla_report", lambda: {})
    monkeypatch.setattr(image_report, "extension_report", lambda: None)
    monkeypatch.setattr(image_report, "packages", lambda: {})
    monkeypatch.setattr(image_report, "components_report", lambda: {})
    monkeypatch.setattr(image_report, "cuda_binaries", lambda components: [])
    without = image_report.report(with_coverage=False)
    assert tuple(without) == BuildInfo.KEYS
    assert contract.build_info_problems(without) == []
    with_coverage = image_report.report(with_coverage=True, requested=["8.6"])
    assert set(with_coverage) == set(BuildInfo.KEYS) | set(BuildInfo.COVERAGE_KEYS)


def test_the_report_type_readers_are_checked_against_is_the_contract():
    """in_image/report_types.ImageReport, which mypy holds every reader's keys to, declares
    what the report writes (contract.BuildInfo) and the readers' own coverage_note, no more."""
    declared = set(ImageReport.__annotations__)
    assert declared == set(BuildInfo.KEYS) | set(BuildInfo.COVERAGE_KEYS) | {"coverage_note"}


def test_build_info_problems():
    assert contract.build_info_problems([]) == ["is a list, not an object"]
    assert contract.build_info_problems({"framework_name": "TensorFlow", "version": "2.5.0"}, full=False) == []
    problems = contract.build_info_problems({"framework_name": "TensorFlow"})
    assert "'version' is not a non-empty string" in problems and "'packages' is missing" in problems


def test_the_banner_reads_the_build_info_keys():
    """The banner reads build-info.json by the contract's path and keys."""
    text = (ROOT / "templates" / "entrypoint" / "entrypoint.d" / "10-banner.sh.j2").read_text(encoding="utf-8")
    assert "_info={{ image.BUILD_INFO }}" in text
    for key in BuildInfo.BANNER_KEYS:
        assert f'd["{key}"]' in text

"""The release catalog's schema, declared once: every key a release may hold, its type,
whether a resolved release needs it, what it means, its grammar and the rules across keys.

The loader validates each release, resolved through its parents, against `ReleaseDoc`
(builder/catalog/validate.py); `builder catalog schema` prints its JSON Schema and
builder/cli/reference.py writes docs/reference/catalog.md from that same schema. A field's
`examples` hold a value the loader accepts (tests build a catalog of them)."""

# mypy: disable-error-code="valid-type"
from __future__ import annotations

import re
from typing import Annotated, Any, Dict, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Tag, create_model, model_validator

from builder import components
from builder.catalog import rules
from builder.catalog.release import VENDOR_LABELS
from builder.core import contract, grammar
from builder.core.catalog_fields import (
    Absent,
    Boolean,
    Grammar,
    Missing,
    MovedTo,
    Part,
    StringList,
    StringMap,
    Text,
    field,
    matching,
    optional,
)
from builder.core.grammar import PACKAGE_NAME, PYTHON_VERSION, VERSION

DEBIAN_SUITES = {"bullseye": "11", "bookworm": "12", "trixie": "13"}
LABEL_KEY_WHAT = "a label key (reverse-DNS: lower-case letters and digits, '.' or '-' between them)"
ENV_VALUE = "a value an image can carry (no control characters)"
ONE_LINE = "one line of text (200 characters at most, no control characters)"
# The tags of a mapping-or-"absent: WHY" field (pydantic names the chosen one in an error's path).
SPEC, ABSENT = "<spec>", "<absent>"


PythonVersion = Grammar(PYTHON_VERSION, 'a Python version such as "3.9"')
Env = StringMap(grammar.ENV_NAME, "a valid environment variable name", grammar.CATALOG_TEXT, ENV_VALUE)
Labels = StringMap(
    grammar.LABEL_KEY,
    LABEL_KEY_WHAT,
    grammar.CATALOG_TEXT,
    "label text (no control characters)",
    reserved=VENDOR_LABELS,
)
OneLine = Grammar(grammar.ONE_LINE_TEXT, ONE_LINE)


class Os(Part):
    """The upstream base's operating system."""

    distro: Grammar(grammar.OS_DISTRO, "a distribution name such as ubuntu") = field(
        "Distribution name, e.g. ubuntu or debian.", "ubuntu"
    )
    version: Grammar(grammar.NUMERIC_VERSION, 'a version such as "20.04"') = field(
        'Its version, quoted, e.g. "20.04".', "20.04"
    )


class Upstream(Part):
    """NVIDIA's CUDA image, for builders that reach nvcr.io (`--base upstream`)."""

    image: Text(rules.upstream_image_problem) = field(
        "NAME:TAG of NVIDIA's CUDA base, e.g. nvcr.io/nvidia/cuda:11.4.1-cudnn8-devel-ubuntu20.04.",
        "nvcr.io/nvidia/cuda:11.4.1-cudnn8-devel-ubuntu20.04",
    )
    digest: Optional[Text(rules.digest_problem, contract.SHA256_DIGEST)] = optional(
        "sha256:<64 hex digits> pinning that image; give it when you have it.", "sha256:" + "0" * 64
    )


class Offline(Part):
    """The base built locally from Debian's archive (`--base auto` and `--base offline`):
    debootstrap plus Debian's CUDA toolkit."""

    debian: Text(rules.suite_problem(DEBIAN_SUITES)) = field(
        "Debian suite: bullseye (CUDA 11.2, Python 3.9), bookworm (CUDA 11.8, Python 3.11) or "
        "trixie (CUDA 12.4, Python 3.13).",
        "bullseye",
    )
    cuda: Grammar(grammar.NUMERIC_VERSION, 'a CUDA version such as "11.8"') = field(
        "The CUDA version of that suite's toolkit, quoted.", "11.2"
    )
    python: PythonVersion = field("That suite's Python, quoted.", "3.9")


class Base(Part):
    """The two bases an image can start from."""

    upstream: Upstream = field(Upstream.__doc__ or "")
    offline: Offline = field(" ".join((Offline.__doc__ or "").split()))


class Build(Part):
    """Build parameters (NGC user guide, section 6)."""

    cuda_compute_capabilities: Annotated[list, BeforeValidator(rules.capabilities)] = field(
        'Compute capabilities compiled by default, e.g. ["7.0", "8.0"]; each must compile with the '
        "release's CUDA and its offline base's CUDA (or a newer ptxas of the same major from "
        "gpu_wheels.cuda_nvcc). `--cuda-cc` overrides.",
        ["7.0", "8.0", "8.6"],
        json_schema_extra=rules.CC_SCHEMA,
    )
    xla: Boolean = field("TF_ENABLE_XLA: build the XLA path (`--xla/--no-xla`).", True)
    gcp: Boolean = field("TF_NEED_GCP: gs:// support (`--gcp/--no-gcp`).", False)
    hdfs: Boolean = field("TF_NEED_HDFS: hdfs:// support (`--hdfs/--no-hdfs`; refused: needs a Hadoop client).", False)
    nvbuildopts: Optional[
        StringList(
            "build flags",
            matching(grammar.NVBUILD_FLAG, "a build flag (one line, no leading '#' or surrounding spaces)"),
        )
    ] = optional(
        "Extra bazel flags for a TensorFlow tree, written to /opt/tensorflow/nvbuildopts.",
        ["-c", "opt", "--config=cuda"],
    )


class Entrypoint(Part):
    """The banner and checks the entrypoint prints."""

    title: OneLine = field("The banner's title, e.g. TensorFlow.", "TensorFlow")
    upstream_copyright: OneLine = field(
        "The upstream project's copyright line; {year} is replaced with the build year.",
        "Copyright 2017-{year} The TensorFlow Authors.  All rights reserved.",
    )
    shm_recommend: OneLine = field(
        "The docker run options the shared-memory note recommends.",
        "--shm-size=1g --ulimit memlock=-1 --ulimit stack=67108864",
    )
    copyright_holder: MovedTo(
        "vendor.copyright_holder", "set it only for an image its holder builds; see _common.yaml"
    ) = optional("Moved to vendor.copyright_holder.")


VendorText = Text(rules.vendor_text_problem)


class Vendor(Part):
    """Who makes the image: the banner and labels name it (`_common.yaml` sets the project's name)."""

    name: Annotated[VendorText, Missing('the maker\'s name, e.g. "ML Platform"')] = field(
        'Who built the image: the banner and org.opencontainers.image.vendor (default "tf-image-builder").',
        "ML Platform",
    )
    maintainer: Optional[VendorText] = optional(
        "Who maintains it: org.opencontainers.image.authors and maintainer (else vendor.name).",
        "ml-platform@example.com",
    )
    url: Optional[Text(rules.url_problem)] = optional(
        "http(s) URL of the team or its source: org.opencontainers.image.url.", "https://git.example.com/ml/images"
    )
    copyright_holder: Optional[VendorText] = optional(
        "Adds the image's own copyright line to the banner, naming this holder; none when unset.", "Example Corp"
    )


Capabilities = StringList('capabilities such as "8.0"', after=rules.parsed_capabilities)


class DeviceCode(Part):
    """The wheel's own GPU code as measured (cuobjdump); a child naming another framework version
    must measure it again. `builder show` and the coverage verdicts read it."""

    version: Grammar(VERSION, 'a version such as "2.5.0"') = field(
        "The framework version it describes (must equal framework.version).", "2.5.0"
    )
    cuda: Grammar(grammar.NUMERIC_VERSION, 'the CUDA version that built the wheel, e.g. "11.2"') = field(
        "The CUDA that built the wheel.", "11.2"
    )
    sass: Annotated[Capabilities, Missing('capabilities such as ["7.0", "8.0"]; [] for none')] = field(
        "Capabilities the wheel carries machine code (SASS) for; [] for none.", ["7.0", "8.0"]
    )
    ptx: Annotated[Capabilities, Missing('capabilities such as ["7.0", "8.0"]; [] for none')] = field(
        "Capabilities it carries PTX for; [] for none.", ["8.0"]
    )
    ptx_isa: Optional[Grammar(re.compile(r"[0-9]\.[0-9]"), 'a PTX ISA version such as "7.2"')] = optional(
        'The PTX ISA version of that PTX, e.g. "7.2" (required when ptx is not empty).', "7.2"
    )

    @model_validator(mode="after")
    def _compiles(self) -> DeviceCode:
        rules.device_code(self)
        return self


class Framework(Part):
    """The framework the variant installs."""

    name: Grammar(
        grammar.FRAMEWORK_NAME, "a framework name such as TensorFlow (letters, digits, ' ', '.', '_', '+', '-')"
    ) = field("Display name, e.g. TensorFlow.", "TensorFlow")
    version: Grammar(VERSION, 'a version such as "2.5.0"') = field('Version, quoted, e.g. "2.5.0".', "2.5.0")
    api: Annotated[int, BeforeValidator(rules.api), rules.API_SCHEMA] = field(
        "1 or 2: the TensorFlow API (TF1 or TF2).", 2
    )
    package: Optional[Grammar(PACKAGE_NAME, "a PyPI distribution name")] = optional(
        "The pip distribution installed from the lock, e.g. tensorflow.", "tensorflow"
    )
    pythons: Optional[
        StringList(
            'Python versions such as "3.9"',
            matching(PYTHON_VERSION, 'a Python version such as "3.9"'),
            PYTHON_VERSION,
            rules.unique_pythons,
        )
    ] = optional(
        "The Pythons its wheels exist for (required with package): a base whose Python is not listed "
        "cannot build the variant.",
        ["3.8", "3.9"],
    )
    pins: Optional[StringList('exact pins such as "numpy==1.19.5"', rules.pin_problem, None, rules.unique_pins)] = (
        optional(
            'Exact pins of a known-good set, e.g. "numpy==1.19.5" (a plain resolution may break the import).',
            ["numpy==1.19.5"],
        )
    )
    device_code: Optional[DeviceCode] = optional(" ".join((DeviceCode.__doc__ or "").split()))

    @model_validator(mode="after")
    def _consistent(self) -> Framework:
        rules.framework(self)
        return self


class Variant(Part):
    """One variant, e.g. tf2-py3."""

    tag: Optional[Text(rules.tag_problem)] = optional(
        "Its tag (default RELEASE-VARIANT, e.g. 21.08-tf2-py3).", "99.01-tf2-py3"
    )
    framework: Framework = field(Framework.__doc__ or "")
    env: Optional[Env] = optional("Environment defaults of this variant only.", {"TF_AUTOTUNE_THRESHOLD": "1"})
    labels: Optional[Labels] = optional(
        "Labels of this variant only; keys are reverse-DNS (lower case).", {"com.example.team": "tf2"}
    )


def _spec_or_absent(value: Any) -> str:
    return ABSENT if isinstance(value, str) else SPEC


def SpecOrAbsent(spec: type[Part], shape: str) -> Any:  # noqa: N802 (a type)
    """A component's mapping, or `"absent: WHY"` (null, as everywhere, is none)."""
    return Annotated[
        Union[Annotated[spec, Tag(SPEC)], Annotated[Absent(shape), Tag(ABSENT)]], Discriminator(_spec_or_absent)
    ]


class ExamplePackages(Part):
    """What /workspace/docker-examples/Dockerfile.addpackages adds when given nothing."""

    apt: Optional[
        StringList(
            'Debian package names such as "jq"',
            matching(grammar.APT_NAME, 'Debian package names such as "jq"'),
            grammar.APT_NAME,
        )
    ] = optional("Debian packages, e.g. [jq].", ["jq"])
    pip: Optional[
        StringList(
            'pip requirements such as "tensorflow-addons==0.13.0"',
            matching(grammar.PIP_SPEC, 'pip requirements such as "tensorflow-addons==0.13.0"'),
            grammar.PIP_SPEC,
        )
    ] = optional(
        'pip requirements made for the release\'s framework, e.g. ["tensorflow-addons==0.13.0"].',
        ["tensorflow-addons==0.13.0"],
    )


VariantName = Annotated[str, BeforeValidator(rules.variant_name)]
ReleaseText = Annotated[str, BeforeValidator(str), rules.RELEASE_SCHEMA]


class ReleaseFields(Part):
    """A release of the catalog: one YAML file in builder/releases/ (or in the directory
    BUILDER_CATALOG names). It names a `parent` and states only what differs from it: mappings
    merge key by key, any other value (lists included) replaces the parent's, and `null` removes
    the parent's key. Required keys are required of the release resolved through its parents."""

    model_config = ConfigDict(title="Release file of the tf-image-builder catalog")

    # identity and inheritance
    release: ReleaseText = field(
        'The release\'s name, quoted ("21.10": unquoted YAML reads 21.1); letters, digits, ".", "_", "-".', "99.01"
    )
    parent: Optional[ReleaseText] = optional(
        "The release this one inherits from; it states only what differs. Mappings merge key by key, "
        "lists and other values replace the parent's, null removes the parent's key.",
        "_schema_root",
    )
    abstract: Optional[Boolean] = optional(
        "true: a root other releases inherit from, never built or listed (`_common.yaml`).", False
    )
    repository: Text(rules.repository_problem) = field(
        "Local image repository the images are tagged in (`local/tensorflow`); `--repo` overrides it.",
        "local/tensorflow",
    )
    # the upstream stack
    os: Os = field(Os.__doc__ or "")
    python: PythonVersion = field('Python of the upstream base, e.g. "3.8".', "3.8")
    cuda: Text(rules.cuda_problem, grammar.NUMERIC_VERSION) = field(
        'CUDA version of the release, e.g. "11.4.1": with the offline base\'s CUDA it bounds the '
        "compute capabilities the release may list.",
        "11.4.1",
    )
    components: Optional[
        StringMap(
            grammar.COMPONENT, "a component name such as cudnn", grammar.NUMERIC_VERSION, 'a version such as "8.2.1"'
        )
    ] = optional(
        "Versions of the upstream stack as NVIDIA's release notes state them (cublas, cudnn, nccl, "
        'tensorrt), e.g. cudnn: "8.2.2.26"; left out where the facts do not support a value.',
        {"cudnn": "8.2.2.26"},
    )
    base: Base = field(Base.__doc__ or "")
    build: Build = field(Build.__doc__ or "")
    # what the image carries
    env: Optional[Env] = optional(
        "Environment defaults baked into every image of the release (a child's entries add to and "
        "change its parent's); `--env` adds or changes one per build. Values: no control characters.",
        {"TF_AUTOTUNE_THRESHOLD": "2"},
    )
    labels: Optional[Labels] = optional(
        "Labels baked into every image; keys are reverse-DNS (lower case); the keys vendor fills "
        "(org.opencontainers.image.vendor, .authors, .url, maintainer) are refused here.",
        {"com.example.team": "ml-platform"},
    )
    expose: Optional[Annotated[list, BeforeValidator(rules.ports), rules.PORTS_SCHEMA]] = optional(
        "Ports the image exposes (6006, 8888).", [6006, 8888]
    )
    entrypoint: Entrypoint = field(Entrypoint.__doc__ or "")
    vendor: Annotated[
        Vendor,
        Missing('who makes the image, e.g. vendor: {name: "ML Platform"}; _common.yaml gives "tf-image-builder"'),
    ] = field(Vendor.__doc__ or "")
    # variants
    variants: Annotated[
        Dict[VariantName, Variant], BeforeValidator(rules.some_variant), Missing("at least one variant")
    ] = field("The release's images, at least one; `<variant>: null` drops a parent's variant.")
    # what the image installs besides the framework
    gpu_wheels: Optional[Annotated[Dict[str, str], BeforeValidator(rules.gpu_wheels), rules.GPU_WHEELS_SCHEMA]] = (
        optional(
            "NVIDIA's PyPI wheels of the GPU libraries TensorFlow loads that the base lacks, each locked: "
            'an exact requirement, e.g. cudnn: "nvidia-cudnn-cu11==8.5.0.96"; cuda_nvcc names the nvcc '
            "wheel whose ptxas compiles capabilities newer than the toolkit's.",
            {"cudnn": "nvidia-cudnn-cu11==8.5.0.96"},
        )
    )
    tools: MovedTo(
        "each tool's own key",
        'JupyterLab and TensorBoard are components: jupyter: {requirement: "jupyterlab==4.6.6"}, '
        'tensorboard: {requirement: "tensorboard==2.21.0"}, or "absent: WHY"',
    ) = optional("Moved: each tool is its own key (jupyter, tensorboard).")
    example_packages: Optional[ExamplePackages] = optional(ExamplePackages.__doc__ or "")

    @model_validator(mode="after")
    def _consistent(self) -> ReleaseFields:
        rules.release(self)
        return self


# A release file's schema: its own keys, and each component's (builder/components/), a
# mapping or "absent: WHY", null for none.
ReleaseDoc: type[ReleaseFields] = create_model(  # type: ignore[call-overload]
    "ReleaseDoc",
    __base__=ReleaseFields,
    __doc__=ReleaseFields.__doc__,
    **{
        c.NAME: (
            Optional[SpecOrAbsent(c.MODEL, "{" + ", ".join(c.MODEL.model_fields) + "}")],
            optional(c.DOC, c.EXAMPLE),
        )
        for c in components.REGISTRY
    },
)


def keys(model: type[BaseModel]) -> set[str]:
    """The keys a mapping of MODEL may hold (moved keys left out)."""
    return {name for name, f in model.model_fields.items() if not any(type(m).__name__ == "Moved" for m in f.metadata)}

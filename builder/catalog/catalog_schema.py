"""The release catalog's fields, declared once: every key path a release file may hold,
its type, whether a release needs it (after inheritance) and what it means.

`builder/cli/reference.py` writes docs/reference/catalog.md from this table, and
tests/unit/test_reference.py holds it to the validator in `builder/catalog/__init__.py`: every key
the validator accepts is described here, and every path described here is one it accepts.

Path segments in angle brackets are names you choose: `variants.<variant>` is any variant
name, `env.<NAME>` any environment variable. `SAMPLE_NAMES` gives one of each, and each
field's `example` a value the validator accepts (the test builds a catalog of them)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Field:
    path: str
    type: str
    required: bool
    description: str
    example: Any = None  # a value the validator accepts; None: the field's children make it


# One name for each placeholder segment, for examples and the test's maximal catalog.
SAMPLE_NAMES = {"<component>": "cudnn", "<NAME>": "TF_AUTOTUNE_THRESHOLD", "<key>": "com.example.team",
                "<variant>": "tf2-py3", "<tool>": "tensorboard"}

ABSENT = '"absent: WHY"'

FIELDS: tuple[Field, ...] = (
    # identity and inheritance
    Field("release", "string", True,
          'The release\'s name, quoted ("21.10": unquoted YAML reads 21.1); letters, digits, ".", "_", "-".',
          "99.01"),
    Field("parent", "string", False,
          "The release this one inherits from; it states only what differs. Mappings merge key by key, "
          "lists and other values replace the parent's, null removes the parent's key.", "_schema_root"),
    Field("abstract", "boolean", False,
          "true: a root other releases inherit from, never built or listed (`_common.yaml`).", False),
    Field("repository", "string", True,
          "Local image repository the images are tagged in (`local/tensorflow`); `--repo` overrides it.",
          "local/tensorflow"),
    # the upstream stack
    Field("os", "mapping", True, "The upstream base's operating system."),
    Field("os.distro", "string", True, "Distribution name, e.g. ubuntu or debian.", "ubuntu"),
    Field("os.version", "string", True, 'Its version, quoted, e.g. "20.04".', "20.04"),
    Field("python", "string", True, 'Python of the upstream base, e.g. "3.8".', "3.8"),
    Field("cuda", "string", True,
          'CUDA version of the release, e.g. "11.4.1": with the offline base\'s CUDA it bounds the '
          "compute capabilities the release may list.", "11.4.1"),
    Field("components", "mapping", False,
          "Versions of the upstream stack as NVIDIA's release notes state them (cublas, cudnn, nccl, "
          "tensorrt); left out where the facts do not support a value."),
    Field("components.<component>", "string", False, 'A component\'s version, e.g. cudnn: "8.2.2.26".',
          "8.2.2.26"),
    # bases
    Field("base", "mapping", True, "The two bases an image can start from."),
    Field("base.upstream", "mapping", True, "NVIDIA's CUDA image, for builders that reach nvcr.io (`--base upstream`)."),
    Field("base.upstream.image", "image reference", True,
          "NAME:TAG of NVIDIA's CUDA base, e.g. nvcr.io/nvidia/cuda:11.4.1-cudnn8-devel-ubuntu20.04.",
          "nvcr.io/nvidia/cuda:11.4.1-cudnn8-devel-ubuntu20.04"),
    Field("base.upstream.digest", "string", False,
          "sha256:<64 hex digits> pinning that image; give it when you have it.",
          "sha256:" + "0" * 64),
    Field("base.offline", "mapping", True,
          "The base built locally from Debian's archive (`--base auto` and `--base offline`): "
          "debootstrap plus Debian's CUDA toolkit."),
    Field("base.offline.debian", "string", True,
          "Debian suite: bullseye (CUDA 11.2, Python 3.9), bookworm (CUDA 11.8, Python 3.11) or "
          "trixie (CUDA 12.4, Python 3.13).", "bullseye"),
    Field("base.offline.cuda", "string", True, "The CUDA version of that suite's toolkit, quoted.", "11.2"),
    Field("base.offline.python", "string", True, "That suite's Python, quoted.", "3.9"),
    # build parameters
    Field("build", "mapping", True, "Build parameters (NGC user guide, section 6)."),
    Field("build.cuda_compute_capabilities", "list of strings", True,
          'Compute capabilities compiled by default, e.g. ["7.0", "8.0"]; each must compile with the '
          "release's CUDA and its offline base's CUDA (or a newer ptxas of the same major from "
          "gpu_wheels.cuda_nvcc). `--cuda-cc` overrides.", ["7.0", "8.0", "8.6"]),
    Field("build.xla", "boolean", True, "TF_ENABLE_XLA: build the XLA path (`--xla/--no-xla`).", True),
    Field("build.gcp", "boolean", True, "TF_NEED_GCP: gs:// support (`--gcp/--no-gcp`).", False),
    Field("build.hdfs", "boolean", True, "TF_NEED_HDFS: hdfs:// support (`--hdfs/--no-hdfs`; refused: needs a Hadoop client).",
          False),
    Field("build.nvbuildopts", "list of strings", False,
          "Extra bazel flags for a TensorFlow tree, written to /opt/tensorflow/nvbuildopts.",
          ["-c", "opt", "--config=cuda"]),
    # what the image carries
    Field("env", "mapping", False,
          "Environment defaults baked into every image of the release (a child's entries add to and "
          "change its parent's); `--env` adds or changes one per build."),
    Field("env.<NAME>", "string", False, "One variable's value (no control characters).", "2"),
    Field("labels", "mapping", False,
          "Labels baked into every image; the keys vendor fills (org.opencontainers.image.vendor, "
          ".authors, .url, maintainer) are refused here."),
    Field("labels.<key>", "string", False, "One label's value; keys are reverse-DNS (lower case).", "ml-platform"),
    Field("expose", "list of integers", False, "Ports the image exposes (6006, 8888).", [6006, 8888]),
    Field("entrypoint", "mapping", True, "The banner and checks the entrypoint prints."),
    Field("entrypoint.title", "string", True, "The banner's title, e.g. TensorFlow.", "TensorFlow"),
    Field("entrypoint.upstream_copyright", "string", True,
          "The upstream project's copyright line; {year} is replaced with the build year.",
          "Copyright 2017-{year} The TensorFlow Authors.  All rights reserved."),
    Field("entrypoint.shm_recommend", "string", True,
          "The docker run options the shared-memory note recommends.",
          "--shm-size=1g --ulimit memlock=-1 --ulimit stack=67108864"),
    Field("vendor", "mapping", True,
          "Who makes the image: the banner and labels name it (`_common.yaml` sets the project's name)."),
    Field("vendor.name", "string", True,
          'Who built the image: the banner and org.opencontainers.image.vendor (default "tf-image-builder").',
          "ML Platform"),
    Field("vendor.maintainer", "string", False,
          "Who maintains it: org.opencontainers.image.authors and maintainer (else vendor.name).",
          "ml-platform@example.com"),
    Field("vendor.url", "string", False, "http(s) URL of the team or its source: org.opencontainers.image.url.",
          "https://git.example.com/ml/images"),
    Field("vendor.copyright_holder", "string", False,
          "Adds the image's own copyright line to the banner, naming this holder; none when unset.",
          "Example Corp"),
    # variants
    Field("variants", "mapping", True,
          "The release's images, at least one; `<variant>: null` drops a parent's variant."),
    Field("variants.<variant>", "mapping", True, "One variant, e.g. tf2-py3."),
    Field("variants.<variant>.tag", "string", False, "Its tag (default RELEASE-VARIANT, e.g. 21.08-tf2-py3).",
          "99.01-tf2-py3"),
    Field("variants.<variant>.framework", "mapping", True, "The framework the variant installs."),
    Field("variants.<variant>.framework.name", "string", True, "Display name, e.g. TensorFlow.", "TensorFlow"),
    Field("variants.<variant>.framework.version", "string", True, 'Version, quoted, e.g. "2.5.0".', "2.5.0"),
    Field("variants.<variant>.framework.api", "integer", True, "1 or 2: the TensorFlow API (TF1 or TF2).", 2),
    Field("variants.<variant>.framework.package", "string", False,
          "The pip distribution installed from the lock, e.g. tensorflow.", "tensorflow"),
    Field("variants.<variant>.framework.pythons", "list of strings", False,
          "The Pythons its wheels exist for (required with package): a base whose Python is not listed "
          "cannot build the variant.", ["3.8", "3.9"]),
    Field("variants.<variant>.framework.pins", "list of strings", False,
          'Exact pins of a known-good set, e.g. "numpy==1.19.5" (a plain resolution may break the import).',
          ["numpy==1.19.5"]),
    Field("variants.<variant>.framework.device_code", "mapping", False,
          "The wheel's own GPU code as measured (cuobjdump); a child naming another framework version "
          "must measure it again. `builder show` and the coverage verdicts read it."),
    Field("variants.<variant>.framework.device_code.version", "string", True,
          "The framework version it describes (must equal framework.version).", "2.5.0"),
    Field("variants.<variant>.framework.device_code.cuda", "string", True, "The CUDA that built the wheel.", "11.2"),
    Field("variants.<variant>.framework.device_code.sass", "list of strings", True,
          "Capabilities the wheel carries machine code (SASS) for; [] for none.", ["7.0", "8.0"]),
    Field("variants.<variant>.framework.device_code.ptx", "list of strings", True,
          "Capabilities it carries PTX for; [] for none.", ["8.0"]),
    Field("variants.<variant>.framework.device_code.ptx_isa", "string", False,
          'The PTX ISA version of that PTX, e.g. "7.2" (required when ptx is not empty).', "7.2"),
    Field("variants.<variant>.env", "mapping", False, "Environment defaults of this variant only."),
    Field("variants.<variant>.env.<NAME>", "string", False, "One variable's value.", "1"),
    Field("variants.<variant>.labels", "mapping", False, "Labels of this variant only."),
    Field("variants.<variant>.labels.<key>", "string", False, "One label's value.", "tf2"),
    # what the image installs besides the framework
    Field("gpu_wheels", "mapping", False,
          "NVIDIA's PyPI wheels of the GPU libraries TensorFlow loads that the base lacks, each locked."),
    Field("gpu_wheels.<component>", "string", False,
          'An exact requirement, e.g. cudnn: "nvidia-cudnn-cu11==8.5.0.96"; cuda_nvcc names the nvcc wheel '
          "whose ptxas compiles capabilities newer than the toolkit's.", "nvidia-cudnn-cu11==8.5.0.96"),
    Field("horovod", f"mapping, null or {ABSENT}", False,
          "The Horovod sdist built in the image by nvbuild.sh; null: none; \"absent: WHY\": none, and why "
          "(`builder show` prints it)."),
    Field("horovod.version", "string", True, 'Horovod\'s version, e.g. "0.22.1" (its sdist is hash-locked).', "0.22.1"),
    Field("horovod.requires", "list of strings", True,
          "Its runtime requirements, locked with the rest, e.g. [cloudpickle, psutil].", ["cloudpickle", "psutil"]),
    Field("tools", "mapping", False,
          "What the image installs from its lock for its users (JupyterLab, TensorBoard); "
          "`--without NAME` leaves one out."),
    Field("tools.<tool>", f"string, null or {ABSENT}", False,
          'A pip requirement, e.g. tensorboard: "tensorboard==2.11.2"; null drops a parent\'s; '
          '"absent: WHY": not here, and why.', "tensorboard==2.11.2"),
    Field("dali", f"mapping, null or {ABSENT}", False,
          "NVIDIA DALI's wheel and its TensorFlow plugin, compiled in the image by `nvbuild.sh --only dali`; "
          "null or \"absent: WHY\" as for horovod; `--without dali` leaves it out."),
    Field("dali.version", "string", True, 'DALI\'s version, e.g. "1.34.0".', "1.34.0"),
    Field("dali.cuda", "string", True, 'The wheel\'s CUDA flavour (nvidia-dali-cuda{cuda}): "110" or "120".', "110"),
    Field("example_packages", "mapping", False,
          "What /workspace/docker-examples/Dockerfile.addpackages adds when given nothing."),
    Field("example_packages.apt", "list of strings", False, "Debian packages, e.g. [jq].", ["jq"]),
    Field("example_packages.pip", "list of strings", False,
          'pip requirements made for the release\'s framework, e.g. ["tensorflow-addons==0.13.0"].',
          ["tensorflow-addons==0.13.0"]),
)

# Keys the validator still recognises only to say where they went.
MOVED = {"entrypoint.copyright_holder": "vendor.copyright_holder"}


def by_path() -> dict[str, Field]:
    return {f.path: f for f in FIELDS}

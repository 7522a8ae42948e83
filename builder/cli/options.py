"""Command-line options shared by several commands, declared once.

Single options are typer.Option values. The two groups that several commands take whole
(the build settings: mirrors, index, their credentials and CA bundles; the registry
credentials) are decorators: they add the group's options to a command's signature and
hand the command one value instead (a function that reads the settings, or the
credentials), so the commands name neither the options nor their order.
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Any, Callable, List, Optional

import typer

from builder import cache, components
from builder.core.errors import UserError
from builder.engine import ProgressMode, buildx, progress_mode
from builder.engine.buildsettings import BackendAsks, BuildSettings, from_options
from builder.registry import credentials_from

CUDA_CC = typer.Option(None, "--cuda-cc", help="Compute capabilities: 7.0,8.0 | 70,80 | all | local.")
BASE = typer.Option("auto", "--base", help="auto | upstream | offline | an image reference.")
REPO = typer.Option(None, "--repo", help="Image repository (default: the release's).")
RELEASE = typer.Option(..., "--release", "-r", help="Release, e.g. 21.08.")
BUILDERS = typer.Option(
    None,
    "--builders",
    help="With --all: spread the variants over these buildx builders or "
    "Docker contexts (A,B; 'default' is this engine), one bake each.",
)
COMPILE_CACHE = typer.Option(None, "--compile-cache", help="Shared compile cache URL (builder cache serve).")
NO_CACHE = typer.Option(False, "--no-cache", help="Do not use the layer cache.")
QUIET = typer.Option(False, "--quiet", "-q", help="No progress lines: --progress quiet.")
PROGRESS = typer.Option(
    None,
    "--progress",
    help="auto (one updating line on a terminal, step lines otherwise) | "
    "plain (step lines and every build log line) | quiet (no progress: the result on "
    "stdout; the base, notes, warnings and errors still on stderr) | rawjson (the "
    "engine's progress messages, one JSON object per line); all on stderr.",
)
BUILD_ARG = typer.Option(
    None,
    "--build-arg",
    help="NAME=VALUE for a build argument the Dockerfile declares, or "
    "Docker's proxy arguments (HTTP_PROXY, HTTPS_PROXY, FTP_PROXY, NO_PROXY, ALL_PROXY, "
    "lower case too: kept out of the image's history) (repeatable).",
)
BUILD_JSON = typer.Option(
    False,
    "--json",
    help="What was built as JSON: each image's tags, id and pushed digests, "
    "and the base (with --dry-run: the whole plan).",
)
DERIVE_JSON = typer.Option(False, "--json", help="The derived image's tag, id, parent (and pushed digest) as JSON.")
BASE_JSON = typer.Option(
    False, "--json", help="The base's tag and image id as JSON (with --print: the tag and the recipe)."
)
DOCTOR_RELEASE = typer.Option(
    None,
    "--release",
    "-r",
    help="Also check what this release needs: disk for a cold build, the GPU driver it asks for.",
)
PUSH_TAG = typer.Option(
    None,
    "--tag",
    "-t",
    help="Tag in the registry (default: the image's), or the whole reference HOST[:PORT]/NAME:TAG, as build's -t.",
)
PUSH_QUIET = typer.Option(False, "--quiet", "-q", help="No progress lines; only REF@DIGEST (or the JSON).")
PUSH = typer.Option(
    False,
    "--push",
    help="Push each built tag to the registry its reference names "
    "(-t HOST[:PORT]/NAME:TAG), or under --registry; verified like `builder push`.",
)
PUSH_REGISTRY_OF_PUSH = typer.Option(
    None,
    "--registry",
    help="HOST[:PORT][/NAMESPACE] of the registry (default: the registry IMAGE's reference names, as docker push).",
)
PUSH_REGISTRY = typer.Option(
    None,
    "--registry",
    help="With --push: push the tags under this registry (HOST[:PORT][/NS]) instead of where they name.",
)
PLATFORM = typer.Option(
    "linux/amd64",
    "--platform",
    help="Target platform, Docker's OS/ARCH: linux/amd64; linux/arm64 "
    "is refused, saying why (`builder show R` lists what each release serves).",
)
INSECURE_REGISTRY = typer.Option(
    False,
    "--insecure-registry",
    help="Allow a registry without TLS or with an untrusted certificate (then no credentials are sent).",
)
CA_BUNDLE = typer.Option(
    None, "--ca-bundle", help="Extra CA bundle (PEM) for the build's downloads (repeatable; not kept)."
)
CACHE_DIR = typer.Option(None, "--dir", help="Cache directory (default ~/.cache/tfbuilder/compile-cache).")
JSON = typer.Option(False, "--json", help="Machine-readable output.")
SIGN = typer.Option(
    None,
    "--sign",
    help="cosign private key: sign the pushed digest and attach the image's SBOM and provenance, signed.",
)
KEY_PASSWORD_ENV = typer.Option(
    "COSIGN_PASSWORD", "--key-password-env", help="Environment variable holding the --sign key's password."
)
RUNTIME = typer.Option(
    False,
    "--runtime",
    help="Also build the runtime image (no compiler, no CUDA toolkit), "
    "tagged TAG-runtime; derive from the devel image.",
)
RUNTIME_ONLY = typer.Option(
    False,
    "--runtime-only",
    help="Only the runtime image, tagged TAG-runtime: the devel "
    "stage is built but never exported or tagged (faster, less disk; no devel image to "
    "derive from or to list CUDA coverage).",
)
# The numbers are builder.registry's MAX_TRIES, BACKOFF and BACKOFF_CAP, written out for the
# help text (test_hostile_input.py checks that they agree).
TRIES = typer.Option(
    4,
    "--tries",
    help="Attempts for transient failures, at most 10; the waits between them double from 2 s and are capped at 60 s.",
)
SBOM = typer.Option(True, "--sbom/--no-sbom", help="Make each image's SBOM (builder sbom) once it is tagged.")


def progress_of(progress: str | None, quiet: bool) -> ProgressMode:
    """The --progress mode; -q/--quiet is --progress quiet, and a different mode with it is refused."""
    if progress is None:
        return quiet_progress(quiet)
    mode = progress_mode(progress)
    if quiet and mode != ProgressMode.QUIET:
        raise UserError(f"-q/--quiet is --progress quiet: it cannot go with --progress {mode}")
    return mode


def quiet_progress(quiet: bool) -> ProgressMode:
    """-q/--quiet (push's only progress option) as the mode it stands for."""
    return ProgressMode.QUIET if quiet else ProgressMode.AUTO


# name -> (annotation, option): the build-settings group.
SETTINGS: dict[str, tuple[Any, Any]] = {
    "apt_mirror": (
        Optional[str],
        typer.Option(None, "--apt-mirror", help="Debian mirror URL used while building (not kept in the image)."),
    ),
    "pip_index": (
        Optional[str],
        typer.Option(None, "--pip-index", help="pip index URL (not kept in the image; credentials: see below)."),
    ),
    "apt_mirror_credentials_file": (
        Optional[Path],
        typer.Option(
            None, "--apt-mirror-credentials-file", help="File whose first line is USER:PASSWORD for --apt-mirror."
        ),
    ),
    "apt_mirror_credentials_env": (
        Optional[str],
        typer.Option(
            None, "--apt-mirror-credentials-env", help="Environment variable holding USER:PASSWORD for --apt-mirror."
        ),
    ),
    "pip_index_credentials_file": (
        Optional[Path],
        typer.Option(
            None, "--pip-index-credentials-file", help="File whose first line is USER:PASSWORD for --pip-index."
        ),
    ),
    "pip_index_credentials_env": (
        Optional[str],
        typer.Option(
            None, "--pip-index-credentials-env", help="Environment variable holding USER:PASSWORD for --pip-index."
        ),
    ),
    "ca_bundle": (Optional[List[Path]], CA_BUNDLE),
    "host_ca": (
        bool,
        typer.Option(
            True,
            "--host-ca/--no-host-ca",
            help="Let the build's downloads trust what this machine trusts (its CA bundle; not kept).",
        ),
    ),
    "layer_cache": (
        Optional[str],
        typer.Option(
            None,
            "--layer-cache",
            help="Registry repository HOST[:PORT]/NAME for BuildKit's layer cache: read before "
            "and written after each build, one tag per image (credentials: docker login).",
        ),
    ),
    "builder": (
        Optional[str],
        typer.Option(
            None,
            "--builder",
            help="buildx builder or Docker context to build on (default: this engine's own); "
            "the image is loaded into this engine, checked and tagged here.",
        ),
    ),
    "compression": (
        str,
        typer.Option(
            "gzip",
            "--compression",
            help="Layer compression: gzip (every client) | zstd (every layer; faster to export "
            "and push, smaller; pulled by Docker 23+, containerd 1.5+, Podman 3+).",
        ),
    ),
}

# The render-options group (render and build): what a user may change in a release.
RENDER: dict[str, tuple[Any, Any]] = {
    "cuda_cc": (Optional[str], CUDA_CC),
    "allow_ptx_jit": (
        bool,
        typer.Option(
            False,
            "--allow-ptx-jit",
            help="Accept capabilities newer than the toolkit compiles: they run by PTX "
            "JIT of the newest it can (e.g. 12.0 on CUDA 12.4).",
        ),
    ),
    "xla": (Optional[bool], typer.Option(None, "--xla/--no-xla", help="Build the XLA path (default: the release's).")),
    "gcp": (Optional[bool], typer.Option(None, "--gcp/--no-gcp", help="Build gs:// support (default: the release's).")),
    "hdfs": (
        Optional[bool],
        typer.Option(None, "--hdfs/--no-hdfs", help="Build hdfs:// support (default: the release's)."),
    ),
    "env": (
        Optional[List[str]],
        typer.Option(None, "--env", help="Extra or changed env default NAME=VALUE (repeatable)."),
    ),
    "without": (
        Optional[List[str]],
        typer.Option(
            None,
            "--without",
            help=f"Leave out a component the release installs: {', '.join(components.NAMES)} (repeatable); "
            "`builder show R` lists them.",
        ),
    ),
    "base": (str, BASE),
    "repo": (Optional[str], REPO),
    "framework_src": (
        Optional[Path],
        typer.Option(None, "--framework-src", help="Framework source tree to build (default: framework-src/)."),
    ),
}

# The progress group (build, base, derive): --progress, and -q/--quiet as its alias.
PROGRESS_GROUP: dict[str, tuple[Any, Any]] = {"quiet": (bool, QUIET), "progress": (Optional[str], PROGRESS)}

# The derive-changes group: what `builder derive` changes in its parent.
DERIVE_CHANGES: dict[str, tuple[Any, Any]] = {
    "patches": (
        Optional[List[Path]],
        typer.Option(None, "--patch", help="Patch for tensorflow-source (patch -p1; repeatable)."),
    ),
    # --NAME-patch for each component compiled from a source it patches (builder/components/)
    **{
        f"{c.NAME}_patches": (
            Optional[List[Path]],
            typer.Option(
                None,
                f"--{c.NAME}-patch",
                help=f"Patch for the source `nvbuild.sh --only {c.NAME}` compiles ({c.SOURCE}; patch -p1 at its "
                "root; repeatable).",
            ),
        )
        for c in components.REGISTRY
        if c.patchable()
    },
    "apt": (Optional[List[str]], typer.Option(None, "--apt", help="Debian package to add (repeatable).")),
    "pip": (Optional[List[str]], typer.Option(None, "--pip", help="pip requirement to add (repeatable).")),
    "nvbuild_args": (
        Optional[str],
        typer.Option(None, "--nvbuild-args", help='Arguments for nvbuild.sh, e.g. "--sm 8.6".'),
    ),
}

# `builder cache serve`: the server's typed options.
CACHE_SERVER: dict[str, tuple[Any, Any]] = {
    "directory": (Optional[Path], CACHE_DIR),
    "port": (int, typer.Option(8742, "--port", help="TCP port (1-65535).")),
    "listen": (
        str,
        typer.Option(
            "127.0.0.1",
            "--listen",
            "--address",
            help="IP address to listen on (0.0.0.0 for other machines: their writes then need the write credential).",
        ),
    ),
    "max_size": (str, typer.Option("20G", "--max-size", help="Keep the store under this size, oldest objects first.")),
    "max_object_size": (
        str,
        typer.Option("512M", "--max-object-size", help="Largest object accepted (512M, 2G, ...)."),
    ),
    "write_credentials_file": (
        Optional[Path],
        typer.Option(
            None,
            "--write-credentials-file",
            help="USER:PASSWORD (one line) for writes from other machines when listening beyond loopback "
            "(default: generated into DIR/.server/write-credentials).",
        ),
    ),
}

# The registry-credentials group.
REGISTRY_CREDENTIALS: dict[str, tuple[Any, Any]] = {
    "username": (
        Optional[str],
        typer.Option(None, "--username", help="Registry user name (the password never goes on the command line)."),
    ),
    "username_env": (
        Optional[str],
        typer.Option(None, "--username-env", help="Environment variable holding the registry user name."),
    ),
    "password_env": (
        Optional[str],
        typer.Option(None, "--password-env", help="Environment variable holding the registry password or token."),
    ),
    "password_stdin": (
        bool,
        typer.Option(False, "--password-stdin", help="Read the registry password from standard input."),
    ),
}


def _with_group(group: dict[str, tuple[Any, Any]], param: str, make: Callable[[dict], Any]) -> Callable:
    """A decorator: replace the command's parameter PARAM by GROUP's options; the command
    receives make(values of the group) as PARAM."""

    def decorate(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        params = [p for p in sig.parameters.values() if p.name != param]
        params += [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)
            for name, (annotation, option) in group.items()
        ]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in group}
            return fn(**kwargs, **{param: make(values)})

        setattr(command, "__signature__", sig.replace(parameters=params))  # noqa: B010 - typer reads it; mypy knows no such attribute
        command.__annotations__ = {
            **{k: v for k, v in fn.__annotations__.items() if k != param},
            **{name: annotation for name, (annotation, _) in group.items()},
        }
        return command

    return decorate


class SettingsReader:
    """The build settings' options, read (files opened, credentials resolved) when called:
    each command decides what is checked first."""

    def __init__(self, values: dict[str, Any]):
        self.values = values
        self.ca_bundle = values["ca_bundle"]  # --bake-ca installs these files
        # what only BuildKit does: the plan refuses it on the legacy builder before settings are read
        self.backend = BackendAsks(values["layer_cache"], values["builder"], values["compression"])

    def __call__(self) -> BuildSettings:
        v = self.values
        settings = from_options(
            v["apt_mirror"],
            v["pip_index"],
            v["ca_bundle"],
            v["host_ca"],
            (
                v["apt_mirror_credentials_file"],
                v["apt_mirror_credentials_env"],
                v["pip_index_credentials_file"],
                v["pip_index_credentials_env"],
            ),
            layer_cache=v["layer_cache"],
            builder=v["builder"],
            compression=v["compression"],
        )
        if settings.builder is not None:  # a builder buildx knows, or one line
            buildx.check_builder(settings.builder)
        return settings


def _credentials_reader(values: dict) -> Callable[[], Any]:
    def read():
        return credentials_from(
            values["username"], values["username_env"], values["password_env"], values["password_stdin"]
        )

    return read


# The command gets `render`: the render options as given (a dict, None where not given;
# the repeatable ones as tuples).
with_render_options = _with_group(
    RENDER,
    "render",
    lambda values: {**values, "env": tuple(values["env"] or ()), "without": tuple(values["without"] or ())},
)
# The command gets `progress`: the --progress mode (checked against -q/--quiet).
with_progress = _with_group(PROGRESS_GROUP, "progress", lambda values: progress_of(values["progress"], values["quiet"]))


def _component_patches(key: str) -> str:
    """The component a derive-changes key patches ("dali_patches" -> "dali"), else ""."""
    name = key[: -len("_patches")]
    return name if key.endswith("_patches") and name in components.NAMES else ""


# The command gets `changes`: derive's changes, keyed as plan_derive takes them (lists, never None).
with_derive_changes = _with_group(
    DERIVE_CHANGES,
    "changes",
    lambda values: {
        **{k: v if k == "nvbuild_args" else list(v or []) for k, v in values.items() if not _component_patches(k)},
        "component_patches": {_component_patches(k): list(v or []) for k, v in values.items() if _component_patches(k)},
    },
)
# The command gets `settings`: a function returning the BuildSettings (read when called, so
# each command decides what is checked first), with `.ca_bundle` for --bake-ca.
with_build_settings = _with_group(SETTINGS, "settings", SettingsReader)
# The command gets `credentials`: a function returning the registry Credentials (or None).
with_registry_credentials = _with_group(REGISTRY_CREDENTIALS, "credentials", _credentials_reader)


def _server_reader(values: dict) -> Callable[[], Any]:
    def read():
        return cache.CacheServer.checked(
            values["directory"] or cache.default_dir(),
            values["port"],
            values["listen"],
            values["max_size"],
            values["max_object_size"],
            values["write_credentials_file"],
        )

    return read


# The command gets `server`: a function returning the checked CacheServer.
with_cache_server = _with_group(CACHE_SERVER, "server", _server_reader)

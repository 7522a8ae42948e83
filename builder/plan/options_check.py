"""The checks of single options that several plans share (and the CLI's render and --bake-ca
options): each refuses a bad value with one line before anything is planned or built."""

from __future__ import annotations

import time
from pathlib import Path

from builder.core import grammar, urls
from builder.core.errors import UserError
from builder.engine import COMPRESSIONS, buildkit_engine
from builder.engine.buildsettings import BackendAsks, read_ca_bundle
from builder.in_image import cuda_arch


def default_build_id(now: float | None = None) -> str:
    return time.strftime("%Y%m%d.%H%M%S", time.gmtime(now))


def check_build_id(bid: str) -> None:
    if not grammar.BUILD_ID.fullmatch(bid):
        raise UserError(
            f"--build-id {grammar.printable(bid)} may hold only letters, digits, '_', '.' and '-' "
            "(64 at most, not starting with '.' or '-')"
        )


def check_compile_cache(url: str | None) -> None:
    if url:  # it is a build arg: credentials in it would land in docker history and the log
        urls.check_url(
            url,
            "--compile-cache",
            "and a compile-cache URL is a build argument, so they would also land "
            "in docker history and the build log: builds on the cache's own machine write without "
            "credentials (see `builder cache serve --help`)",
        )


def check_password_env(name: str) -> str:
    if not grammar.matches(grammar.ENV_NAME, name):
        raise UserError(f"--key-password-env {grammar.printable(name)}: not an environment variable name")
    return name


# --- the build backend --------------------------------------------------------------------


def chosen_backend() -> tuple[str, str]:
    """The backend builds will use, as buildkit_engine.connect() chooses it but without the
    engine (BUILDER_BACKEND, then whether the Docker CLI has buildx); for the legacy
    builder, why it is the one."""
    if buildkit_engine.backend_wanted() == "legacy":
        return "legacy", "BUILDER_BACKEND=legacy"
    if not buildkit_engine.buildx_version():
        return "legacy", "docker buildx is not installed"
    return "buildkit", ""


def check_backend(asks: BackendAsks, builders: str | None = None) -> None:
    """Options the legacy builder cannot honour are refused here, in the plan, so that
    --dry-run and --print refuse them too and nothing (a base pulled, the settings server
    started) happens first. BUILDERS: --builders, one bake each (the legacy builder has no bake)."""
    only_buildkit = {
        "--layer-cache": asks.layer_cache,
        "--builder": asks.builder,
        f"--compression {asks.compression}": asks.compression in set(COMPRESSIONS) - {"gzip"},
        "--builders": builders,
    }
    asked = [option for option, wanted in only_buildkit.items() if wanted]
    if asks.builder and builders:
        raise UserError("--builder and --builders exclude each other: give the builders with --builders A,B")
    if not asked:
        return
    backend, why = chosen_backend()
    if backend != "buildkit":
        raise UserError(
            f"{asked[0]} needs the BuildKit backend (docker buildx); builds here use the legacy "
            f"builder ({why}; `builder doctor` says more)"
        )


# --- the command line's own options -------------------------------------------------------


def check_render_args(release: str | None, variant: str | None, render: dict, all_: bool, check: bool) -> dict:
    """`builder render`: --all renders the catalog as it is; anything else names a release.
    The render options as a render takes them: --base auto is the offline base, as a build
    resolves it on every machine."""
    if check and not all_:
        raise UserError("--check goes with --all")
    if all_ and (release or variant or any(v for k, v in render.items() if k != "base") or render["base"] != "auto"):
        raise UserError("--all renders the catalog as it is; it takes no --release, --variant or render options")
    if not all_ and not release:
        raise UserError("give --release R (or --all)")
    return {**render, "base": "offline"} if render["base"] == "auto" else render


def baked_ca(bake_ca: bool, ca_bundles: list[Path] | None) -> tuple[str, ...]:
    """The PEM texts --bake-ca installs in the image."""
    if not bake_ca:
        return ()
    if not ca_bundles:
        raise UserError("--bake-ca needs at least one --ca-bundle")
    return tuple(read_ca_bundle(p) for p in ca_bundles)  # each checked as it is read: no hang, no size surprise


def parse_capabilities(text: str | None, what: str = "--cuda-cc") -> list[str]:
    """An explicit list of compute capabilities (no 'all' or 'local')."""
    if not text:
        return []
    try:
        parsed = cuda_arch.parse(text)
    except cuda_arch.ArchError as exc:
        raise UserError(f"{what}: {exc}") from None
    if isinstance(parsed, str):
        raise UserError(f"{what} takes a list of capabilities here")
    return parsed

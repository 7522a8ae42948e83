"""The `builder` command line: parsing and printing only. Each command turns its options
into a plan (builder.plan, pure) and hands it to builder.run with an engine; results go to
stdout, logs and errors to stderr. Every failure is a BuilderError, printed by the one
handler in builder.cli.entry (one line for user errors, exit code by kind).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

import builder.cli.doctor  # by its full name: `doctor` is a command here
from builder.catalog import driver, load_selected
from builder.cli import doctor_report, entry
from builder.cli.cli_cache import cache_app
from builder.cli.cli_catalog import catalog_app
from builder.cli.options import (
    BASE_JSON,
    BUILD_ARG,
    BUILD_JSON,
    BUILDERS,
    COMPILE_CACHE,
    DERIVE_JSON,
    DOCTOR_RELEASE,
    INSECURE_REGISTRY,
    JSON,
    KEY_PASSWORD_ENV,
    NO_CACHE,
    PLATFORM,
    PUSH,
    PUSH_QUIET,
    PUSH_REGISTRY,
    PUSH_REGISTRY_OF_PUSH,
    PUSH_TAG,
    RELEASE,
    RUNTIME,
    RUNTIME_ONLY,
    SBOM,
    SIGN,
    TRIES,
    quiet_progress,
    with_build_settings,
    with_derive_changes,
    with_progress,
    with_registry_credentials,
    with_render_options,
)
from builder.core import outputdir
from builder.core.grammar import check_ref
from builder.plan import (
    BuildArgs,
    baked_ca,
    check_render_args,
    parse_capabilities,
    plan_base,
    plan_build,
    plan_derive,
    plan_push,
)
from builder.run import print_base_recipe, queries, run_base, run_build, run_derive, run_push, run_tests
from builder.run.run_files import run_bake, run_lock, run_render, run_render_all

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Build NGC-style GPU TensorFlow container images from a release catalog.",
)


def _catalog():
    """The shipped catalog, or the directory BUILDER_CATALOG names (a private catalog)."""
    return load_selected()


_engine = queries.connect  # the engine with the best backend here, connected when a command needs it


def _version(shown: bool) -> None:
    """--version: what is installed and the commit it comes from (builder.core.version, read only when asked)."""
    if shown:
        from builder.core import version

        print(version.version_text())
        raise typer.Exit(0)


@app.callback()
def main_options(
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        callback=_version,
        is_eager=True,
        help="Print the builder's version and commit, and exit.",
    ),
) -> None:
    del version  # printed (and exited) by its eager callback; the app's help is Typer's help= above


@app.command()
def releases(as_json: bool = JSON) -> None:
    """List the releases in the catalog."""
    print(queries.releases_text(_catalog(), as_json))


@app.command()
def show(
    release: str = typer.Argument(..., help="Release name, e.g. 21.08."),
    as_json: bool = typer.Option(False, "--json", help="JSON instead of YAML."),
) -> None:
    """Show a release as resolved through its parents and validated, then what is computed
    from it: the minimum NVIDIA driver, a verdict per GPU of the fleet, the platforms."""
    print(driver.show_text(_catalog().get(release), as_json), end="")


@app.command()
@with_render_options
def render(
    release: Optional[str] = typer.Option(None, "--release", "-r", help="Release, e.g. 21.08."),
    variant: Optional[str] = typer.Option(None, "--variant", "-v", help="Variant, e.g. tf2-py3 (default: all)."),
    render=None,
    output: Optional[Path] = typer.Option(
        None, "-o", "--output", parser=outputdir.output_path, metavar="<path>", help="Write the build context(s) here."
    ),
    all_: bool = typer.Option(False, "--all", help="Every release and variant (default options) into dockerfiles/."),
    check: bool = typer.Option(
        False, "--check", help="With --all: fail when dockerfiles/ differs from a fresh render."
    ),
) -> None:
    """Render Dockerfiles and build contexts from the catalog."""
    render = check_render_args(release, variant, render, all_, check)
    if all_:
        if not run_render_all(_catalog(), output, check):
            raise typer.Exit(1)
        return
    dockerfile = run_render(_catalog().get(release), variant, render, output)
    if dockerfile is not None:  # no -o: the one Dockerfile on stdout
        print(dockerfile, end="")


@app.command()
def lock(
    release: Optional[str] = typer.Option(None, "--release", "-r", help="Only this release (default: all)."),
    variant: Optional[str] = typer.Option(None, "--variant", "-v", help="Only this variant (default: all)."),
    check: bool = typer.Option(
        False, "--check", help="No network: exit 1 when a lock is missing, stray or made from other inputs."
    ),
    upgrade: bool = typer.Option(
        False,
        "--upgrade",
        help="Resolve every lock afresh (default: only missing or changed ones, keeping their versions where they fit).",
    ),
) -> None:
    """Lock the Python packages of every buildable release variant and Python, with hashes (uv)."""
    if not run_lock(_catalog(), release, variant, check, upgrade):
        raise typer.Exit(1)


@app.command()
@with_build_settings
@with_progress
def base(
    release: str = typer.Option(..., "--release", "-r", help="Release whose offline base to build."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Build again even when the tag exists."),
    settings=None,
    print_recipe: bool = typer.Option(False, "--print", help="Print the recipe Dockerfile and its tag; build nothing."),
    progress=None,
    as_json: bool = BASE_JSON,
) -> None:
    """Build (or find) the offline CUDA base of a release: debootstrap + Debian's CUDA toolkit."""
    plan = plan_base(_catalog(), release, rebuild, settings.backend)
    if print_recipe:
        return print_base_recipe(plan, as_json, settings)
    run_base(plan, _engine, settings(), progress=progress, as_json=as_json)


@app.command()
@with_render_options
def bake(
    release: str = RELEASE,
    variant: Optional[str] = typer.Option(None, "--variant", "-v", help="One variant (default: every buildable one)."),
    render=None,
    output: Path = typer.Option(
        ...,
        "-o",
        "--output",
        parser=outputdir.output_path,
        metavar="<path>",
        help="Write the build contexts and docker-bake.json here.",
    ),
    build_id: Optional[str] = typer.Option(None, "--build-id", help="Build id (default: UTC timestamp)."),
    print_: bool = typer.Option(False, "--print", help="Also print the bake definition (JSON) on stdout."),
) -> None:
    """Write a release's variants and their offline base as one `docker buildx bake` definition."""
    path, text = run_bake(_catalog().get(release), variant, render, output, build_id)
    print(text if print_ else path, end="" if print_ else "\n")


@app.command()
@with_render_options
@with_build_settings
@with_registry_credentials
@with_progress
def build(
    release: str = RELEASE,
    variant: Optional[str] = typer.Option(None, "--variant", "-v", help="Variant (default tf2-py3 when it exists)."),
    all_variants: bool = typer.Option(False, "--all", help="Every buildable variant (one bake on BuildKit)."),
    builders: Optional[str] = BUILDERS,
    sbom_: bool = SBOM,
    runtime: bool = RUNTIME,
    runtime_only: bool = RUNTIME_ONLY,
    render=None,
    tag: Optional[List[str]] = typer.Option(
        None, "--tag", "-t", help="Tag(s) instead of the release and build-id tags."
    ),
    build_id: Optional[str] = typer.Option(None, "--build-id", help="Build id (default: UTC timestamp)."),
    no_cache: bool = NO_CACHE,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be built; build nothing."),
    platform: str = PLATFORM,
    settings=None,
    bake_ca: bool = typer.Option(
        False, "--bake-ca", help="Also install the --ca-bundle files in the image's trust store."
    ),
    compile_cache: Optional[str] = COMPILE_CACHE,
    build_arg: Optional[List[str]] = BUILD_ARG,
    push: bool = PUSH,
    registry: Optional[str] = PUSH_REGISTRY,
    sign: Optional[Path] = SIGN,
    key_password_env: str = KEY_PASSWORD_ENV,
    credentials=None,
    insecure_registry: bool = INSECURE_REGISTRY,
    progress=None,
    as_json: bool = BUILD_JSON,
) -> None:
    """Build release images on the Docker engine (tagged only when the build succeeds)."""
    plan = plan_build(
        _catalog(),
        BuildArgs(
            release=release,
            variant=variant,
            all_variants=all_variants,
            **render,
            tags=tuple(tag or ()),
            build_id=build_id,
            platform=platform,
            no_cache=no_cache,
            compile_cache=compile_cache,
            push=push,
            registry=registry,
            build_args=tuple(build_arg or ()),
            insecure_registry=insecure_registry,
            baked_ca=baked_ca(bake_ca, settings.ca_bundle),
            builders=builders,
            sbom=sbom_,
            sign=sign,
            key_password_env=key_password_env,
            runtime=runtime or runtime_only,
            runtime_only=runtime_only,
            backend=settings.backend,
        ),
    )
    run_build(
        plan,
        _engine,
        settings(),
        credentials() if plan.push else None,
        dry_run=dry_run,
        progress=progress,
        as_json=as_json,
    )


@app.command("test")
def test_image(
    image: str = typer.Argument(..., help="Image to test."),
    tests: Optional[List[Path]] = typer.Option(None, "--tests", help="More test files or directories (repeatable)."),
    select: Optional[str] = typer.Option(None, "-k", help="Only tests matching this pytest expression."),
) -> None:
    """Run the conformance suite (pytest-testinfra) against a container of IMAGE."""
    code = run_tests(image, list(tests or []), select, _engine)
    if code != 0:
        raise typer.Exit(code)


@app.command()
def inspect(
    image: str = typer.Argument(..., help="Image to describe."),
    as_json: bool = JSON,
    coverage: bool = typer.Option(
        False,
        "--coverage",
        help="Print the GPU coverage table: per compute capability and CUDA binary, native SASS, PTX JIT or none.",
    ),
    cuda_cc: Optional[str] = typer.Option(None, "--cuda-cc", help="Also ask about these capabilities (e.g. 9.0,12.0)."),
) -> None:
    """What IMAGE holds, read from a container of it: framework, versions, libraries, coverage."""
    wanted = parse_capabilities(cuda_cc)  # the options first: with no engine, a bad one is still its own line
    check_ref(image, "image", image_id=True)
    print(queries.inspect_text(_engine, image, wanted, coverage, as_json))


@app.command()
def doctor(release: Optional[str] = DOCTOR_RELEASE, as_json: bool = JSON) -> None:
    """Check the machine: engine, API version, storage driver, BuildKit, disk, tools, GPU."""
    found = builder.cli.doctor.checks(_catalog().get(release) if release else None)
    text, healthy = doctor_report.report(found)
    print(json.dumps(doctor_report.report_json(found), indent=2) if as_json else text)
    if not healthy:
        raise typer.Exit(1)


@app.command()
@with_build_settings
@with_registry_credentials
@with_derive_changes
@with_progress
def derive(
    from_: str = typer.Option(..., "--from", help="The built image to start from."),
    tag: str = typer.Option(..., "--tag", "-t", help="Tag of the derived image."),
    changes=None,
    compile_cache: Optional[str] = COMPILE_CACHE,
    no_cache: bool = NO_CACHE,
    no_test: bool = typer.Option(False, "--no-test", help="Tag without running the conformance suite first."),
    sbom_: bool = SBOM,
    build_arg: Optional[List[str]] = BUILD_ARG,
    push: bool = PUSH,
    registry: Optional[str] = PUSH_REGISTRY,
    insecure_registry: bool = INSECURE_REGISTRY,
    settings=None,
    credentials=None,
    progress=None,
    as_json: bool = DERIVE_JSON,
) -> None:
    """Derive an image: patch and rebuild the framework with nvbuild.sh, and/or add packages.
    Patches are tried on the parent's source first; the image is tested, then tagged."""
    plan = plan_derive(
        from_,
        tag,
        **changes,
        compile_cache=compile_cache,
        no_cache=no_cache,
        test=not no_test,
        sbom=sbom_,
        backend=settings.backend,
        build_args=tuple(build_arg or ()),
        push=push,
        registry=registry,
        insecure_registry=insecure_registry,
    )
    run_derive(
        plan,
        _engine,
        settings(),
        _catalog(),
        progress=progress,
        as_json=as_json,
        creds=credentials() if plan.push else None,
    )


@app.command()
@with_registry_credentials
def push(
    image: str = typer.Argument(..., help="Local image to push."),
    registry: Optional[str] = PUSH_REGISTRY_OF_PUSH,
    tag: Optional[str] = PUSH_TAG,
    credentials=None,
    insecure_registry: bool = INSECURE_REGISTRY,
    tries: int = TRIES,
    as_json: bool = typer.Option(False, "--json", help="Report digest, bytes uploaded and layers as JSON."),
    quiet: bool = PUSH_QUIET,
    sign: Optional[Path] = SIGN,
    key_password_env: str = KEY_PASSWORD_ENV,
) -> None:
    """Push IMAGE to a registry, verify the digest through the registry API, print REF@DIGEST."""
    plan = plan_push(image, registry, tag, tries, insecure_registry, sign, key_password_env)
    run_push(plan, _engine, credentials(), progress=quiet_progress(quiet), as_json=as_json)


@app.command()
def sbom(
    image: str = typer.Argument(..., help="Local image (one the builder made)."),
    output: Optional[Path] = typer.Option(
        None, "-o", "--output", parser=outputdir.output_path, metavar="<path>", help="Write here, not to stdout."
    ),
) -> None:
    """The image's SBOM (CycloneDX JSON): syft's packages plus the parts compiled in the image."""
    text = queries.sbom_text(_engine, image, output)
    if text is not None:  # no -o: on stdout
        print(text)


@app.command()
@with_registry_credentials
def verify(
    ref: str = typer.Argument(..., help="REGISTRY/NAME:TAG (or @DIGEST) to check."),
    key: Path = typer.Option(..., "--key", help="cosign public key."),
    credentials=None,
    insecure_registry: bool = INSECURE_REGISTRY,
    as_json: bool = JSON,
) -> None:
    """Check REF's signature, SBOM and provenance against KEY (exit 1 on any mismatch)."""
    print(queries.verified_text(ref, key, credentials(), insecure_registry, _catalog(), as_json))


app.add_typer(cache_app, name="cache")
app.add_typer(catalog_app, name="catalog")


def main(argv: list[str] | None = None) -> int:
    """Entry point: turn every expected failure into one line on stderr and an exit code."""
    return entry.main(app, argv)


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()

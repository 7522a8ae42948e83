"""The `builder` command line. Results go to stdout, logs and errors to stderr; every
user error is one line and exit code 2 (see `main`). Heavy modules are imported inside
the commands so that `builder --help` starts fast.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

# typer 0.2x vendors click; fall back to click itself on older typer.
try:
    from typer._click import exceptions as click_exc  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    from click import exceptions as click_exc  # type: ignore[no-redef]

from builder.engine import Interrupted
from builder.errors import CatalogError, UserError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Build NGC-style GPU TensorFlow container images from a release catalog.",
)


def _catalog():
    """The shipped catalog, or the directory BUILDER_CATALOG names (a private catalog)."""
    from builder import catalog

    return catalog.load(os.environ.get("BUILDER_CATALOG") or catalog.RELEASES_DIR)


def _echo_err(message: str) -> None:
    """Every message and error line goes out through here, credentials redacted."""
    from builder.errors import redact

    # Undecodable argv bytes come back as lone surrogates: shown escaped, never a crash.
    print(redact(message).encode("utf-8", "backslashreplace").decode("utf-8"), file=sys.stderr, flush=True)


def _hold(resource):
    """Enter a context manager (a lock) until the running command ends."""
    try:
        from typer._click.globals import get_current_context  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover
        from click import get_current_context
    return get_current_context().with_resource(resource)


@app.command()
def releases(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List the releases in the catalog."""
    cat = _catalog()
    rows = []
    for r in cat.releases.values():
        rows.append({
            "release": r.name, "os": f"{r.os_distro} {r.os_version}", "python": r.python,
            "cuda": r.cuda, "variants": {v.name: f"{v.framework_name} {v.framework_version}"
                                         for v in r.variants.values()},
            "offline_base": f"{r.offline.debian}/cuda{r.offline.cuda}/py{r.offline.python}",
            "parent": r.parent,
        })
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    header = ("RELEASE", "OS", "PYTHON", "CUDA", "VARIANTS", "OFFLINE BASE")
    table = [header] + [(row["release"], row["os"], row["python"], row["cuda"],
                         ", ".join(f"{k} ({v})" for k, v in row["variants"].items()),
                         row["offline_base"]) for row in rows]
    widths = [max(len(str(line[i])) for line in table) for i in range(len(header))]
    for line in table:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(line, widths)).rstrip())


@app.command()
def show(release: str = typer.Argument(..., help="Release name, e.g. 21.08."),
         as_json: bool = typer.Option(False, "--json", help="JSON instead of YAML.")) -> None:
    """Show a release as resolved through its parents and validated."""
    import yaml

    spec = dict(_catalog().get(release).resolved)
    spec.pop("abstract", None)
    if as_json:
        print(json.dumps(spec, indent=2, sort_keys=False))
    else:
        print(yaml.safe_dump(spec, sort_keys=False), end="")


def _options(cuda_cc, xla, gcp, hdfs, env, base, repo, release=None):
    from builder.base_recipe import BaseRecipe
    from builder.render import RenderOptions

    offline_tag = BaseRecipe(release.offline).tag if release is not None else None
    return RenderOptions(cuda_cc=cuda_cc, xla=xla, gcp=gcp, hdfs=hdfs,
                         env=RenderOptions.parse_env(env or []), base=base,
                         repository=repo, offline_base_image=offline_tag)


@app.command()
def render(
    release: Optional[str] = typer.Option(None, "--release", "-r", help="Release, e.g. 21.08."),
    variant: Optional[str] = typer.Option(None, "--variant", "-v", help="Variant, e.g. tf2-py3 (default: all)."),
    cuda_cc: Optional[str] = typer.Option(None, "--cuda-cc", help="Compute capabilities: 7.0,8.0 | 70,80 | all | local."),
    xla: Optional[bool] = typer.Option(None, "--xla/--no-xla", help="Build the XLA path (default: the release's)."),
    gcp: Optional[bool] = typer.Option(None, "--gcp/--no-gcp", help="Build gs:// support (default: the release's)."),
    hdfs: Optional[bool] = typer.Option(None, "--hdfs/--no-hdfs", help="Build hdfs:// support (default: the release's)."),
    env: Optional[List[str]] = typer.Option(None, "--env", help="Extra or changed env default NAME=VALUE (repeatable)."),
    base: str = typer.Option("auto", "--base", help="auto | upstream | offline | an image reference."),
    repo: Optional[str] = typer.Option(None, "--repo", help="Image repository (default: the release's)."),
    framework_src: Optional[Path] = typer.Option(None, "--framework-src", help="Framework source tree to build (default: framework-src/)."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the build context(s) here."),
    all_: bool = typer.Option(False, "--all", help="Every release and variant (default options) into dockerfiles/."),
    check: bool = typer.Option(False, "--check", help="With --all: fail when dockerfiles/ differs from a fresh render."),
) -> None:
    """Render Dockerfiles and build contexts from the catalog."""
    from builder import buildcontext, outputdir, paths
    from builder.render import committed_path, render as do_render

    cat = _catalog()
    if check and not all_:
        raise UserError("--check goes with --all")
    if all_:
        if release or variant or any(x is not None for x in (cuda_cc, xla, gcp, hdfs, repo, framework_src)) \
                or env or base != "auto":
            raise UserError("--all renders the catalog as it is; it takes no --release, --variant or render options")
        root = paths.project_root()
        if output is None and not check:  # concurrent `render --all` runs take turns
            _hold(outputdir.locked(root / "dockerfiles"))
        drift, written = [], 0
        expected = set()
        from builder import lock

        for rel in cat.releases.values():
            for v in rel.variants.values():
                if lock.refusal(rel, v):  # not buildable here: no Dockerfile pretends otherwise
                    continue
                rendered = do_render(rel, v, _options(None, None, None, None, [], "auto", None, rel))
                path = committed_path(root, rel.name, v.name)
                expected.add(path)
                if output is not None:
                    buildcontext.write(rendered, output / rel.name / v.name)
                    written += 1
                    continue
                current = path.read_text(encoding="utf-8") if path.exists() else None
                if current != rendered.dockerfile:
                    if check:
                        drift.append(str(path.relative_to(root)))
                    else:
                        path.parent.mkdir(parents=True, exist_ok=True)
                        outputdir.write_atomic(path, rendered.dockerfile)
                        written += 1
        # Only Dockerfiles of releases this catalog knows can be stale: a private catalog
        # (BUILDER_CATALOG) with a subset of the releases leaves the others alone.
        stale = sorted(p for p in (root / "dockerfiles").glob("*/*.Dockerfile")
                       if p not in expected and p.parent.name in cat.releases)
        if check:
            drift += [f"{p.relative_to(root)} (no such release variant)" for p in stale]
            if drift:
                _echo_err("dockerfiles/ differs from a fresh render (run `builder render --all`):")
                for d in drift:
                    _echo_err(f"  {d}")
                raise typer.Exit(1)
            print(f"dockerfiles/ matches the catalog ({len(expected)} Dockerfiles)")
            return
        if output is None:
            for p in stale:
                p.unlink()
        print(f"rendered {len(expected)} Dockerfiles, {written} changed" if output is None
              else f"wrote {written} build contexts under {output}")
        return

    if not release:
        raise UserError("give --release R (or --all)")
    rel = cat.get(release)
    if variant:
        variants = [rel.variant(variant)]
    else:  # every variant that can be built here; the others are named with the reason
        from builder import lock

        variants = []
        for v in rel.variants.values():
            reason = lock.refusal(rel, v)
            if reason:
                _echo_err(f"skipped {v.name}: {reason}")
            else:
                variants.append(v)
        if not variants:
            raise UserError(f"release {rel.name} has no variant that can be built here")
    opts = _options(cuda_cc, xla, gcp, hdfs, env, base, repo, rel)
    rendered_all = [do_render(rel, v, opts) for v in variants]  # all validated before any write
    if output is None:
        if len(rendered_all) > 1:
            raise UserError(f"release {rel.name} has {len(rendered_all)} variants: "
                            "give --variant to print one, or -o DIR to write them all")
        print(rendered_all[0].dockerfile, end="")
        return
    for rendered in rendered_all:
        dest = output if len(rendered_all) == 1 else output / rendered.variant
        buildcontext.write(rendered, dest, framework_src)
        _echo_err(f"wrote {dest}/Dockerfile ({rendered.meta['image']})")
        print(dest / "Dockerfile")


@app.command()
def lock(
    release: Optional[str] = typer.Option(None, "--release", "-r", help="Only this release (default: all)."),
    variant: Optional[str] = typer.Option(None, "--variant", "-v", help="Only this variant (default: all)."),
    check: bool = typer.Option(False, "--check", help="No network: exit 1 when a lock is missing, stray or made from other inputs."),
    upgrade: bool = typer.Option(False, "--upgrade", help="Resolve every lock afresh (default: only missing or changed ones, keeping their versions where they fit)."),
) -> None:
    """Lock the Python packages of every buildable release variant and Python, with hashes (uv)."""
    from builder import lock as lk

    if check and upgrade:
        raise UserError("--check and --upgrade exclude each other")
    cat = _catalog()
    root = lk.locks_dir()
    plan = lk.plan(cat, release, variant)
    for reason in plan.skipped:
        _echo_err(f"skipped {reason}")

    def shown(path: Path) -> Path:
        return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path

    where = shown(root)
    if check:
        problems = lk.check(plan, root)
        if problems:
            _echo_err(f"{where} differs from the catalog (run `builder lock`):")
            for p in problems:
                _echo_err(f"  {p}")
            raise typer.Exit(1)
        print(f"{where} matches the catalog ({len(plan.targets)} locks, {len(plan.horovod)} Horovod locks)")
        return
    written, current, removed = lk.write(plan, root, upgrade, _echo_err)
    for path in written:
        print(f"wrote {shown(path)}")
    for path in removed:
        print(f"removed {shown(path)} (stray)")
    _echo_err(f"locks: {len(written)} written, {current} up to date, {len(removed)} removed, "
              f"{len(plan.skipped)} variants skipped")


def _settings(apt_mirror, pip_index, ca_bundle, host_ca=False, credentials=(None, None, None, None)):
    """The build settings; mirror and index credentials come from a file or an
    environment variable (never argv) and are put into the URLs the build sees."""
    from builder import urls
    from builder.buildsettings import HOST_CA_BUNDLE, BuildSettings

    apt_file, apt_env, pip_file, pip_env = credentials
    urls_given = {}
    for url, what, file, env in ((apt_mirror, "--apt-mirror", apt_file, apt_env),
                                 (pip_index, "--pip-index", pip_file, pip_env)):
        creds = urls.read_credentials(file, env, what)
        if url is None:
            if creds is not None:
                raise UserError(f"{what}-credentials-file/-env go with {what} URL")
            continue
        urls.check_url(url, what, f"give them with {what}-credentials-file FILE or {what}-credentials-env NAME "
                                  "(one line USER:PASSWORD)")
        urls_given[what] = urls.with_credentials(url, creds)
    bundles = list(ca_bundle or ())
    if host_ca and HOST_CA_BUNDLE.is_file() and HOST_CA_BUNDLE not in bundles:
        bundles.append(HOST_CA_BUNDLE)
    settings = BuildSettings(apt_mirror=urls_given.get("--apt-mirror"), pip_index=urls_given.get("--pip-index"),
                             ca_bundles=tuple(bundles))
    settings.validate()
    return settings


def _engine():
    from builder.engine import DockerEngine

    return DockerEngine()


APT_MIRROR = typer.Option(None, "--apt-mirror", help="Debian mirror URL used while building (not kept in the image).")
PIP_INDEX = typer.Option(None, "--pip-index", help="pip index URL (not kept in the image; credentials: see below).")
APT_MIRROR_CREDS_FILE = typer.Option(None, "--apt-mirror-credentials-file",
                                     help="File whose first line is USER:PASSWORD for --apt-mirror.")
APT_MIRROR_CREDS_ENV = typer.Option(None, "--apt-mirror-credentials-env",
                                    help="Environment variable holding USER:PASSWORD for --apt-mirror.")
PIP_INDEX_CREDS_FILE = typer.Option(None, "--pip-index-credentials-file",
                                    help="File whose first line is USER:PASSWORD for --pip-index.")
PIP_INDEX_CREDS_ENV = typer.Option(None, "--pip-index-credentials-env",
                                   help="Environment variable holding USER:PASSWORD for --pip-index.")
CA_BUNDLE = typer.Option(None, "--ca-bundle", help="Extra CA bundle (PEM) for the build's downloads (repeatable; not kept).")
COMPILE_CACHE = typer.Option(None, "--compile-cache", help="Shared compile cache URL (builder cache serve).")
NO_CACHE = typer.Option(False, "--no-cache", help="Do not use the layer cache.")


def _check_ref(ref: str, what: str, image_id: bool = False) -> None:
    """REF must be an image reference by Docker's grammar (or, where allowed, an image id)."""
    from builder import grammar

    if image_id and grammar.IMAGE_ID.fullmatch(ref):
        return
    why = grammar.reference_problem(ref)
    if why:
        raise UserError(f"{what} {grammar.shown(ref)} {why}")


def _check_compile_cache(url: Optional[str]) -> None:
    from builder import urls

    if url:  # it is a build arg: credentials in it would land in docker history and the log
        urls.check_url(url, "--compile-cache", "and a compile-cache URL is a build argument, so they would also land "
                       "in docker history and the build log: builds on the cache's own machine write without "
                       "credentials (see `builder cache serve --help`)")


def _conformance(image: str, extra: list[str], select: Optional[str] = None, stdout=None) -> int:
    """Run the conformance suite (plus extra test paths) against IMAGE; return pytest's code."""
    from builder.conformance import runner

    return runner.run(image, extra, select, stdout=stdout)


HOST_CA = typer.Option(True, "--host-ca/--no-host-ca",
                       help="Let the build's downloads trust what this machine trusts (its CA bundle; not kept).")

USERNAME = typer.Option(None, "--username", help="Registry user name (the password never goes on the command line).")
USERNAME_ENV = typer.Option(None, "--username-env", help="Environment variable holding the registry user name.")
PASSWORD_ENV = typer.Option(None, "--password-env", help="Environment variable holding the registry password or token.")
PASSWORD_STDIN = typer.Option(False, "--password-stdin", help="Read the registry password from standard input.")
INSECURE_REGISTRY = typer.Option(False, "--insecure-registry",
                                 help="Allow a registry without TLS or with an untrusted certificate (then no credentials are sent).")



@app.command()
def base(
    release: str = typer.Option(..., "--release", "-r", help="Release whose offline base to build."),
    rebuild: bool = typer.Option(False, "--rebuild", help="Build again even when the tag exists."),
    apt_mirror: Optional[str] = APT_MIRROR,
    pip_index: Optional[str] = PIP_INDEX,
    apt_mirror_credentials_file: Optional[Path] = APT_MIRROR_CREDS_FILE,
    apt_mirror_credentials_env: Optional[str] = APT_MIRROR_CREDS_ENV,
    pip_index_credentials_file: Optional[Path] = PIP_INDEX_CREDS_FILE,
    pip_index_credentials_env: Optional[str] = PIP_INDEX_CREDS_ENV,
    ca_bundle: Optional[List[Path]] = CA_BUNDLE,
    host_ca: bool = HOST_CA,
    print_recipe: bool = typer.Option(False, "--print", help="Print the recipe Dockerfile and its tag; build nothing."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines."),
) -> None:
    """Build (or find) the offline CUDA base of a release: debootstrap + Debian's CUDA toolkit."""
    from builder.base import ensure_base
    from builder.base_recipe import BaseRecipe

    rel = _catalog().get(release)
    recipe = BaseRecipe(rel.offline)
    if print_recipe:
        print(recipe.dockerfile(), end="")
        _echo_err(f"tag: {recipe.tag}")
        return
    settings = _settings(apt_mirror, pip_index, ca_bundle, host_ca,
                         (apt_mirror_credentials_file, apt_mirror_credentials_env,
                          pip_index_credentials_file, pip_index_credentials_env))
    tag, built = ensure_base(_engine(), recipe, settings, rebuild=rebuild, quiet=quiet)
    if not built:
        _echo_err(f"base: {tag} exists (recipe unchanged); nothing to do")
    print(tag)


@app.command()
def build(
    release: str = typer.Option(..., "--release", "-r", help="Release, e.g. 21.08."),
    variant: Optional[str] = typer.Option(None, "--variant", "-v", help="Variant (default tf2-py3 when it exists)."),
    all_variants: bool = typer.Option(False, "--all", help="Every variant of the release."),
    cuda_cc: Optional[str] = typer.Option(None, "--cuda-cc", help="Compute capabilities: 7.0,8.0 | 70,80 | all | local."),
    xla: Optional[bool] = typer.Option(None, "--xla/--no-xla"),
    gcp: Optional[bool] = typer.Option(None, "--gcp/--no-gcp"),
    hdfs: Optional[bool] = typer.Option(None, "--hdfs/--no-hdfs"),
    env: Optional[List[str]] = typer.Option(None, "--env", help="Extra or changed env default NAME=VALUE."),
    base_: str = typer.Option("auto", "--base", help="auto | upstream | offline | an image reference."),
    repo: Optional[str] = typer.Option(None, "--repo", help="Image repository (default: the release's)."),
    tag: Optional[List[str]] = typer.Option(None, "--tag", "-t", help="Tag(s) instead of the release and build-id tags."),
    build_id: Optional[str] = typer.Option(None, "--build-id", help="Build id (default: UTC timestamp)."),
    framework_src: Optional[Path] = typer.Option(None, "--framework-src", help="Framework source tree (default framework-src/)."),
    no_cache: bool = NO_CACHE,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be built; build nothing."),
    apt_mirror: Optional[str] = APT_MIRROR,
    pip_index: Optional[str] = PIP_INDEX,
    apt_mirror_credentials_file: Optional[Path] = APT_MIRROR_CREDS_FILE,
    apt_mirror_credentials_env: Optional[str] = APT_MIRROR_CREDS_ENV,
    pip_index_credentials_file: Optional[Path] = PIP_INDEX_CREDS_FILE,
    pip_index_credentials_env: Optional[str] = PIP_INDEX_CREDS_ENV,
    ca_bundle: Optional[List[Path]] = CA_BUNDLE,
    host_ca: bool = HOST_CA,
    bake_ca: bool = typer.Option(False, "--bake-ca", help="Also install the --ca-bundle files in the image's trust store."),
    compile_cache: Optional[str] = COMPILE_CACHE,
    push_to: Optional[str] = typer.Option(None, "--push", help="Push the built tags to this registry (HOST[:PORT][/NS])."),
    username: Optional[str] = USERNAME,
    username_env: Optional[str] = USERNAME_ENV,
    password_env: Optional[str] = PASSWORD_ENV,
    password_stdin: bool = PASSWORD_STDIN,
    insecure_registry: bool = INSECURE_REGISTRY,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines."),
) -> None:
    """Build release images on the Docker engine (tagged only when the build succeeds)."""
    from builder import build as b, grammar
    from builder.engine import BuildError, Interrupted
    from builder.render import render as do_render

    cat = _catalog()
    rel = cat.get(release)
    if all_variants and variant:
        raise UserError("--all and --variant exclude each other")
    if all_variants and tag:
        raise UserError("--tag names one image; it cannot go with --all")
    if variant:
        variants = [rel.variant(variant)]
    elif all_variants:
        variants = list(rel.variants.values())
    else:
        variants = [rel.variant("tf2-py3" if "tf2-py3" in rel.variants else next(iter(rel.variants)))]
    bid = b.default_build_id() if build_id is None else build_id
    if not grammar.BUILD_ID.fullmatch(bid):
        raise UserError(f"--build-id {grammar.shown(bid)} may hold only letters, digits, '_', '.' and '-' "
                        "(64 at most, not starting with '.' or '-')")
    for t in tag or []:
        _check_ref(t, "--tag")
    if not tag:  # each variant is also tagged TAG-BUILD_ID: that tag must be valid too
        for v in variants:
            why = grammar.tag_problem(f"{v.tag}-{bid}")
            if why:
                raise UserError(f"the build-id tag {grammar.shown(f'{v.tag}-{bid}')} {why}: give a shorter --build-id")
    if framework_src is not None and not framework_src.is_dir():
        raise UserError(f"--framework-src {framework_src} is not a directory")
    from builder import buildcontext, paths

    buildcontext.check_tree(framework_src or paths.framework_src_dir())  # no host files in the image
    b.validate_base_option(base_)
    _check_compile_cache(compile_cache)
    creds = None
    if push_to:
        from builder import registry as reg

        reg.target_ref("x:y", push_to, None)  # validate the registry before building
        creds = reg.credentials_from(username, username_env, password_env, password_stdin)
        reg.check_before_build(reg.registry_host(push_to), creds, insecure_registry)
    settings = _settings(apt_mirror, pip_index, ca_bundle, host_ca,
                         (apt_mirror_credentials_file, apt_mirror_credentials_env,
                          pip_index_credentials_file, pip_index_credentials_env))
    if bake_ca and not ca_bundle:
        raise UserError("--bake-ca needs at least one --ca-bundle")
    opts = _options(cuda_cc, xla, gcp, hdfs, env, base_, repo, rel)
    if bake_ca:
        import dataclasses

        opts = dataclasses.replace(opts, baked_ca=tuple(Path(p).read_text() for p in ca_bundle or ()))
    skipped = []
    if all_variants:  # --all builds what can be built here and says why it skips the rest
        from builder import lock

        for v in list(variants):
            reason = lock.refusal(rel, v)
            if reason:
                skipped.append(v)
                variants.remove(v)
                _echo_err(f"skipped {v.name}: {reason}")
    for v in variants:  # every render problem is reported before anything is built
        do_render(rel, v, opts)
    engine = _engine()
    choice = b.choose_base(engine, rel, base_, dry_run)
    _echo_err(f"base: {choice.image} ({choice.reason})")
    if dry_run:
        for v in variants:
            image = do_render(rel, v, opts).meta["image"]
            print(json.dumps({"release": rel.name, "variant": v.name, "base": choice.image,
                              "base_kind": choice.kind, "build_base": choice.needs_build,
                              "tags": tag or [image, f"{image}-{bid}"], "build_id": bid}))
        return
    b.prepare_base(engine, rel, choice, settings, quiet)
    outcomes = []
    for v in variants:
        try:
            outcome = b.build_variant(engine, rel, v, opts, base=choice, settings=settings, build_id=bid,
                                      tags=list(tag or []), nocache=no_cache, framework_src=framework_src,
                                      quiet=quiet, compile_cache=compile_cache)
            for ref in outcome.refs:
                print(ref)
            if push_to:
                for ref in outcome.refs:
                    _push(ref, push_to, None, creds, 4, quiet, False, insecure_registry)
        except BuildError as exc:
            _echo_err(exc.report())
            outcome = b.BuildOutcome(rel.name, v.name, error=exc.message)
            if not all_variants:
                raise typer.Exit(2 if exc.disk_full else 1)  # a full disk is the user's to fix
        except Interrupted:
            raise
        outcomes.append(outcome)
    if all_variants:
        failed = [o for o in outcomes if o.error]
        _echo_err(f"summary: {len(outcomes) - len(failed)} built, {len(failed)} failed, {len(skipped)} skipped")
        for o in outcomes:
            _echo_err(f"  {o.release}/{o.variant}: " + (f"FAILED ({o.error})" if o.error else
                                                         f"built in {o.seconds:.0f}s -> {', '.join(o.refs)}"))
        if failed:
            raise typer.Exit(1)


@app.command("test")
def test_image(
    image: str = typer.Argument(..., help="Image to test."),
    tests: Optional[List[Path]] = typer.Option(None, "--tests", help="More test files or directories (repeatable)."),
    select: Optional[str] = typer.Option(None, "-k", help="Only tests matching this pytest expression."),
) -> None:
    """Run the conformance suite (pytest-testinfra) against a container of IMAGE."""
    from builder import conformance, inspect as insp
    from builder.conformance import runner

    if select is not None:
        runner.check_select(select)
    labels = insp.labels_of(_engine(), image)
    suite = Path(conformance.__file__).parent
    for t in tests or []:
        if not t.exists():
            raise UserError(f"--tests {t}: no such file or directory")
    extra = [str(t) for t in tests or []]
    # A derived image re-runs its parent's suite (the same one) plus its own checks.
    if labels.get(f"{insp.LABEL}.parent") and (suite / "derived").is_dir():
        extra.append(str(suite / "derived"))
    _echo_err(f"test: {image}: {' '.join([str(suite), *extra])}")
    code = _conformance(image, extra, select)
    if code != 0:
        raise typer.Exit(code)


@app.command()
def inspect(
    image: str = typer.Argument(..., help="Image to describe."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    coverage: bool = typer.Option(False, "--coverage", help="Print the GPU coverage table: per compute "
                                  "capability and CUDA binary, native SASS, PTX JIT or none."),
    cuda_cc: Optional[str] = typer.Option(None, "--cuda-cc", help="Also ask about these capabilities (e.g. 9.0,12.0)."),
) -> None:
    """What IMAGE holds, read from a container of it: framework, versions, libraries, coverage."""
    from builder import cuda_arch, inspect as insp

    extra: list[str] = []
    if cuda_cc:
        try:
            parsed = cuda_arch.parse(cuda_cc)
        except cuda_arch.ArchError as exc:
            raise UserError(f"--cuda-cc: {exc}") from None
        if isinstance(parsed, str):
            raise UserError("--cuda-cc takes a list of capabilities here")
        extra = parsed
    report = insp.describe(_engine(), image, extra)
    raw = report.pop("_report")
    if coverage:
        print(insp.coverage_text(raw))
        return
    if as_json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return
    for key in ("coverage_table", "cuda_binaries", "tensorflow_build_info", "extension_build_info"):
        report.pop(key)
    for key, value in report.items():
        if isinstance(value, dict):
            print(f"{key}:")
            for k, v in value.items():
                print(f"  {k}: {v}")
        else:
            print(f"{key}: {value}")


@app.command()
def doctor() -> None:
    """Check the machine: engine, API version, storage driver, BuildKit, disk, tools, GPU."""
    from builder import doctor as d

    text, healthy = d.report(d.checks())
    print(text)
    if not healthy:
        raise typer.Exit(1)


@app.command()
def derive(
    from_: str = typer.Option(..., "--from", help="The built image to start from."),
    tag: str = typer.Option(..., "--tag", "-t", help="Tag of the derived image."),
    patch: Optional[List[Path]] = typer.Option(None, "--patch", help="Patch for tensorflow-source (patch -p1; repeatable)."),
    horovod_patch: Optional[List[Path]] = typer.Option(None, "--horovod-patch", help="Patch for Horovod's source (patch -p1 at the sdist root; repeatable)."),
    apt: Optional[List[str]] = typer.Option(None, "--apt", help="Debian package to add (repeatable)."),
    pip: Optional[List[str]] = typer.Option(None, "--pip", help="pip requirement to add (repeatable)."),
    nvbuild_args: Optional[str] = typer.Option(None, "--nvbuild-args", help="Arguments for nvbuild.sh, e.g. \"--sm 8.6\"."),
    compile_cache: Optional[str] = COMPILE_CACHE,
    no_cache: bool = NO_CACHE,
    no_test: bool = typer.Option(False, "--no-test", help="Tag without running the conformance suite first."),
    apt_mirror: Optional[str] = APT_MIRROR,
    pip_index: Optional[str] = PIP_INDEX,
    apt_mirror_credentials_file: Optional[Path] = APT_MIRROR_CREDS_FILE,
    apt_mirror_credentials_env: Optional[str] = APT_MIRROR_CREDS_ENV,
    pip_index_credentials_file: Optional[Path] = PIP_INDEX_CREDS_FILE,
    pip_index_credentials_env: Optional[str] = PIP_INDEX_CREDS_ENV,
    ca_bundle: Optional[List[Path]] = CA_BUNDLE,
    host_ca: bool = HOST_CA,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines."),
) -> None:
    """Derive an image: patch and rebuild the framework with nvbuild.sh, and/or add packages.
    Patches are tried on the parent's source first; the image is tested, then tagged."""
    from builder import derive as dv
    from builder.build import cache_dir
    from builder.engine import BuildError

    spec = dv.DeriveSpec(parent=from_, patches=list(patch or []), horovod_patches=list(horovod_patch or []),
                         apt=list(apt or []), pip=list(pip or []),
                         nvbuild_args=dv.parse_nvbuild_args(nvbuild_args))
    spec.validate()
    _check_ref(from_, "--from", image_id=True)
    _check_ref(tag, "--tag")
    _check_compile_cache(compile_cache)
    settings = _settings(apt_mirror, pip_index, ca_bundle, host_ca,
                         (apt_mirror_credentials_file, apt_mirror_credentials_env,
                          pip_index_credentials_file, pip_index_credentials_env))
    engine = _engine()
    from builder import inspect as insp

    insp.labels_of(engine, from_)  # a builder image, or a clear error
    dv.check_capabilities(spec, from_, engine.inspect(from_))
    try:
        dv.check_patches(engine, from_, spec.patches)
        dv.check_horovod_patches(engine, from_, spec.horovod_patches)
    except dv.PatchError as exc:
        _echo_err(f"error: {exc}")
        for line in exc.details.splitlines():
            _echo_err(f"  {line}")
        raise typer.Exit(2)
    logs = cache_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"derive-{tag.replace('/', '_').replace(':', '_')}.log"
    try:
        image_id = dv.build(engine, spec, from_, settings, compile_cache, no_cache, log_path, quiet)
        image_id = dv.verify_and_label(engine, _catalog(), image_id, log_path)
    except BuildError as exc:
        _echo_err(exc.report())
        raise typer.Exit(1)
    if not no_test:
        from builder import conformance

        derived_suite = str(Path(conformance.__file__).parent / "derived")
        if _conformance(image_id, [derived_suite], stdout=sys.stderr) != 0:
            _echo_err(f"error: the derived image {image_id[:19]} failed its conformance tests; {tag} was not moved")
            raise typer.Exit(1)
    engine.tag(image_id, tag)
    print(tag)


def _push(image: str, registry: str, tag: Optional[str], creds, tries: int, quiet: bool, as_json: bool,
          insecure: bool = False) -> None:
    from builder import registry as reg

    ref = reg.target_ref(image, registry, tag)
    try:
        result = reg.Pusher(_engine(), tries=tries, quiet=quiet).push(image, ref, creds, insecure)
    except reg.PushError as exc:
        _echo_err(f"error: {exc}")
        raise typer.Exit(1)
    print(reg.write_report(result) if as_json else result.pinned)


@app.command()
def push(
    image: str = typer.Argument(..., help="Local image to push."),
    registry: str = typer.Option(..., "--registry", help="HOST[:PORT][/NAMESPACE] of the registry."),
    tag: Optional[str] = typer.Option(None, "--tag", help="Tag in the registry (default: the image's)."),
    username: Optional[str] = USERNAME,
    username_env: Optional[str] = USERNAME_ENV,
    password_env: Optional[str] = PASSWORD_ENV,
    password_stdin: bool = PASSWORD_STDIN,
    insecure_registry: bool = INSECURE_REGISTRY,
    tries: int = typer.Option(4, "--tries", help="Attempts for transient failures (backoff between)."),
    as_json: bool = typer.Option(False, "--json", help="Report digest, bytes uploaded and layers as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q"),
) -> None:
    """Push IMAGE to a registry, verify the digest through the registry API, print REF@DIGEST."""
    from builder import registry as reg

    if tries < 1:
        raise UserError("--tries must be at least 1")
    creds = reg.credentials_from(username, username_env, password_env, password_stdin)
    _push(image, registry, tag, creds, tries, quiet, as_json, insecure_registry)


cache_app = typer.Typer(help="The shared compile cache (nginx WebDAV) for ccache and bazel.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")
CACHE_DIR = typer.Option(None, "--dir", help="Cache directory (default ~/.cache/tfbuilder/compile-cache).")


@cache_app.command("serve")
def cache_serve(
    directory: Optional[Path] = CACHE_DIR,
    port: int = typer.Option(8742, "--port", help="TCP port (1-65535)."),
    listen: str = typer.Option("127.0.0.1", "--listen", "--address",
                               help="IP address to listen on (0.0.0.0 for other machines: their writes then need "
                                    "the write credential)."),
    max_size: str = typer.Option("20G", "--max-size", help="Keep the store under this size, oldest objects first."),
    max_object_size: str = typer.Option("512M", "--max-object-size", help="Largest object accepted (512M, 2G, ...)."),
    write_credentials_file: Optional[Path] = typer.Option(
        None, "--write-credentials-file",
        help="USER:PASSWORD (one line) for writes from other machines when listening beyond loopback "
             "(default: generated into DIR/.server/write-credentials)."),
    detach: bool = typer.Option(False, "--detach", "-d", help="Run in the background and return."),
) -> None:
    """Serve the compile cache; builds use it with --compile-cache URL (printed on stdout)."""
    from builder import cache

    server = cache.CacheServer.checked(directory or cache.default_dir(), port, listen, max_size, max_object_size,
                                       write_credentials_file)
    url = cache.serve(server, detach=detach)
    if detach:
        print(url)


@cache_app.command("stats")
def cache_stats(directory: Optional[Path] = CACHE_DIR,
                as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """Size of the cache and its hit rate."""
    from builder import cache

    s = cache.stats(cache.CacheServer.load(directory or cache.default_dir()))
    if as_json:
        print(json.dumps(s, indent=2))
        return
    print(f"{s['directory']}: {'running at ' + s['url'] if s['running'] else 'not running'}")
    print(f"  {s['objects']} objects, {s['size_bytes'] / 1e6:.1f} MB")
    print(f"  {s['lookups']} lookups: {s['hits']} hits, {s['misses']} misses (hit rate {s['hit_rate']:.0%}); "
          f"{s['stores']} stores, {s['store_errors']} refused")


@cache_app.command("stop")
def cache_stop(directory: Optional[Path] = CACHE_DIR) -> None:
    """Stop a detached cache server."""
    from builder import cache

    if not cache.stop(cache.CacheServer.load(directory or cache.default_dir())):
        raise UserError("no cache server is running for that directory")
    _echo_err("cache server stopped")


def main(argv: list[str] | None = None) -> int:
    """Entry point: turn every expected failure into one line on stderr and an exit code."""
    from builder import interrupts

    restore_signals = interrupts.install()  # before any work: every cleanup runs on SIGINT/SIGTERM
    try:
        return _main(argv)
    finally:
        restore_signals()


def _main(argv: list[str] | None) -> int:
    try:
        result = app(args=argv, standalone_mode=False, prog_name="builder")
        return result if isinstance(result, int) else 0
    except CatalogError as exc:
        _echo_err("error: invalid release catalog:")
        for problem in exc.problems:
            _echo_err(f"  {problem}")
        return exc.exit_code
    except UserError as exc:
        from builder.grammar import one_line

        _echo_err(f"error: {one_line(str(exc))}")  # a value quoted in the message cannot break the line
        return exc.exit_code
    except Interrupted as exc:
        _echo_err(f"interrupted ({exc}); no tag was moved")
        return exc.exit_code
    except click_exc.NoArgsIsHelpError as exc:  # bare `builder`: help on stderr
        _echo_err(exc.ctx.get_help() if exc.ctx else str(exc))
        return 2
    except (click_exc.UsageError, click_exc.ClickException) as exc:
        _echo_err(f"error: {exc.format_message()}")
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        _echo_err("interrupted")
        return 130
    except KeyboardInterrupt:
        _echo_err("interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug, not bad input: still one line unless asked for more
        if os.environ.get("BUILDER_DEBUG"):
            raise
        _echo_err(f"error: internal error: {type(exc).__name__}: {exc} "
                  "(run with BUILDER_DEBUG=1 for the traceback)")
        return 1


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()

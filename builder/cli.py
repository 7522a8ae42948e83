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
    print(message, file=sys.stderr, flush=True)


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
    from builder import buildcontext, paths
    from builder.render import committed_path, render as do_render

    cat = _catalog()
    if check and not all_:
        raise UserError("--check goes with --all")
    if all_:
        if release or variant or any(x is not None for x in (cuda_cc, xla, gcp, hdfs, repo, framework_src)) \
                or env or base != "auto":
            raise UserError("--all renders the catalog as it is; it takes no --release, --variant or render options")
        root = paths.project_root()
        drift, written = [], 0
        expected = set()
        for rel in cat.releases.values():
            for v in rel.variants.values():
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
                        path.write_text(rendered.dockerfile, encoding="utf-8")
                        written += 1
        stale = sorted(p for p in (root / "dockerfiles").glob("*/*.Dockerfile") if p not in expected)
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
    variants = [rel.variant(variant)] if variant else list(rel.variants.values())
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


def main(argv: list[str] | None = None) -> int:
    """Entry point: turn every expected failure into one line on stderr and an exit code."""
    try:
        result = app(args=argv, standalone_mode=False, prog_name="builder")
        return result if isinstance(result, int) else 0
    except CatalogError as exc:
        _echo_err("error: invalid release catalog:")
        for problem in exc.problems:
            _echo_err(f"  {problem}")
        return exc.exit_code
    except UserError as exc:
        _echo_err(f"error: {exc}")
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

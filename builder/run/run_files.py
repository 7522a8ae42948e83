"""The runs that need no engine: `builder lock`, `builder render` (one release, or
`--all` into dockerfiles/) and `builder bake` (a bake definition and its contexts)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from builder.catalog import Release, lock, lock_resolve
from builder.core import outputdir, paths
from builder.core.errors import UserError
from builder.core.output import Output
from builder.core.terminal import escape
from builder.image import bake, buildcontext, dockerfiles
from builder.plan import check_build_id, default_build_id
from builder.render import render_options
from builder.render.base_recipe import BaseRecipe
from builder.run import base


def run_lock(
    catalog, release: str | None, variant: str | None, check: bool, upgrade: bool, *, out: Output | None = None
) -> bool:
    """Write (or, with CHECK, compare) the hash-locked requirements; False when CHECK found
    the committed locks differ from the catalog."""
    out = out or Output()
    if check and upgrade:
        raise UserError("--check and --upgrade exclude each other")
    root = lock.locks_dir()
    if not check and not os.environ.get("BUILDER_CATALOG"):  # the shipped locks live in the package
        paths.require_checkout(
            "`builder lock` rewrites the shipped builder/locks/",
            "lock a private catalog (BUILDER_CATALOG=DIR writes DIR/locks)",
        )
    plan = lock.plan(catalog, release, variant)
    for reason in plan.skipped:
        out.say(f"skipped {reason}")
    where = lock_resolve.display_path(root)
    if check:
        problems = lock.check(plan, root)
        if problems:
            out.say(
                "\n".join([f"{where} differs from the catalog (run `builder lock`):", *(f"  {p}" for p in problems)])
            )
            return False
        out.result(f"{where} matches the catalog ({len(plan.targets)} locks, {len(plan.sdists)} component sdist locks)")
        return True
    written, current, removed = lock_resolve.write(plan, root, upgrade, out.say)
    for path in written:
        out.result(f"wrote {lock_resolve.display_path(path)}")
    for path in removed:
        out.result(f"removed {lock_resolve.display_path(path)} (stray)")
    out.say(
        f"locks: {len(written)} written, {current} up to date, {len(removed)} removed, "
        f"{len(plan.skipped)} variants skipped"
    )
    return True


def run_render(
    rel: Release, variant: str | None, render: dict, output: Path | None, *, out: Output | None = None
) -> str | None:
    """Render one release's variant (or every buildable one), all checked before any write.
    Without OUTPUT: return the one Dockerfile to print; with it, write each build context."""
    out = out or Output()
    options = {k: v for k, v in render.items() if k != "framework_src"}
    rendered_all = dockerfiles.render_release(rel, variant, render_options(rel, **options), out.say)
    if output is None:
        if len(rendered_all) > 1:
            raise UserError(
                f"release {rel.name} has {len(rendered_all)} variants: "
                "give --variant to print one, or -o DIR to write them all"
            )
        buildcontext.check_source(render["framework_src"])  # copied by -o and build: the same checks
        return rendered_all[0].dockerfile
    for rendered, path in zip(rendered_all, dockerfiles.write_contexts(rendered_all, output, render["framework_src"])):
        out.say(f"wrote {escape(str(path))} ({rendered.meta['image']})")
        out.result(str(path))
    return None


def run_bake(
    rel: Release, variant: str | None, render: dict, output: Path, build_id: str | None, *, out: Output | None = None
) -> tuple[Path, str]:
    """`builder bake`: every buildable variant's context (or VARIANT's), the offline base's
    recipe, and OUTPUT/docker-bake.json binding them; returns the file and its text. A
    bake resolves the base inside BuildKit, so `--base auto` means the offline base here."""
    out = out or Output()
    options = {k: v for k, v in render.items() if k != "framework_src"}
    if options.get("base", "auto") == "auto":
        options["base"] = "offline"
    bid = default_build_id() if build_id is None else build_id
    check_build_id(bid)
    rendered_all = dockerfiles.render_release(rel, variant, render_options(rel, **options), out.say)
    layout = bake.Layout(output.resolve())
    definition = bake.definition(rel, rendered_all, layout, bid)
    text = json.dumps(definition, indent=2) + "\n"
    buildcontext.check_source(render["framework_src"])  # all checked before any write
    try:
        with outputdir.locked(layout.root) as at:  # the user's DIR, held until the bake is written
            previous = outputdir.owned_files(at, shown=layout.root)
            outputdir.check_clashes(at, [bake.BAKE_FILE], previous, layout.root)
            for dest in [*(layout.variant(r) for r in rendered_all), layout.base(rel)]:
                outputdir.check_below(dest, layout.root)  # links on the way: refused before any write
            outputdir.claim(at, previous, {"bake": rel.name})  # a bake stopped halfway is still ours
            for rendered in rendered_all:  # below DIR, no link followed, nothing of the user's replaced
                buildcontext.write(rendered, layout.variant(rendered), render["framework_src"], root=layout.root)
                out.say(f"wrote {escape(str(layout.variant(rendered)))} ({rendered.meta['image']})")
            if bake.base_target(rel) in definition["target"]:  # not with --base upstream or IMAGE
                base.write_context(BaseRecipe.for_release(rel), layout.base(rel), root=layout.root)
            outputdir.install_texts(at, {bake.BAKE_FILE: text}, previous, {"bake": rel.name}, shown=layout.root)
    except OSError as exc:
        raise UserError(f"cannot write the bake definition to {layout.root}: {outputdir.oserror_text(exc)}") from None
    out.say(f"wrote {escape(str(layout.root / bake.BAKE_FILE))}")
    return layout.root / bake.BAKE_FILE, text


def run_render_all(catalog, output: Path | None, check: bool, *, out: Output | None = None) -> bool:
    """`render --all`: write (or, with CHECK, compare) dockerfiles/, or write every build
    context under OUTPUT; False when CHECK found drift. Writers of dockerfiles/ take turns."""
    out = out or Output()
    # dockerfiles/ (written, or checked) is the checkout's; build contexts (-o) need none
    root = (
        paths.project_root()
        if output is not None
        else paths.require_checkout(
            "`render --all` writes (--check: compares) the checkout's dockerfiles/", "give -o DIR for build contexts"
        )
    )
    writing = output is None and not check
    with outputdir.locked(root / "dockerfiles") if writing else contextlib.nullcontext():
        result = dockerfiles.sync_all(catalog, root, output, check)
    if result.drift:
        out.say(
            "\n".join(
                [
                    "dockerfiles/ differs from a fresh render (run `builder render --all`):",
                    *(f"  {d}" for d in result.drift),
                ]
            )
        )
        return False
    out.result(result.summary(check, output))
    return True

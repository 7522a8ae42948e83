"""`builder derive` as a plan: the derive spec checked, the tag, build arguments and push
plan; the parent image is read only when the plan runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from builder.core import paths
from builder.core.errors import UserError
from builder.core.grammar import check_ref
from builder.engine.buildsettings import BackendAsks
from builder.plan.build_args import check_build_args, parse_build_args
from builder.plan.derive import DeriveSpec, parse_nvbuild_args
from builder.plan.options_check import check_backend, check_compile_cache
from builder.plan.push_plan import PushPlan, push_ref


@dataclass(frozen=True)
class DerivePlan:
    parent: str
    tag: str
    spec: DeriveSpec
    compile_cache: str | None = None
    no_cache: bool = False
    test: bool = True
    sbom: bool = False  # make its SBOM once it is tagged (the CLI's default)
    user_build_args: dict[str, str] = field(default_factory=dict)  # --build-arg, checked against its Dockerfile
    push: PushPlan | None = None  # --push: where the tag goes once it is tagged

    @property
    def log_name(self) -> str:
        return f"derive-{self.tag.replace('/', '_').replace(':', '_')}.log"


def plan_derive(
    parent: str,
    tag: str,
    patches: Sequence[Path] = (),
    apt: Sequence[str] = (),
    pip: Sequence[str] = (),
    nvbuild_args: str | None = None,
    compile_cache: str | None = None,
    no_cache: bool = False,
    test: bool = True,
    sbom: bool = False,
    backend: BackendAsks = BackendAsks(),
    component_patches: Mapping[str, Sequence[Path]] | None = None,
    build_args: tuple[str, ...] = (),
    push: bool = False,
    registry: str | None = None,
    insecure_registry: bool = False,
) -> DerivePlan:
    check_backend(backend)
    if registry and not push:
        raise UserError("--registry says where --push pushes: give --push too")
    spec = DeriveSpec(
        parent=parent,
        patches=list(patches),
        component_patches={n: list(p) for n, p in (component_patches or {}).items()},
        apt=list(apt),
        pip=list(pip),
        nvbuild_args=parse_nvbuild_args(nvbuild_args),
    )
    spec.validate()
    check_ref(parent, "--from", image_id=True)
    check_ref(tag, "--tag", tag=True)
    check_compile_cache(compile_cache)
    user_args = parse_build_args(build_args, {"BASE_IMAGE": "--from"})
    # before the parent is read and --pip resolved: the derived Dockerfile's ARGs are the template's
    check_build_args(user_args, (paths.templates_dir() / "derived" / "Dockerfile.j2").read_text(encoding="utf-8"))
    pushed = PushPlan(tag, push_ref(tag, registry), 4, insecure_registry) if push else None
    return DerivePlan(parent, tag, spec, compile_cache, no_cache, test, sbom, user_build_args=user_args, push=pushed)

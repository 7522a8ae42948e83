"""`builder push` as a plan, and where a build's or a derive's --push sends its tag: every
check of the reference and the options, before any engine or registry."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from builder.core import grammar
from builder.core.contract import parse_reference
from builder.core.errors import UserError
from builder.core.grammar import check_ref
from builder.plan.options_check import check_password_env
from builder.registry import check_tries, own_ref, remote_reference, target_ref


@dataclass(frozen=True)
class PushPlan:
    image: str
    ref: str  # where it goes: REGISTRY/NAME:TAG
    tries: int = 4
    insecure: bool = False
    sign: Path | None = None  # --sign KEY: cosign private key
    key_password_env: str = "COSIGN_PASSWORD"


def plan_push(
    image: str,
    registry: str | None,
    tag: str | None = None,
    tries: int = 4,
    insecure: bool = False,
    sign: Path | None = None,
    key_password_env: str = "COSIGN_PASSWORD",
) -> PushPlan:
    """IMAGE to REGISTRY (HOST[:PORT][/NS]), or without one to the registry IMAGE's own
    reference names (docker push's way). TAG is a tag, or a whole reference
    HOST[:PORT]/NAME:TAG as `build -t` takes it (then no --registry)."""
    check_ref(image, "IMAGE", image_id=True)  # before the engine is asked for it
    if tag is not None and ("/" in tag or ":" in tag):  # no tag holds either: a reference
        ref = _push_reference(tag, registry)
    else:
        ref = target_ref(image, registry, tag) if registry else own_ref(image, tag)
    return PushPlan(image, ref, check_tries(tries), insecure, sign, check_password_env(key_password_env))


def _push_reference(ref: str, registry: str | None) -> str:
    """-t HOST[:PORT]/NAME:TAG: where the push goes, whole; checked as build's -t is."""
    if registry:
        raise UserError(f"-t {grammar.printable(ref[:255])} names its registry: give -t a bare tag with --registry")
    parsed = remote_reference(ref, "-t")
    if parsed.digest or not parsed.tag:
        raise UserError(f"-t {grammar.printable(ref[:255])}: give HOST[:PORT]/NAME:TAG (a tag to push under)")
    return ref


def push_ref(ref: str, registry: str | None) -> str:
    """Where --push sends REF: under --registry when given, else where REF itself names."""
    if registry:
        return target_ref(ref, registry, None)
    if parse_reference(ref).registry is None:
        raise UserError(
            f"--push: {grammar.printable(ref)} names no registry host: tag it HOST[:PORT]/NAME:TAG "
            "with -t, or give --registry HOST[:PORT][/NS]"
        )
    return ref

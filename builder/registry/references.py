"""Image references as the registry sees them: where a push goes (target_ref, own_ref)
and a reference to an image in a registry, checked before the registry is asked."""

from __future__ import annotations

from builder.core import contract, grammar
from builder.core.contract import split_ref
from builder.core.errors import UserError


def target_ref(image: str, registry: str, tag: str | None) -> str:
    """IMAGE retagged under REGISTRY (HOST[:PORT][/NAMESPACE]); the repository's last
    path component is kept: local/tensorflow:21.08 -> host:5000/ns/tensorflow:21.08."""
    why = contract.registry_problem(registry)
    if why:
        raise UserError(f"--registry {grammar.printable(registry[:255])} {why}")
    repo, image_tag = split_ref(image.split("@")[0])
    name = repo.rsplit("/", 1)[-1]
    final_tag = tag or image_tag
    why = contract.tag_problem(final_tag)
    if why:
        raise UserError(f"--tag {grammar.printable(final_tag)} {why}")
    return f"{registry.rstrip('/')}/{name}:{final_tag}"


def own_ref(image: str, tag: str | None) -> str:
    """Where IMAGE goes without --registry: the registry its own reference names (TAG, when
    given, instead of its tag): host:5000/team/tf:1 -> host:5000/team/tf:TAG."""
    parsed = None if contract.reference_problem(image) else contract.parse_reference(image)
    if parsed is not None and parsed.digest and not tag:
        raise UserError(f"{grammar.printable(image)} is a digest reference: it has no tag to push under; give -t TAG")
    if parsed is None or parsed.registry is None:
        raise UserError(
            f"{grammar.printable(image)} names no registry host: give --registry HOST[:PORT][/NS], "
            "or tag the image HOST[:PORT]/NAME:TAG first"
        )
    final_tag = tag or parsed.tag or contract.DEFAULT_TAG
    why = contract.tag_problem(final_tag)
    if why:
        raise UserError(f"--tag {grammar.printable(final_tag)} {why}")
    return f"{parsed.name}:{final_tag}"


def registry_host(ref: str) -> str:
    return ref.split("/", 1)[0]


def remote_reference(ref: str, what: str) -> contract.Reference:
    """REF as an image in a registry, checked before the registry is asked: Docker's
    grammar, a registry named (Docker Hub's default is never implied: its first component
    would be looked up as a host), a sha256 digest when it has one."""
    give = "give REGISTRY/NAME:TAG or REGISTRY/NAME@sha256:DIGEST"
    why = contract.reference_problem(ref)
    if why:
        raise UserError(f"{what} {grammar.printable(ref)} {why}: {give}")
    parsed = contract.parse_reference(ref)
    if parsed.registry is None:
        raise UserError(f"{what} {grammar.printable(ref)} names no registry: {give}")
    if parsed.digest and not contract.SHA256_DIGEST.fullmatch(parsed.digest):
        raise UserError(f"{what} {grammar.printable(ref)}: the digest must be sha256:<64 hex digits>")
    return parsed

"""The catalog's checks that are more than a grammar: value checks the models in
builder/catalog/schema.py name, and the rules across keys their model validators apply
(capabilities against the toolkits, a package named once, device code measured on the
framework version it describes). Each refuses with Refusal (builder/core/catalog_fields.py)."""

from __future__ import annotations

from typing import Any, Callable, Optional

from pydantic import WithJsonSchema

from builder import components
from builder.catalog.release import ptxas_version, python_key
from builder.core import contract, grammar
from builder.core.catalog_fields import Check, Refusal, json_pattern
from builder.core.grammar import PIN, REQUIREMENT, VERSION, canonical_name, printable
from builder.in_image import cuda_arch

VENDOR_TEXT = "one line of text (200 characters at most, no control characters, no leading or trailing space)"
URL_WHAT = 'an http(s) URL such as "https://git.example.com/ml/images" (no query, fragment or space)'
CC_SCHEMA = {"type": "array", "minItems": 1, "items": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+[af]?$"}}
API_SCHEMA = WithJsonSchema({"enum": [1, 2]})
PORTS_SCHEMA = WithJsonSchema({"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 65535}})
RELEASE_SCHEMA = WithJsonSchema({"type": "string", **json_pattern(grammar.RELEASE)})
GPU_WHEELS_SCHEMA = WithJsonSchema(
    {
        "type": "object",
        "propertyNames": json_pattern(grammar.COMPONENT),
        "additionalProperties": {"type": "string", **json_pattern(PIN)},
    }
)


def _named(value: str, why: Optional[str]) -> Optional[str]:
    return f"{printable(value)} {why}" if why else None


def repository_problem(value: str) -> Optional[str]:
    return _named(value, contract.repository_problem(value))


def tag_problem(value: str) -> Optional[str]:
    return _named(value, contract.tag_problem(value))


def upstream_image_problem(value: str) -> Optional[str]:
    why = contract.reference_problem(value) or ("has a digest" if "@" in value else None)
    return f"{printable(value)} {why}: give NAME:TAG here and the digest in base.upstream.digest" if why else None


def digest_problem(value: str) -> Optional[str]:
    return None if contract.SHA256_DIGEST.fullmatch(value) else "must be sha256:<64 hex digits>"


def suite_problem(suites: dict[str, str]) -> Check:
    return lambda value: (
        None if value in suites else f"unknown Debian suite {printable(value)} (known: {', '.join(suites)})"
    )


def version_problem(example: str) -> Check:
    return lambda value: (
        None if VERSION.fullmatch(value) else f'{printable(value)} is not a version such as "{example}"'
    )


def cuda_problem(value: str) -> Optional[str]:
    if not grammar.NUMERIC_VERSION.fullmatch(value):
        return f'{printable(value)} is not a CUDA version such as "11.4.1"'
    try:
        cuda_arch.supported_archs(value)
    except cuda_arch.ArchError as exc:
        return str(exc)
    return None


def vendor_text_problem(value: str) -> Optional[str]:
    """A vendor string: one line, trimmed (it is printed in the banner and labels)."""
    if grammar.ONE_LINE_TEXT.fullmatch(value) and value == value.strip() and "\t" not in value:
        return None
    return f"{printable(value)} is not {VENDOR_TEXT}"


def url_problem(value: str) -> Optional[str]:
    """vendor.url: an http(s) URL the labels publish (so no user:password@ in it)."""
    m = grammar.URL.fullmatch(value)
    if not m:
        return f"{printable(value)} is not {URL_WHAT}"
    if m.group("userinfo"):
        return "holds a user:password@; the image's labels publish it: give the URL without it"
    if len(value) > grammar.URL_MAX:
        return f"longer than {grammar.URL_MAX} characters"
    return None


def pin_problem(value: str) -> Optional[str]:
    return None if PIN.fullmatch(value) else f'{printable(value)} is not an exact pin such as "numpy==1.19.5"'


def unique_pythons(items: list[tuple[int, str]]) -> list[str]:
    seen: list[str] = []
    for i, item in items:
        if item in seen:
            raise Refusal((f"[{i}]", f"Python {item} is listed twice"))
        seen.append(item)
    return sorted(seen, key=python_key)


def unique_pins(items: list[tuple[int, str]]) -> list[str]:
    seen: dict[str, str] = {}
    found = []
    for i, item in items:
        name = canonical_name(PIN.fullmatch(item).group(1))  # type: ignore[union-attr]
        if name in seen:
            found.append((f"[{i}]", f"{PIN.fullmatch(item).group(1)} is pinned twice ({seen[name]} and {item})"))  # type: ignore[union-attr]
        seen.setdefault(name, item)
    if found:
        raise Refusal(*found)
    return [item for _, item in items]


def capabilities(value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        raise Refusal(("", 'must be a non-empty list such as ["7.0", "8.0"]'))
    try:
        parsed = cuda_arch.parse([str(x) for x in value])
    except cuda_arch.ArchError as exc:
        raise Refusal(("", str(exc))) from None
    return list(parsed) if isinstance(parsed, list) else []


def parsed_capabilities(items: list[tuple[int, str]]) -> list[str]:
    """Capabilities as "X.Y", sorted and unique (checked against a toolkit by the model)."""
    try:
        parsed = cuda_arch.parse([item for _, item in items]) if items else []
    except cuda_arch.ArchError as exc:
        raise Refusal(("", str(exc))) from None
    return list(parsed) if isinstance(parsed, list) else []


def api(value: Any) -> int:
    if value not in (1, 2):
        raise Refusal(("", f"must be 1 or 2, got {printable(value)}"))
    return int(value)


def ports(value: Any) -> list[int]:
    if not isinstance(value, list) or not all(
        isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in value
    ):
        raise Refusal(("", "must be a list of port numbers"))
    return value


def variant_name(value: Any) -> str:
    if not grammar.matches(grammar.VARIANT, value):
        raise Refusal(("", "variant names are lower-case letters, digits, '.' and '-' (64 at most)"))
    return value


def some_variant(value: Any) -> Any:
    if value == {}:
        raise Refusal(("", "missing required field (at least one variant)"))
    return value


def _entries(value: Any, check: Callable[[Any, Any], Optional[str]]) -> dict[str, str]:
    """A mapping NAME -> string where CHECK says why an entry is refused (every one reported)."""
    if not isinstance(value, dict):
        raise Refusal(("", f"must be a mapping, got {type(value).__name__}"))
    found = [(str(name), why) for name, item in value.items() if (why := check(name, item))]
    if found:
        raise Refusal(*found)
    return {str(k): v for k, v in value.items() if v is not None}


def gpu_wheels(value: Any) -> dict[str, str]:
    def check(name: Any, item: Any) -> Optional[str]:
        if not grammar.matches(grammar.COMPONENT, name):
            return "component names are lower-case letters, digits, '_' and '-' (e.g. cudnn)"
        if not isinstance(item, str) or not PIN.fullmatch(item):
            return f'must be an exact pip requirement such as "nvidia-cudnn-cu11==8.5.0.96", got {printable(item)}'
        return None

    return _entries(value, check)


def device_code(dc: Any) -> None:
    """sass and ptx are capabilities its CUDA compiles; ptx needs the ISA it was written in."""
    found = []
    for part in ("sass", "ptx"):
        parsed = getattr(dc, part)
        try:
            problems = cuda_arch.check(parsed, dc.cuda, opt_in=None) if parsed else []
        except cuda_arch.ArchError as exc:
            problems = [str(exc)]
        if problems:
            found.append((part, problems[0]))
    if dc.ptx and not dc.ptx_isa:
        found.append(("ptx_isa", "missing required field"))
    if found:
        raise Refusal(*found)


def framework(fw: Any) -> None:
    """A package comes with its Pythons; device code describes this version's wheel."""
    found = []
    if fw.package is not None and not fw.pythons:
        found.append(
            ("pythons", 'missing required field (the Pythons the package has wheels for, e.g. ["3.8", "3.9"])')
        )
    if fw.package is None and (fw.pythons or fw.pins):
        found.append(
            ("package", "missing required field (pythons and pins belong to a package, e.g. package: tensorflow)")
        )
    if fw.device_code and fw.device_code.version != fw.version:
        found.append(
            (
                "device_code.version",
                f"describes {fw.name} {fw.device_code.version}'s wheel, not "
                f"{fw.version}'s: measure the wheel's device code "
                "(cuobjdump --list-elf/--list-ptx) and state it here",
            )
        )
    if found:
        raise Refusal(*found)


def release(doc: Any) -> None:
    """The rules across a release's keys, every one reported."""
    found = _capabilities_compile(doc) + _default_tags(doc) + _named_once(doc)
    if found:
        raise Refusal(*dict.fromkeys(found))


def _capabilities_compile(doc: Any) -> list[tuple[str, str]]:
    """Each capability compiles with the release's CUDA and the offline base's (or the newer
    ptxas of gpu_wheels.cuda_nvcc)."""
    found = []
    ptxas = ptxas_version((doc.gpu_wheels or {}).get("cuda_nvcc"))
    for toolkit, where in ((doc.cuda, "cuda"), (doc.base.offline.cuda, "base.offline.cuda")):
        try:
            found += [
                ("build.cuda_compute_capabilities", f"{msg} (from {where})")
                for msg in cuda_arch.check(doc.build.cuda_compute_capabilities, toolkit, opt_in=None, ptxas=ptxas)
            ]
        except cuda_arch.ArchError as exc:
            found.append((where, str(exc)))
    return found


def _default_tags(doc: Any) -> list[tuple[str, str]]:
    return [
        (f"variants.{name}.tag", why)
        for name, v in doc.variants.items()
        if v.tag is None and (why := tag_problem(f"{doc.release}-{name}"))
    ]


def _named_once(doc: Any) -> list[tuple[str, str]]:
    """One distribution is named once across the framework, its pins, the GPU wheels,
    and what the components lock with it (Horovod's requirements, a tool, DALI's wheel): two versions of one package cannot both be locked."""
    shared = [(PIN.fullmatch(w).group(1), f"gpu_wheels.{n}") for n, w in (doc.gpu_wheels or {}).items()]  # type: ignore[union-attr]
    for c in components.REGISTRY:  # what a component locks with the framework (DALI's wheel)
        spec = getattr(doc, c.NAME, None)
        if spec is not None and not isinstance(spec, str):
            shared += [(REQUIREMENT.fullmatch(r).group(1), c.NAME) for r in c.requirements(spec)]  # type: ignore[union-attr]
    found = []
    for vname, v in doc.variants.items():
        key, fw = f"variants.{vname}.framework", v.framework
        entries = [(fw.package, f"{key}.package")] if fw.package else []
        entries += [(PIN.fullmatch(p).group(1), f"{key}.pins") for p in fw.pins or ()]  # type: ignore[union-attr]
        owners: dict[str, str] = {}
        for name, where in entries + shared:
            norm = canonical_name(name)
            if norm in owners and owners[norm] != where:
                found.append((where, f"{name} is also named in {owners[norm]}"))
            owners.setdefault(norm, where)
    return found

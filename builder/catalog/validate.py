"""One resolved release checked against the models (builder/catalog/schema.py): every
error pydantic collects becomes a Problem naming the file that states the key (a parent's
bad value is its file's problem, once) and the dotted key path; a release that passes
becomes the frozen records of builder/catalog/release.py."""

from __future__ import annotations

import re
import typing
from typing import Any, Optional

from pydantic import BaseModel, ValidationError

from builder import components
from builder.catalog import schema
from builder.catalog.release import DeviceCode, OfflineBase, Release, Variant, Vendor
from builder.core import grammar
from builder.core.catalog_fields import Missing, Refusal
from builder.core.errors import Problem

# Segments of pydantic's error paths that are not keys of the file.
_NOT_KEYS = {schema.SPEC, schema.ABSENT, "[key]"}


def check_release(
    rel: str, file: str, data: dict, problems: list[Problem], chain: Optional[list[tuple[str, dict]]] = None
) -> Optional[Release]:
    """RELEASE resolved (DATA) as a Release, or None with its problems added to PROBLEMS."""
    chain = chain or [(file, data)]
    try:
        doc = schema.ReleaseDoc.model_validate(_without_nulls(data))
    except ValidationError as exc:
        for key, message, missing in _found(exc):
            problem = _missing(chain, key, message) if missing else None
            problem = problem or Problem(_origin(chain, key, file), key, message)
            if problem not in problems:
                problems.append(problem)
        return None
    return _release(rel, file, data, doc)


def _without_nulls(value: Any, kind: Any = None) -> Any:
    """`null` means not given (a root file's null, like a child's, removes the key). A null
    under a key its model does not know stays, so that the key is refused as unknown: a
    misspelled key is never silently dropped."""
    if not isinstance(value, dict):
        return value
    model = _model_of(kind if kind is not None else schema.ReleaseDoc)
    if model is None:  # a mapping of names (env, tools, variants, ...): each value by the item type
        item = _item_of(kind)
        return {k: _without_nulls(v, item) for k, v in value.items() if v is not None}
    fields = model.model_fields
    return {
        k: _without_nulls(v, fields[k].annotation) if k in fields else v
        for k, v in value.items()
        if v is not None or k not in fields
    }


def _found(exc: ValidationError) -> list[tuple[str, str, bool]]:
    """(key path, message, is a missing required field) of each error, in the order found."""
    out = []
    for error in exc.errors(include_url=False):
        loc = [part for part in error["loc"] if part not in _NOT_KEYS]
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, Refusal):
            out += [
                (_join(_path(loc), sub), message, message.startswith("missing required field"))
                for sub, message in cause.found
            ]
        else:
            out.append((_path(loc), _message(error, loc, cause), error["type"] == "missing"))
    return out


def _path(loc: list) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def _join(base: str, sub: str) -> str:
    if not sub or not base:
        return base or sub
    return base + sub if sub.startswith("[") else f"{base}.{sub}"


def _message(error: Any, loc: list, cause: Any) -> str:
    kind = error["type"]
    if kind == "missing":
        hint = _missing_hint(loc)
        return "missing required field" + (f" ({hint})" if hint else "")
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        allowed = sorted(model.model_fields) if model else []
        return f"unknown key (allowed: {', '.join(allowed)})"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a mapping, got {type(error.get('input')).__name__}"
    return grammar.one_line(str(cause) if cause is not None else error["msg"])


def _model_at(loc: list) -> Optional[type[BaseModel]]:
    """The model of the mapping at LOC in a release (None where LOC is no mapping of one)."""
    kind: Any = schema.ReleaseDoc
    for part in loc:
        model = _model_of(kind)
        if model is not None:
            field = model.model_fields.get(str(part))
            kind = field.annotation if field else None
        else:
            kind = _item_of(kind)
        if kind is None:
            return None
    return _model_of(kind)


def _unwrapped(kind: Any) -> list[Any]:
    """The types KIND may be, Annotated, Optional and Union taken apart."""
    if typing.get_origin(kind) is typing.Annotated:
        return _unwrapped(typing.get_args(kind)[0])
    if typing.get_origin(kind) is typing.Union:
        return [t for arg in typing.get_args(kind) for t in _unwrapped(arg)]
    return [kind]


def _model_of(kind: Any) -> Optional[type[BaseModel]]:
    found = [t for t in _unwrapped(kind) if isinstance(t, type) and issubclass(t, BaseModel)]
    return found[0] if found else None


def _item_of(kind: Any) -> Any:
    """The value type of a mapping or list type."""
    for t in _unwrapped(kind):
        if typing.get_origin(t) in (dict, list):
            return typing.get_args(t)[-1]
    return None


def _missing_hint(loc: list) -> Optional[str]:
    model = _model_at(loc[:-1])
    field = model.model_fields.get(str(loc[-1])) if model else None
    hints = [m.hint for m in (field.metadata if field else []) if isinstance(m, Missing)]
    return hints[0] if hints else None


def _origin(chain: list[tuple[str, dict]], key: str, default: str) -> str:
    """The file, child first along the parent chain, that states KEY."""
    parts = [re.sub(r"\[\d+\]$", "", p) for p in key.split(".")]
    for file, data in chain:
        node: Any = data
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if not isinstance(node, dict) or part not in node or (node[part] is None and not last):
                break
            node = node[part]
        else:
            return file
    return default


def _missing(chain: list[tuple[str, dict]], key: str, message: str) -> Optional[Problem]:
    """A required key that is absent: reported at the file whose `null` removed it, if one did
    (the file that states it would be a parent that still has it)."""
    *parents, last = key.split(".")
    for file, data in chain:
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and last in node and node[last] is None:
            return Problem(file, key, f"{message}; null removed it")
    return None


def _release(rel: str, file: str, data: dict, doc: schema.ReleaseFields) -> Release:
    examples = doc.example_packages or schema.ExamplePackages()
    chosen = {c.NAME: _spec(getattr(doc, c.NAME)) for c in components.REGISTRY}
    return Release(
        name=rel,
        file=file,
        parent=str(data["parent"]) if data.get("parent") else None,
        repository=doc.repository,
        os_distro=doc.os.distro,
        os_version=doc.os.version,
        python=doc.python,
        cuda=doc.cuda,
        stack_versions=dict(doc.components or {}),
        upstream_image=doc.base.upstream.image,
        upstream_digest=doc.base.upstream.digest,
        offline=OfflineBase(doc.base.offline.debian, doc.base.offline.cuda, doc.base.offline.python),
        cuda_cc=list(doc.build.cuda_compute_capabilities),
        toggles={"xla": doc.build.xla, "gcp": doc.build.gcp, "hdfs": doc.build.hdfs},
        nvbuildopts=list(doc.build.nvbuildopts or []),
        env=dict(doc.env or {}),
        labels=dict(doc.labels or {}),
        expose=list(doc.expose or []),
        entrypoint={k: getattr(doc.entrypoint, k) for k in sorted(schema.keys(schema.Entrypoint))},
        variants={name: _variant(rel, name, v) for name, v in doc.variants.items()},
        resolved=data,
        gpu_wheels=dict(doc.gpu_wheels or {}),
        example_packages=(tuple(examples.apt or ()), tuple(examples.pip or ())),
        vendor=Vendor(doc.vendor.name, doc.vendor.maintainer, doc.vendor.url, doc.vendor.copyright_holder),
        components={name: spec for name, (spec, _) in chosen.items() if spec is not None},
        components_absent={name: why for name, (_, why) in chosen.items() if why is not None},
    )


def _spec(value: Any) -> tuple[Any, Optional[str]]:
    """A component's (spec, None), (None, WHY) for `"absent: WHY"`, or (None, None)."""
    return (None, value) if isinstance(value, str) else (value, None)


def _variant(rel: str, name: str, v: schema.Variant) -> Variant:
    fw, dc = v.framework, v.framework.device_code
    code = DeviceCode(dc.version, dc.cuda, tuple(dc.sass), tuple(dc.ptx), dc.ptx_isa or "") if dc else None
    return Variant(
        name,
        v.tag or f"{rel}-{name}",
        fw.name,
        fw.version,
        fw.api,
        dict(v.env or {}),
        dict(v.labels or {}),
        fw.package,
        tuple(fw.pythons or ()),
        tuple(fw.pins or ()),
        code,
    )

"""The JSON Schemas of the release models (builder/catalog/schema.py).

`resolved()` describes a release as the loader checks it, resolved through its parents:
its `required` lists are the keys a release needs (the reference page reads them).
`release_file()` describes one file as an editor sees it (`builder catalog schema`): a file
that names a `parent`, or an `abstract` root, is a partial document, so no key is required
but `release`, and any value may be `null` (null removes what a parent gives). Whether the
required keys are there is checked after merging, by the loader."""

from __future__ import annotations

import copy
from typing import Any

from builder.catalog import schema

DIALECT = "https://json-schema.org/draft/2020-12/schema"
NULL = {"type": "null"}
FILE_NOTE = (
    " This schema checks one file: keys a resolved release requires may come from its parents, "
    "so only `release` is required here; `builder releases` checks the merged release."
)


def resolved() -> dict[str, Any]:
    return schema.ReleaseDoc.model_json_schema()


def release_file() -> dict[str, Any]:
    out = copy.deepcopy(resolved())
    _partial(out)
    out["required"] = ["release"]
    out["description"] = out.get("description", "") + FILE_NOTE
    return {"$schema": DIALECT, **out}


def _partial(node: Any) -> None:
    """Every object schema under NODE as a partial document: nothing required, every value nullable."""
    if isinstance(node, list):
        for item in node:
            _partial(item)
    if not isinstance(node, dict):
        return
    for child in list(node.values()):
        _partial(child)
    node.pop("required", None)
    props = node.get("properties", {})
    for name, prop in props.items():
        props[name] = _nullable(prop)
    if isinstance(node.get("additionalProperties"), dict):
        node["additionalProperties"] = _nullable(node["additionalProperties"])


def _nullable(prop: dict[str, Any]) -> dict[str, Any]:
    if NULL in prop.get("anyOf", []) or prop.get("type") == "null" or "not" in prop:
        return prop
    meta: dict[str, Any] = {k: prop.pop(k) for k in ("description", "examples", "default", "title") if k in prop}
    return {"anyOf": [prop, NULL], **meta}

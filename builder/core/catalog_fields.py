"""The catalog's value types: strict grammars (builder/core/grammar.py) as pydantic
validators, each refusing with the one-line message a catalog author reads.

A validator refuses by raising Refusal: one or more (sub-path, message) pairs, the sub-path
relative to the field ("" for the field itself, "[2]" for a list item, "NAME" for a mapping
entry), so one field can report every bad item at once. Each type also states its JSON
Schema (what an editor checks while the file is typed). Core, not catalog: the
components (builder/components/) declare their catalog mappings in this vocabulary too."""

from __future__ import annotations

import re
from typing import Annotated, Any, Callable, Dict, List, Optional

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from builder.core import grammar
from builder.core.errors import UserError
from builder.core.grammar import printable

# A check returns why a value is refused, or None.
Check = Callable[[str], Optional[str]]
ABSENT = re.compile(r"absent: (\S.*)")


class Refusal(UserError, ValueError):
    """Why a value is refused: (sub-path, message) pairs, the sub-path under the field's key.
    A ValueError so that pydantic records it with the field's path and goes on; it never
    leaves the validation (builder/catalog/validate.py turns it into Problems)."""

    def __init__(self, *found: tuple[str, str]):
        super().__init__("; ".join(message for _, message in found))
        self.found = list(found)


class Part(BaseModel):
    """A mapping of the catalog: a key it does not declare is refused (a typo must not pass)."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


def field(description: str, example: Any = None, **kw: Any) -> Any:
    """A declared key: its description and an example the loader accepts (tests build catalogs of them)."""
    return Field(description=description, examples=None if example is None else [example], **kw)


def optional(description: str, example: Any = None) -> Any:
    return field(description, example, default=None)


class Missing:
    """Annotated marker: what a missing required field's problem adds in parentheses."""

    def __init__(self, hint: str):
        self.hint = hint


class Moved:
    """Annotated marker: a key that moved, kept only to say where to."""

    def __init__(self, to: str):
        self.to = to


def json_pattern(pattern: re.Pattern[str]) -> dict[str, str]:
    """The pattern as JSON Schema states it (anchored: JSON Schema searches), where an editor's
    regex engine reads it the same; the loader always checks the Python pattern itself."""
    if re.search(r"\\[uUZ]|\(\?<", pattern.pattern):
        return {}
    return {"pattern": f"^(?:{pattern.pattern})$"}


def matching(pattern: re.Pattern[str], what: str) -> Check:
    return lambda value: None if pattern.fullmatch(value) else f"{printable(value)} is not {what}"


def _as_string(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise Refusal(("", f"must be a string, got {type(value).__name__} {printable(value)}"))
    return str(value)


def Text(check: Check | None = None, pattern: re.Pattern[str] | None = None) -> Any:  # noqa: N802 (a type)
    """A string (an integer reads as its digits) that CHECK accepts; PATTERN goes to the schema."""

    def validate(value: Any) -> str:
        text = _as_string(value)
        why = check(text) if check else None
        if why:
            raise Refusal(("", why))
        return text

    schema = {"type": ["string", "integer"], **(json_pattern(pattern) if pattern else {})}
    return Annotated[str, BeforeValidator(validate), WithJsonSchema(schema)]


def Grammar(pattern: re.Pattern[str], what: str) -> Any:  # noqa: N802 (a type)
    """A string matching PATTERN whole; otherwise '... is not WHAT'."""
    return Text(matching(pattern, what), pattern)


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Refusal(("", f"must be a boolean (true or false), got {printable(value)}"))
    return value


Boolean = Annotated[bool, BeforeValidator(_boolean), WithJsonSchema({"type": "boolean"})]


def strings(value: Any, what: str, check: Check | None = None) -> list[tuple[int, str]]:
    """(index, item) of a list of strings, every refused item reported with its index."""
    if not isinstance(value, list):
        raise Refusal(("", f"must be a list of {what}, got {type(value).__name__}"))
    found: list[tuple[str, str]] = []
    out = []
    for i, item in enumerate(value):
        if isinstance(item, float):
            found.append((f"[{i}]", f'write it as a quoted string, e.g. "{item}"'))
        elif not isinstance(item, str):
            found.append((f"[{i}]", f"must be a string ({what}), got {type(item).__name__} {printable(item)}"))
        elif check and check(item):
            found.append((f"[{i}]", check(item) or ""))
        else:
            out.append((i, item))
    if found:
        raise Refusal(*found)
    return out


def StringList(
    what: str,
    check: Check | None = None,
    pattern: re.Pattern[str] | None = None,  # noqa: N802
    after: Callable[[list[tuple[int, str]]], list[str]] | None = None,
) -> Any:
    """A list of strings each CHECK accepts; AFTER sees (index, item) pairs for rules across items."""

    def validate(value: Any) -> list[str]:
        items = strings(value, what, check)
        return after(items) if after else [item for _, item in items]

    item = {"type": "string", **(json_pattern(pattern) if pattern else {})}
    return Annotated[List[str], BeforeValidator(validate), WithJsonSchema({"type": "array", "items": item})]


def StringMap(
    names: re.Pattern[str],
    what: str,
    values: re.Pattern[str] = grammar.CATALOG_TEXT,  # noqa: N802
    value_what: str = "text",
    reserved: dict[str, str] | None = None,
) -> Any:
    """A mapping whose keys match NAMES and whose values (strings or integers) match VALUES;
    RESERVED keys are refused with where to give them instead."""

    def validate(value: Any) -> dict[str, str]:
        if not isinstance(value, dict):
            raise Refusal(("", f"must be a mapping, got {type(value).__name__}"))
        found, out = [], {}
        for name, item in value.items():
            why = _entry_problem(name, item, names, what, values, value_what, reserved or {})
            if why:
                found.append((str(name), why))
            else:
                out[str(name)] = str(item)
        if found:
            raise Refusal(*found)
        return out

    schema = {
        "type": "object",
        "propertyNames": json_pattern(names),
        "additionalProperties": {"type": ["string", "integer"], **json_pattern(values)},
    }
    return Annotated[Dict[str, str], BeforeValidator(validate), WithJsonSchema(schema)]


def _entry_problem(
    name: Any,
    value: Any,
    names: re.Pattern[str],
    what: str,
    values: re.Pattern[str],
    value_what: str,
    reserved: dict[str, str],
) -> str | None:
    if not grammar.matches(names, name):
        return f"{printable(name)} is not {what}"
    if name in reserved:
        return f"set by {reserved[name]}: give it there"
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return f"must be a string or integer, got {type(value).__name__} {printable(value)}"
    if not values.fullmatch(str(value)):
        return f"{printable(value)} is not {value_what}"
    return None


def absent_reason(value: str, shape: str) -> str:
    """WHY of a component's `"absent: WHY"`; any other string is refused."""
    m = ABSENT.fullmatch(value)
    if not m or not grammar.matches(grammar.CATALOG_TEXT, value):
        raise Refusal(("", f'{printable(value)}: give {shape}, null, or "absent: WHY"'))
    return m.group(1)


ABSENT_SCHEMA = {"type": "string", "pattern": "^absent: \\S", "description": '"absent: WHY": none, and why'}


def Absent(shape: str) -> Any:  # noqa: N802 (a type)
    """`"absent: WHY"`: a component a release says it has not, and why (the reason is kept)."""
    return Annotated[str, BeforeValidator(lambda value: absent_reason(value, shape)), WithJsonSchema(ABSENT_SCHEMA)]


def _refuse_moved(to: str, why: str) -> Callable[[Any], Any]:
    def validate(value: Any) -> Any:
        raise Refusal(("", f"moved to {to} ({why})"))

    return validate


def MovedTo(to: str, why: str) -> Any:  # noqa: N802 (a type)
    """A key that moved to TO: any value is refused, saying where it went."""
    return Annotated[
        Optional[str],
        BeforeValidator(_refuse_moved(to, why)),
        Moved(to),
        WithJsonSchema({"not": {}, "deprecated": True}),
    ]


DebianVersion = Grammar(grammar.DEBIAN_VERSION, 'a Debian package version such as "2020.4.3.7~11.2.2-3+deb11u3"')

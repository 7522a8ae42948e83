"""Reading a catalog directory safely and resolving `parent` inheritance.

A release file is YAML read by a loader that refuses what a catalog has no use for (tags,
anchors and aliases, deep nesting, keys given twice, oversize files, special files). A child
states only what differs: mappings merge key by key, any other value (lists included)
replaces the parent's, and `null` removes the parent's key. Parent chains are walked
iteratively, at most MAX_PARENTS deep. Problems are collected, not raised."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import yaml

from builder.core import grammar
from builder.core.errors import Problem, UserError
from builder.core.grammar import printable
from builder.core.userfiles import UserFileError, file_kind, read_user_bytes

# A catalog file is a page of YAML: anything bigger is a mistake or an attack.
MAX_FILE_BYTES = 256 * 1024
MAX_DEPTH = 32
# How many parents a release may inherit through (the shipped catalog's deepest: 6).
MAX_PARENTS = 64


def merge(parent: Any, child: Any) -> Any:
    """Deep merge for inheritance: mappings merge, `None` deletes, the rest replaces."""
    if isinstance(parent, dict) and isinstance(child, dict):
        out = dict(parent)
        for key, value in child.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = merge(parent.get(key), value)
        return out
    return child


class _Refused(yaml.composer.ComposerError):
    """YAML that is well formed but not accepted in a catalog."""


class _Loader(yaml.SafeLoader):
    """safe_load without anchors and aliases (one alias can expand to gigabytes: an alias
    bomb; a catalog has no use for them, `parent` is how releases share values) and
    without deep nesting (the composer recurses)."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise _Refused(
                None,
                None,
                "anchors and aliases (&name, *name) are not allowed in the catalog; use `parent` to share values",
                event.start_mark,
            )
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Duplicate(yaml.YAMLError):
    """Keys given twice in one file (PyYAML lets the last win, silently): every one of them."""

    def __init__(self, found: list[tuple[str, int, int]]):
        super().__init__(f"{len(found)} duplicate keys")
        self.found = found  # (dotted key path, line, line of the first)


def _duplicate_keys(loader: _Loader, node: yaml.Node, path: str = "") -> list[tuple[str, int, int]]:
    """Every key a mapping in NODE gives twice, with its key path and both lines."""
    found: list[tuple[str, int, int]] = []
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found += _duplicate_keys(loader, item, f"{path}[{i}]")
    elif isinstance(node, yaml.MappingNode):
        first: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = _key_of(loader, key_node)
            where = f"{path}.{key}" if path else str(key)
            if key is not None and key in first:
                found.append((where, key_node.start_mark.line + 1, first[key]))
            elif key is not None:
                first[key] = key_node.start_mark.line + 1
            found += _duplicate_keys(loader, value_node, where)
    return found


def _key_of(loader: _Loader, node: yaml.Node) -> Any:
    """A scalar key as the mapping will hold it ('1' and 1 differ, 1 and 0x1 do not); None
    for merge keys (<<) and keys that are not scalars (construction reports those)."""
    if not isinstance(node, yaml.ScalarNode) or node.tag == "tag:yaml.org,2002:merge":
        return None
    key = loader.construct_object(node)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _parse(path: Path) -> Any:
    """The YAML document of one catalog file; UserFileError (not a regular file, too big,
    unreadable), UnicodeDecodeError or YAMLError (_Duplicate: keys given twice) when it
    cannot be had."""
    data = read_user_bytes(path, "catalog file", MAX_FILE_BYTES)  # the one reader: a fifo swapped in, no hang
    loader = _Loader(data.decode("utf-8"))
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        duplicates = _duplicate_keys(loader, node)
        if duplicates:
            raise _Duplicate(duplicates)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _catalog_files(directory: Path) -> list[Path]:
    """The *.yaml files of a catalog directory, each a regular file (a link to one is
    fine): a fifo would block the read for ever, a device would be read as YAML."""
    if not directory.exists():
        raise UserError(f"catalog directory {directory} does not exist")
    if directory.is_file():
        raise UserError(f"catalog {directory} is a file, not a directory of release files")
    if not directory.is_dir():
        raise UserError(f"catalog {directory} is not a directory")
    files = sorted(directory.glob("*.yaml"))
    if not files:
        raise UserError(f"catalog directory {directory} holds no release files (*.yaml)")
    special = []
    for path in files:
        try:
            mode = path.stat().st_mode
        except OSError:
            continue  # a dangling link: reported by the read, with the other problems
        if not stat.S_ISREG(mode):
            special.append((path.name, file_kind(mode)))
    if len(special) == 1:
        raise UserError(f"catalog {directory}: {special[0][0]} is {special[0][1]}, not a regular file")
    if special:
        raise UserError(f"catalog {directory}: {', '.join(f'{n} ({k})' for n, k in special)} are not regular files")
    return files


def _read_files(directory: Path, problems: list[Problem]) -> dict[str, tuple[str, dict]]:
    raw: dict[str, tuple[str, dict]] = {}
    for path in _catalog_files(directory):
        name = path.name
        try:
            data = _parse(path)
        except _Duplicate as exc:  # which value was meant is not known: the file is not used
            problems += [
                Problem(name, key, f"line {line}: duplicate key (first on line {first}); give each key once")
                for key, line, first in exc.found
            ]
            continue
        except ValueError as exc:  # UnicodeDecodeError is one too
            reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else str(exc)
            problems.append(Problem(name, "", f"cannot read: {reason}"))
            continue
        except UserFileError as exc:  # not a regular file, too big, unreadable
            problems.append(Problem(name, "", f"cannot read: {exc.reason}"))
            continue
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f"line {mark.line + 1}: " if mark is not None else ""
            reason = grammar.one_line(getattr(exc, "problem", None) or str(exc).splitlines()[0])
            kind = "" if isinstance(exc, _Refused) else "malformed YAML: "
            problems.append(Problem(name, "", f"{line}{kind}{reason}"))
            continue
        except OSError as exc:
            problems.append(Problem(name, "", f"cannot read: {exc.strerror or exc}"))
            continue
        if not isinstance(data, dict):
            problems.append(Problem(name, "", "must be a mapping of keys to values"))
            continue
        rel = data.get("release")
        if not isinstance(rel, (str, int, float)) or isinstance(rel, bool) or str(rel) == "":
            problems.append(Problem(name, "release", 'missing required field (the release name, e.g. "21.08")'))
            continue
        if isinstance(rel, float):  # YAML reads 21.10 as 21.1: demand a quoted string
            problems.append(Problem(name, "release", f'write the release name as a quoted string, e.g. "{rel}"'))
            continue
        rel = str(rel)
        if not grammar.RELEASE.fullmatch(rel):
            problems.append(
                Problem(
                    name,
                    "release",
                    f"{printable(rel)} is not a release name (letters, digits, '.', '_' and '-'; no '..'; 64 at most)",
                )
            )
            continue
        if rel in raw:
            problems.append(Problem(name, "release", f"release '{rel}' is already defined in {raw[rel][0]}"))
            continue
        raw[rel] = (name, data)
    return raw


def _resolve(
    rel: str, raw: dict[str, tuple[str, dict]], problems: list[Problem], done: dict[str, tuple[dict | None, int]]
) -> dict | None:
    """The release's data merged over all its ancestors, or None when the chain is broken
    (DONE: each release resolved so far, with how many parents it inherits through).
    Iterative, so no chain is too long for Python's stack (1500 parents were a
    RecursionError): the releases up to the first one resolved (or the root) are walked
    child first, then merged root first."""
    walk: list[str] = []  # REL and its unresolved ancestors, child first
    seen: set[str] = set()
    node: str | None = rel
    while node is not None and node not in done:
        problem = _broken_link(node, walk, seen, raw)
        if problem:
            problems.append(problem)
            for name in walk:  # every release on the walk inherits the broken link
                done[name] = (None, 0)
            return None
        walk.append(node)
        seen.add(node)
        parent = raw[node][1].get("parent")
        node = None if parent is None else str(parent)
    merged, depth = (None, -1) if node is None else done[node]
    for name in reversed(walk):
        file, data = raw[name]
        depth += 1
        if data.get("parent") is None:
            merged = dict(data)
        elif depth == MAX_PARENTS + 1 and merged is not None:
            problems.append(
                Problem(
                    file,
                    "parent",
                    f"inherits through more than {MAX_PARENTS} parents: {_names(_chain_names(name, raw))}",
                )
            )
            merged = None
        elif merged is not None:
            base = {k: v for k, v in merged.items() if k not in ("abstract", "release", "parent")}
            merged = merge(base, data)
        done[name] = (merged, depth)
    return done[rel][0]


def _broken_link(node: str, walk: list[str], seen: set[str], raw: dict[str, tuple[str, dict]]) -> Problem | None:
    """The problem where a walk up the parents reaches NODE: a cycle, or no such release."""
    if node in seen:
        cycle = walk[walk.index(node) :] + [node]
        return Problem(raw[node][0], "parent", f"inheritance cycle: {_names(cycle)}")
    if node not in raw:
        return Problem(raw[walk[-1]][0], "parent", f"unknown parent {printable(node)}")
    return None


def _chain_names(rel: str, raw: dict[str, tuple[str, dict]]) -> list[str]:
    """REL and the names of its ancestors, child first (a chain already walked: it ends)."""
    names = [rel]
    while names[-1] in raw and raw[names[-1]][1].get("parent") is not None and len(names) <= len(raw):
        names.append(str(raw[names[-1]][1]["parent"]))
    return names


def _names(chain: list[str]) -> str:
    """A chain of releases as one short line: a long one shows its ends and its length."""
    if len(chain) <= 8:
        return " -> ".join(chain)
    return " -> ".join(chain[:3] + ["..."] + chain[-3:]) + f" ({len(set(chain))} releases)"


def _chain(rel: str, raw: dict[str, tuple[str, dict]]) -> list[tuple[str, dict]]:
    """(file, data) of the release and its ancestors, child first (resolved: no cycle)."""
    out: list[tuple[str, dict]] = []
    while rel in raw and len(out) <= len(raw):
        file, data = raw[rel]
        out.append((file, data))
        rel = str(data.get("parent")) if data.get("parent") is not None else ""
    return out


def _release_order(name: str) -> tuple:
    """Sort '21.06' < '21.10' < '22.12' numerically; names that are not YY.MM go last."""
    parts = name.split(".")
    if all(p.isdigit() for p in parts):
        return (0, tuple(int(p) for p in parts), name)
    return (1, (), name)

"""A small Dockerfile reader for the injection tests, written after Docker's own
(moby/buildkit frontend/dockerfile/parser: line continuations, comment and empty lines
inside continuations, parseWords; shell/lex.go: quotes, escapes and $ expansion).
It reads what the builder renders; it is not a general Dockerfile parser."""

from __future__ import annotations

import re
from dataclasses import dataclass

CONTINUATION = re.compile(r"\\[ \t]*$")


@dataclass
class Instruction:
    cmd: str  # upper case
    args: str  # the rest of the logical line


def instructions(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile, continuation lines joined as Docker joins them."""
    out: list[Instruction] = []
    current: str | None = None
    for raw in text.split("\n"):  # Go's bufio.ScanLines: only \n ends a line
        line = raw[:-1] if raw.endswith("\r") else raw
        stripped = line.lstrip()
        if stripped.startswith("#") or not stripped.strip():
            continue  # comments and empty lines, also inside a continuation
        body = stripped if current is None else line
        m = CONTINUATION.search(body)
        if m:
            current = (current or "") + body[: m.start()]
            continue
        out.append(_split((current or "") + body))
        current = None
    if current is not None:
        out.append(_split(current))
    return out


def _split(line: str) -> Instruction:
    parts = line.strip().split(None, 1)
    return Instruction(parts[0].upper(), parts[1] if len(parts) > 1 else "")


def parse_words(rest: str) -> list[str]:
    """Docker's parseWords: split on blanks outside quotes; quotes and escapes are kept."""
    words: list[str] = []
    word, quote, in_word, blank_ok = "", "", False, False
    i, n = 0, len(rest)
    while i < n:
        ch = rest[i]
        if not in_word and not quote:
            if ch.isspace():
                i += 1
                continue
            in_word = True
        if quote:
            if ch == quote:
                quote = ""
            elif ch == "\\" and quote != "'":
                if i + 1 == n:
                    i += 1
                    continue
                word += ch
                i += 1
                ch = rest[i]
            word += ch
            i += 1
            continue
        if ch.isspace():
            if blank_ok or word:
                words.append(word)
            word, in_word, blank_ok = "", False, False
            i += 1
            continue
        if ch in "'\"":
            quote, blank_ok = ch, True
        elif ch == "\\":
            if i + 1 == n:
                i += 1
                continue
            word += ch
            i += 1
            ch = rest[i]
        word += ch
        i += 1
    if blank_ok or word:
        words.append(word)
    return words


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def word_value(word: str, env: dict[str, str]) -> str:
    """shell/lex.go ProcessWord: remove quotes and escapes, expand $NAME and ${NAME}."""
    out: list[str] = []
    i, n = 0, len(word)

    def dollar(i: int) -> tuple[str, int]:
        if i + 1 < n and word[i + 1] == "{":
            end = word.index("}", i)
            name = word[i + 2 : end]
            default = ""
            if ":-" in name:
                name, default = name.split(":-", 1)
            return env.get(name) or default, end + 1
        m = _NAME.match(word, i + 1)
        if not m:
            return "$", i + 1
        return env.get(m.group(0), ""), m.end()

    while i < n:
        ch = word[i]
        if ch == "\\":
            if i + 1 < n:
                out.append(word[i + 1])
            i += 2
        elif ch == "'":
            end = word.index("'", i + 1)  # ValueError: unterminated quote
            out.append(word[i + 1 : end])
            i = end + 1
        elif ch == '"':
            i += 1
            while True:
                if i >= n:
                    raise ValueError("unterminated double quote")
                ch = word[i]
                if ch == '"':
                    i += 1
                    break
                if ch == "$":
                    value, i = dollar(i)
                    out.append(value)
                elif ch == "\\" and i + 1 < n and word[i + 1] in '"$\\':
                    out.append(word[i + 1])
                    i += 2
                else:
                    out.append(ch)
                    i += 1
        elif ch == "$":
            value, i = dollar(i)
            out.append(value)
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def pairs(ins: Instruction, env: dict[str, str] | None = None) -> dict[str, str]:
    """NAME=VALUE pairs of an ENV, LABEL or ARG instruction, decoded."""
    out = {}
    for word in parse_words(ins.args):
        name, sep, value = word.partition("=")
        if not sep:
            raise ValueError(f"{ins.cmd} word without '=': {word!r}")
        out[word_value(name, env or {})] = word_value(value, env or {})
    return out


def merged(text: str, cmd: str) -> dict[str, str]:
    """Every NAME=VALUE of all CMD instructions (ENV or LABEL) of a Dockerfile."""
    out: dict[str, str] = {}
    for ins in instructions(text):
        if ins.cmd == cmd:
            out.update(pairs(ins))
    return out

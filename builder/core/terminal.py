"""The terminal printer: say() writes every message and error on stderr, redacted,
escaped and cut, so no path, key or value a message quotes can break its line or reach
the terminal as a control character."""

from __future__ import annotations

import re
import sys

from builder.core.redact import redact


def say(message: str) -> None:
    """A message on stderr, credentials redacted; the one printer of messages and errors.
    An error (`error: ...`) is one line unless it is a report made of lines(): every
    newline in it is escaped too. Other messages keep their newlines as line breaks. Every
    other control character is escaped (escape()): no value a message quotes can drive the
    terminal, and undecodable argv bytes never crash it."""
    text = redact(message)
    one_line = text.startswith("error: ") and not isinstance(message, Lines)
    shown = escape(text) if one_line else escape_block(text)
    quoting = isinstance(message, Lines) or text.startswith(("error: ", "warning: "))
    print(cut_block(shown, quoting), file=sys.stderr, flush=True)


# --- escaping ------------------------------------------------------------------------
# Every path, key and value a message shows reaches the terminal through escape(): each
# character Python would not print as itself (C0 and C1 controls, DEL, line and paragraph
# separators, lone surrogates from undecodable bytes, invisible format characters) becomes
# its escape, as repr writes it (\n, \x1b, \udcff). A report is built from lines() of
# escaped lines, so a message spans exactly the lines its report gives it.


def escape(text: str) -> str:
    """TEXT on one line with no control character: each unprintable character escaped."""
    text = text if isinstance(text, str) else str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def escape_block(text: str) -> str:
    """TEXT with its newlines kept as line breaks and every other control escaped."""
    return "\n".join(escape(line) for line in text.split("\n"))


# --- cutting ---------------------------------------------------------------------------
# A value an error quotes may be huge (a 10 kB option, a catalog string): the terminal
# gets its start and its length, and no line runs on for ever. Cut after redaction and
# escaping, so no cut can split a secret out of its mask or a control out of its escape.
WORD_MAX = 200  # a longer word (a quoted value) shows its first WORD_SHOWN characters
WORD_SHOWN = 80
LINE_MAX = 1000  # a longer line keeps its start and its end (where the "why" usually is)
_LONG_WORD = re.compile(rf"(?<!\S)\S{{{WORD_MAX + 1},}}")


def cut(line: str, words: bool = True) -> str:
    """LINE with each word over WORD_MAX characters (WORDS) cut to its start and its
    length, and the line itself bounded by LINE_MAX."""
    if words and len(line) > WORD_MAX:
        line = _LONG_WORD.sub(lambda m: f"{m[0][:WORD_SHOWN]}... ({len(m[0])} characters)", line)
    if len(line) > LINE_MAX:
        head, tail = LINE_MAX * 7 // 10, LINE_MAX // 5
        line = f"{line[:head]} ... ({len(line) - head - tail} characters left out) ... {line[-tail:]}"
    return line


def cut_block(text: str, words: bool = True) -> str:
    return "\n".join(cut(line, words) for line in text.split("\n"))


def terminal_line(text: str) -> str:
    """TEXT as one line for the terminal: redacted, escaped and cut (doctor's report)."""
    return cut(escape(redact(text)))


class Lines(str):
    """A report made of escaped lines: its newlines are its own."""


def lines(*shown: str) -> Lines:
    """A report of these lines, each escaped: a newline inside one cannot start another."""
    return Lines("\n".join(escape(line) for line in shown))

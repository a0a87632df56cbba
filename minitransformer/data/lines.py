"""Lines of text as the command line reads and writes them: one sentence a
line in, one printable line out, so outputs stay aligned with inputs."""

from __future__ import annotations

import io
import re
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

__all__ = ["read_lines", "windows", "one_line", "LongLines"]

_LINE_END = re.compile(r"\r\n|\r|\n")


def read_lines(stream: TextIO) -> Iterator[str]:
    """The lines of ``stream`` without their ends, which may be ``\\n``,
    ``\\r\\n`` or a lone ``\\r``; bytes that are not UTF-8 become U+FFFD. Read as
    they come when ``stream`` has a binary buffer (a pipe or a file)."""
    if hasattr(stream, "buffer"):
        text = io.TextIOWrapper(stream.buffer, encoding="utf-8", errors="replace", newline=None)
        for line in text:
            yield line.removesuffix("\n")
        text.detach()
        return
    lines = _LINE_END.split(stream.read())
    if lines and lines[-1] == "":
        lines.pop()  # the line end of the last line
    yield from lines


def windows(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    """``lines`` in lists of ``size`` (the last may be shorter), each given
    as soon as it is full."""
    window: list[str] = []
    for line in lines:
        window.append(line)
        if len(window) == size:
            yield window
            window = []
    if window:
        yield window


def one_line(text: str) -> str:
    """``text`` as one printable line: whitespace runs (line breaks included)
    become one space and control characters (e.g. the ESC of a terminal
    escape sequence stored in a vocabulary) are dropped."""
    text = " ".join(text.split())
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cc")


class LongLines:
    """Counts the source lines longer than a model's ``limit`` positions
    (decoding translates their first ``limit`` pieces), or refuses the first
    one (``refuse``: a ``ValueError`` naming it)."""

    def __init__(self, tokenizer: Any, limit: int | None, refuse: bool = False) -> None:
        self.tokenizer, self.limit, self.refuse, self.count = tokenizer, limit, refuse, 0

    def check(self, lines: list[str], first: int = 0) -> None:
        """Check ``lines``, the first of which is line ``first + 1`` of the input."""
        if self.limit is None:
            return
        for i, line in enumerate(lines):
            n = len(self.tokenizer.encode(line)) if line.strip() else 0
            if n > self.limit and self.refuse:
                raise ValueError(f"line {first + i + 1} has {n} pieces, more than the model's "
                                 f"{self.limit} positions; {first} earlier lines were written "
                                 f"(--long-lines truncate translates its first {self.limit})")
            self.count += n > self.limit

    def __str__(self) -> str:
        return (f"{self.count} line{'s' * (self.count != 1)} longer than the model's "
                f"{self.limit} positions: translated the first {self.limit} pieces of each "
                "(--long-lines error refuses them)")

"""Line wrapping for verdicts, in any language: English breaks at spaces,
Chinese (and other text written without spaces) between its characters.

Book pages do not wrap code output, so a verdict is wrapped before it is
printed. :func:`wrap` measures text in terminal columns: a wide character
(East Asian Width ``W`` or ``F``, e.g. 注 or ，) takes two columns, as it
does in a monospace font beside Latin letters. A line may break at a run of
spaces (dropped, as :func:`textwrap.fill` does) or between two characters
of which at least one is wide, except before closing punctuation (，。）…)
and after opening punctuation (（“), so a comma never starts a line.
Text without wide characters is wrapped exactly as
``textwrap.fill(..., break_on_hyphens=False, break_long_words=False)``
wraps it: a word longer than the line is kept whole.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["VERDICT_WIDTH", "char_width", "text_width", "wrap"]

#: Columns a verdict is wrapped to: the book's code column shows about 77
#: characters at 1280 px (a CJK character counts as two columns).
VERDICT_WIDTH = 76

#: Characters a line may not start with (closing punctuation, Chinese and ASCII).
NO_LINE_START = frozenset("，。、；：？！）》」』”’〉】…·,.;:?!)]}%")
#: Characters a line may not end with (opening punctuation).
NO_LINE_END = frozenset("（《「『“‘〈【([{")


def char_width(char: str) -> int:
    """Columns ``char`` takes in a monospace font: 2 if it is wide, else 1."""
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def text_width(text: str) -> int:
    """Columns ``text`` takes (wide characters count 2)."""
    return sum(char_width(c) for c in text)


def _chunks(line: str) -> list[str]:
    """``line`` cut where it may break: runs of spaces are chunks of their own,
    and a word is cut between two characters when one of them is wide (unless
    the punctuation rules forbid it)."""
    out = []
    for piece in re.split(r"( +)", line):
        if not piece:
            continue
        start = 0
        for i in range(1, len(piece)):
            before, after = piece[i - 1], piece[i]
            wide = char_width(before) == 2 or char_width(after) == 2
            if wide and after not in NO_LINE_START and before not in NO_LINE_END:
                out.append(piece[start:i])
                start = i
        out.append(piece[start:])
    return out


def _fill(line: str, width: int, initial: str, subsequent: str) -> str:
    """One paragraph wrapped to ``width`` columns, indents included."""
    lines: list[str] = []
    current: list[str] = []
    used = text_width(initial)
    for chunk in _chunks(line):
        if chunk.isspace():
            if current:  # spaces at the start of a line are dropped
                current.append(chunk)
                used += len(chunk)
            continue
        size = text_width(chunk)
        if current and used + size > width:
            while current and current[-1].isspace():  # so are spaces at its end
                used -= len(current.pop())
            lines.append((subsequent if lines else initial) + "".join(current))
            current, used = [], text_width(subsequent)
        current.append(chunk)
        used += size
    while current and current[-1].isspace():
        current.pop()
    if current:
        lines.append((subsequent if lines else initial) + "".join(current))
    return "\n".join(lines)


def wrap(text: str, width: int = VERDICT_WIDTH, first: str = "") -> str:
    """Wrap each line of a verdict to ``width`` columns; ``first`` starts the
    first line, and every other line (wrapped or not) is indented by three
    spaces."""
    lines = text.split("\n")
    out = [_fill(lines[0].strip(), width, first, "   ")]
    out += [_fill(line.strip(), width, "   ", "   ") for line in lines[1:]]
    return "\n".join(out)

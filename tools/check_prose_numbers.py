"""Check that the numbers a chapter's prose states appear in that chapter's outputs.

    python tools/check_prose_numbers.py notebooks/*.ipynb        # report; exit 1 on a violation
    python tools/check_prose_numbers.py --all notebooks/04_*.ipynb   # every number and its verdict
    python tools/check_prose_numbers.py --json notebooks/*.ipynb     # violations, machine-readable

The book's rule is that a number in the prose comes from an output beside
it. This tool finds the numbers in every markdown cell and looks for each in
the notebook's stored outputs (``make execute`` refreshes them) and in its
code (a setting such as ``STEPS = 600`` may be quoted too). Why a checker
and not generated prose (myst-nb ``glue``): glue roles render only in the
built book; in Colab and Jupyter the reader would see ``{glue:}`key```
instead of the number. With a checker the prose stays plain Markdown
everywhere, and the test (``tests/test_prose_numbers.py``) fails when a
re-run moves a number the prose still quotes.

**Matching** tolerates formatting: a prose number matches an output or code
number that rounds to it at the prose's precision (``0.43`` matches
``0.4312``; ``2.40`` matches ``2.4``; ``600`` matches ``612``: trailing zeros
of an integer count as rounding), a percentage matches the fraction or the
percentage (``73.4%`` matches ``0.734`` and ``73.4``), thousands separators
and signs are ignored (``63,119,496``, ``−0.5``), and ``million``,
``thousand`` and ``billion`` (or ``k``, ``M``) scale the number (``63
million`` matches ``63,119,496``). Half-way cases round either way.

**Not checked**, because they are not measurements: text inside math
(``$...$``, ``$$...$$``), code spans and roles (``{cite:p}`...```), code
blocks, URLs and link targets, headings, HTML tags and comments, directive
options (``:label:``), list numbering, numbers glued to a word (``Q9``,
``fp16``, ``BLEU-4``, ``3rd``), both sides of a fraction ``1/3``, years
(1900 to 2039), integers below 10 (and the far end of a range starting
below 10: rows 9-63), and a number right after *chapter*,
*section*, *figure*, *table*, *equation*, *exercise*, *Python*, *PyTorch*
or *version*.

**Marking a number that is not measured.** Literature constants and other
deliberate non-measurements are declared in the same markdown cell with an
HTML comment, which renders as nothing in Jupyter Book, Jupyter and Colab::

    The paper reports 28.4 BLEU with the big model after 3.5 days on 8 GPUs.
    <!-- not measured: 28.4, 3.5 (the paper's Table 2) -->

The part before the parentheses lists the numbers as the prose writes them
(``65 million`` may be listed as ``65``); the parenthesis says why, and is
required. A listed number that no longer occurs in the cell is reported, so
the marks cannot outlive the sentences they excuse.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]

# A number as prose or outputs write it: optional sign, digits with optional
# thousands separators, decimals, exponent; then an optional unit (%, ×, scale).
_NUMBER = re.compile(
    r"(?P<sign>[-−+]?)(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?P<frac>\.\d+)?"
    r"(?P<exp>[eE][-−+]?\d+)?"
    r"(?P<unit>\s?%|\s?×|\s*(?:thousand|million|billion)\b|[kKM](?![\w]))?"
)
_SCALES = {"thousand": 3, "k": 3, "K": 3, "million": 6, "M": 6, "billion": 9}
# Words after which a number names a part of the book or a software version.
_REFERENCE_WORDS = re.compile(
    r"(?:chapters?|sections?|§|figures?|fig\.|tables?|equations?|eq\.|exercises?"
    r"|python|pytorch|torch|version|v)\s*(?:\d+\s*(?:,|and|or|to|-|–)\s*)*$",
    re.IGNORECASE,
)
# Words that make an integer's trailing zeros a rounding: "about 8,000".
_APPROXIMATE = re.compile(
    r"(?:about|around|roughly|approximately|nearly|almost|some|over|under|~|≈)\s*$",
    re.IGNORECASE,
)
_MARKER = re.compile(r"<!--\s*not measured:(?P<body>.*?)-->", re.DOTALL | re.IGNORECASE)


@dataclass
class ProseNumber:
    """A number found in a markdown cell."""

    text: str  # as written, e.g. "73.4%"
    value: str  # the decimal number before any scale, without sign or separators
    places: int  # decimal places the prose gives (negative: integer trailing zeros)
    percent: bool
    scale: int  # power of ten of a following "million" etc.
    context: str  # the surrounding words


@dataclass
class Violation:
    """A prose number that no output or code of its notebook shows, or a bad mark."""

    notebook: str
    cell: int  # index of the markdown cell in the notebook
    cell_id: str
    number: str
    context: str
    problem: str

    def __str__(self) -> str:
        return (f"{self.notebook} cell {self.cell} ({self.cell_id}): {self.number!r} "
                f"{self.problem}: ...{self.context}...")


# --- reading the prose --------------------------------------------------------


def _blank(match: re.Match) -> str:
    """Replace a match by as many spaces (newlines kept), so positions stay put."""
    return re.sub(r"[^\n]", " ", match.group(0))


_CODE_DIRECTIVES = ("{code-cell}", "{code}", "{code-block}", "{math}", "{literalinclude}")


def _strip_fences(text: str) -> str:
    """Blank out code blocks; keep the body of directives (exercise, note...) minus options."""
    out, open_fences = [], []  # stack of (fence, keep the body?)
    for line in text.split("\n"):
        stripped = line.strip()
        fence = re.match(r"(`{3,}|~{3,})\s*(\S*)", stripped)
        inside_code = bool(open_fences) and not open_fences[-1][1]
        if fence and open_fences and not fence.group(2) and fence.group(1)[0] == \
                open_fences[-1][0][0] and len(fence.group(1)) >= len(open_fences[-1][0]):
            open_fences.pop()  # a closing fence
            out.append("")
        elif fence and not inside_code:
            info = fence.group(2)
            open_fences.append((fence.group(1),
                                info.startswith("{") and info not in _CODE_DIRECTIVES))
            out.append("")
        elif inside_code or (open_fences and re.match(r"\s*:[\w-]+:", line)):
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def prose_text(markdown: str) -> str:
    """The markdown with everything that is not checked prose blanked out."""
    text = re.sub(r"<!--.*?-->", _blank, markdown, flags=re.DOTALL)
    text = _strip_fences(text)
    text = re.sub(r"\$\$.*?\$\$", _blank, text, flags=re.DOTALL)
    text = re.sub(r"(?<![\\$])\$(?![\s$])(?:[^$\n]|\n(?!\s*\n))+?(?<![\s\\])\$", _blank, text)
    text = re.sub(r"(\{[\w:.-]+\})?(`+).*?\2", _blank, text, flags=re.DOTALL)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", _blank, text)  # images
    text = re.sub(r"(?<=\])\([^)]*\)", _blank, text)  # link targets
    text = re.sub(r"<https?://[^>]*>|https?://\S+", _blank, text)
    text = re.sub(r"</?[a-zA-Z][^>]*>", _blank, text)  # HTML tags
    text = re.sub(r"^\s{0,3}#{1,6}\s.*$", _blank, text, flags=re.MULTILINE)  # headings
    text = re.sub(r"^(\s*)(\d+)([.)]\s)", lambda m: m.group(1) + " " * len(m.group(2)) + m.group(3),
                  text, flags=re.MULTILINE)  # list numbering
    return text


def _parse(match: re.Match) -> tuple[str, int, bool, int]:
    """(value, places, percent, scale) of a number match."""
    digits = match.group("int").replace(",", "")
    frac = match.group("frac") or ""
    value = digits + frac
    if match.group("exp"):
        value = str(Decimal(value + match.group("exp").replace("−", "-")).normalize())
        places = max(0, -Decimal(value).as_tuple().exponent)
    elif frac:
        places = len(frac) - 1
    else:
        places = -(len(digits) - len(digits.rstrip("0"))) if digits.strip("0") else 0
    unit = (match.group("unit") or "").strip()
    return value, places, unit == "%", _SCALES.get(unit, 0)


def prose_numbers(markdown: str) -> list[ProseNumber]:
    """The numbers in a markdown cell's prose that must come from outputs."""
    text = prose_text(markdown)
    found = []
    for m in _NUMBER.finditer(text):
        start, end = m.start(), m.end()
        before = text[max(0, start - 40):start]
        after = text[end:end + 2]
        sign = m.group("sign")
        if before[-1:].isalpha() or before[-1:] in "_.\\^" or (
                not sign and before[-1:].isdigit()):
            continue  # glued to a word: x0, fp16, BLEU-4, 1.2.3
        if sign and before[-1:].isdigit():
            sign = ""  # the second end of a range: 0.75-0.78
        if after[:1].isalpha() and not m.group("unit") or after[:1] == "/" or before[-1:] == "/":
            continue  # 3rd, 2D, 1/3
        if re.match(r"\.\d", after):
            continue  # a version such as 3.11.7
        value, places, percent, scale = _parse(m)
        plain_integer = places <= 0 and not percent and not scale and not m.group("exp")
        if plain_integer and (Decimal(value) < 10 or (
                sign != m.group("sign") and re.search(r"(?<![\d.,])\d$", before))):
            continue  # counts and indices: 3 seeds, head 0, rows 9-63
        if plain_integer and not m.group("sign") and 1900 <= Decimal(value) <= 2039 \
                and "," not in m.group("int"):
            continue  # a year
        if _REFERENCE_WORDS.search(before):
            continue  # chapter 3, section 2.1, Python 3.11
        operand_after = re.match(r"\s*[·×*+/^²³]\s*[\d(]|[⁰¹²³⁴⁵⁶⁷⁸⁹⁻]", text[end:end + 8])
        if re.search(r"[·×*+/^]\s*$", before) or operand_after:
            continue  # an operand of arithmetic written in the prose: 4·512² + 4·512
        if places < 0 and not scale and not _APPROXIMATE.search(before):
            places = 0  # "600 steps" means 600; "about 600" may be 612
        context = re.sub(r"\s+", " ", text[max(0, start - 50):end + 30]).strip()
        text_as_written = m.group(0).strip()[len(m.group("sign")) - len(sign):]
        found.append(ProseNumber(text_as_written, value, places, percent, scale, context))
    return found


def marked_numbers(markdown: str) -> tuple[dict[str, str], list[str]]:
    """``({number as listed: reason}, [problems])`` from the cell's ``not measured`` marks."""
    marked, problems = {}, []
    for m in _MARKER.finditer(markdown):
        body = " ".join(m.group("body").split())
        parts = re.fullmatch(r"(?P<nums>.*?)\s*\((?P<reason>[^()]*\S[^()]*)\)\s*", body)
        if not parts or not parts.group("nums").strip():
            problems.append(f"mark <!-- not measured:{m.group('body')}--> needs "
                            "'NUMBER, NUMBER (reason)'")
            continue
        for number in re.split(r"\s*[,;]\s+|\s*;\s*", parts.group("nums").strip()):
            marked[number.strip()] = parts.group("reason").strip()
    return marked, problems


def _marked(number: ProseNumber, marked: dict[str, str]) -> str | None:
    for listed in marked:
        m = _NUMBER.search(listed)
        if m and m.group(0).strip() and _parse(m)[0] == number.value:
            return listed
    return None


# --- reading the outputs ------------------------------------------------------


def _output_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") in ("execute_result", "display_data"):
            for kind in ("text/plain", "text/html", "text/markdown", "text/latex"):
                data = out.get("data", {}).get(kind)
                if data:
                    parts.append(data if isinstance(data, str) else "".join(data))
        elif out.get("output_type") == "error":
            parts.append(out.get("evalue", ""))
    return "\n".join(parts)


class Sources:
    """Every number a notebook's outputs and code show, ready to match prose against."""

    def __init__(self, texts: list[str]):
        self.values: list[Decimal] = []
        for text in texts:
            for m in _NUMBER.finditer(text):
                try:
                    value = Decimal(m.group("int").replace(",", "") + (m.group("frac") or "")
                                    + (m.group("exp") or "").replace("−", "-"))
                except InvalidOperation:
                    continue
                self.values.append(value)
                if (m.group("unit") or "").strip() == "%":
                    self.values.append(value / 100)
                if "," in m.group("int"):  # "1,2" could also be a list: 1 and 2
                    self.values += [Decimal(p) for p in m.group("int").split(",")]
        self._rounded: dict[int, set[Decimal]] = {}

    def rounded(self, places: int) -> set[Decimal]:
        """All values rounded to ``places`` decimals (negative: tens, hundreds...)."""
        if places not in self._rounded:
            quantum = Decimal(1).scaleb(-places)
            rounded = set()
            for v in self.values:
                for mode in (ROUND_HALF_UP, ROUND_HALF_EVEN):
                    try:
                        rounded.add(v.quantize(quantum, rounding=mode))
                    except InvalidOperation:
                        pass
            self._rounded[places] = rounded
        return self._rounded[places]

    def writes(self, number: ProseNumber) -> bool:
        """Whether some number here is exactly ``number`` (as scaled)."""
        if not hasattr(self, "_exact"):
            self._exact = {v.normalize() for v in self.values}
        value = Decimal(number.value).scaleb(number.scale)
        return value.normalize() in self._exact or (
            number.percent and (value / 100).normalize() in self._exact)

    def shows(self, number: ProseNumber) -> bool:
        """Whether some output or code number rounds to ``number``."""
        value = Decimal(number.value)
        places = number.places
        candidates = [(value.scaleb(number.scale), places - number.scale)]
        if number.percent:
            candidates.append((value / 100, places + 2))
        for target, p in candidates:
            quantum = Decimal(1).scaleb(-p)
            try:
                rounded = target.quantize(quantum)
            except InvalidOperation:  # more digits than the context holds: no output has them
                continue
            if rounded in self.rounded(p):
                return True
        return False


_RECAP = re.compile(r"exercise|summary|what we found|conclusion", re.IGNORECASE)
_HEADING = re.compile(r"^\s{0,3}(#{2,3})\s+(.*)$", re.MULTILINE)


def sectioned(nb) -> list[tuple[int, str, int]]:
    """``(cell index, text, section)`` for every code cell and every part of a markdown cell.

    A heading of level 2 or 3 opens a section (its number is the index of
    the cell holding the heading); a markdown cell is cut at its headings so
    prose above a heading stays in the section before it. The title's
    section (before the first such heading, number -1) and sections whose
    heading says *exercise*, *summary*, *what we found* or *conclusion*
    recap the chapter and look at the whole notebook (also -1).
    """
    parts, current = [], -1
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            parts.append((index, cell.source, current))
            continue
        start = 0
        for heading in _HEADING.finditer(cell.source):
            parts.append((index, cell.source[start:heading.start()], current))
            current = -1 if _RECAP.search(heading.group(2)) else index
            start = heading.start()
        parts.append((index, cell.source[start:], current))
    return parts


def check_notebook(path: Path, verbose: bool = False) -> tuple[list[Violation], list[str]]:
    """``(violations, lines)``: what no output shows, and (``verbose``) every verdict.

    A prose number is *shown* when an output of a code cell in its section
    rounds to it (see :func:`sectioned`), or when the notebook's code writes
    exactly that number (a setting such as ``STEPS = 600``).
    """
    nb = nbformat.read(path, as_version=4)
    parts = sectioned(nb)
    code_parts = [(i, sec) for i, _, sec in parts if nb.cells[i].cell_type == "code"]
    everywhere = Sources([_output_text(nb.cells[i]) for i, _ in code_parts])
    code = Sources([nb.cells[i].source for i, _ in code_parts])
    local: dict[int, Sources] = {}
    violations, lines = [], []
    name = path.name
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        cell_id = cell.get("id", "")
        marked, problems = marked_numbers(cell.source)
        for problem in problems:
            violations.append(Violation(name, index, cell_id, "", "", problem))
        every_number = []
        for _, text, section in (p for p in parts if p[0] == index):
            if section == -1:
                outputs = everywhere
            else:
                if section not in local:
                    local[section] = Sources([_output_text(nb.cells[i])
                                              for i, sec in code_parts if sec == section])
                outputs = local[section]
            numbers = prose_numbers(text)
            every_number += numbers
            for number in numbers:
                listed = _marked(number, marked)
                if outputs.shows(number):
                    verdict = "shown by an output"
                elif code.writes(number):
                    verdict = "written in the code"
                elif listed is not None:
                    verdict = f"marked not measured ({marked[listed]})"
                else:
                    verdict = "NOT SHOWN"
                    where = "chapter" if section == -1 else "section"
                    violations.append(Violation(
                        name, index, cell_id, number.text, number.context,
                        f"is in no output of its {where} and not in the code"))
                if verbose:
                    lines.append(f"{name} cell {index}: {number.text!r}: {verdict}: "
                                 f"{number.context}")
        for listed in marked:
            if not any(_marked(n, {listed: ""}) for n in every_number):
                violations.append(Violation(
                    name, index, cell_id, listed, "",
                    "is marked not measured, but the cell states no such checked number"))
    return violations, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    parser.add_argument("--all", action="store_true", help="print every number and its verdict")
    parser.add_argument("--json", action="store_true", help="print the violations as JSON")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    every = []
    for path in paths:
        violations, lines = check_notebook(path, verbose=args.all)
        every += violations
        if args.all:
            print("\n".join(lines))
        elif not args.json:
            for v in violations:
                print(v)
    if args.json:
        print(json.dumps([asdict(v) for v in every], indent=1, ensure_ascii=False))
    elif every:
        print(f"{len(every)} prose number(s) not shown by their notebook's outputs "
              f"in {len({v.notebook for v in every})} notebook(s)")
    else:
        print(f"every prose number in {len(paths)} notebook(s) is shown by its outputs")
    return 1 if every else 0


if __name__ == "__main__":
    sys.exit(main())

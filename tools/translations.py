"""Translation files: English text cut into units, and the entries that translate them.

The machinery behind ``tools/make_chinese_edition.py`` (which says how the
Chinese edition uses it; ``i18n/README.md`` says how a translator works).

- A *unit* is one piece of English to translate: a markdown cell of a
  notebook (keyed by its cell id) or a block of a markdown page
  (:func:`split_markdown`).
- A translation file is YAML: ``source`` (the English page) and
  ``entries``, one per unit in page order, each with ``id`` (cells only),
  ``hash`` (:func:`text_hash` of ``en``, written by the tool), ``en`` (the
  English it translates, for reference), ``zh`` (the translation), and
  ``old_en`` while ``zh`` still translates that older English.
- :func:`match` pairs units with entries and :class:`Pair` says the state of
  each; :func:`update_entries` records English changes as to-do entries
  (the old Chinese stays beside the new English).
- :func:`translation_problems` checks that a translation keeps the
  structure of its English: directives, headings, code, math, link targets.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import yaml


@dataclass(frozen=True)
class Unit:
    """One piece of English text to translate: a markdown cell, or a block of a page."""

    text: str
    id: str | None = None  # the cell id (notebooks); None for blocks of a markdown page


def text_hash(text: str) -> str:
    """The first 12 hex digits of the SHA-256 of ``text`` (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


# --------------------------------------------------------------------------- markdown


_FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_OPTION = re.compile(r"^\s*:[\w-]+:")


#: The kinds of pieces :func:`split_markdown` cuts a page into.
TEXT, CODE, MARKUP = "text", "code", "markup"


def split_markdown(text: str) -> list[tuple[str, str]]:
    """Cut markdown into ``(piece, kind)`` pairs whose pieces put together give ``text``.

    ``TEXT`` pieces, the ones to translate, are runs of non-blank lines
    (without their last newline). ``CODE`` pieces are fenced code blocks.
    ``MARKUP`` pieces are copied as they are: blank lines, front matter, and
    the opening and closing fences of MyST directives with the ``:option:``
    lines after an opening fence, so that the text inside a directive such
    as ``{glossary}`` is translated block by block.
    """
    lines = text.splitlines(keepends=True)
    out: list[tuple[str, str]] = []
    prose: list[str] = []

    def flush() -> None:
        if prose:
            block = "".join(prose)
            out.append((block.removesuffix("\n"), TEXT))
            if block.endswith("\n"):
                out.append(("\n", MARKUP))
            prose.clear()

    directives: list[str] = []  # the fences of the directives open at this line
    i = 0
    if lines and lines[0].strip() == "---":  # front matter
        end = next((j for j in range(1, len(lines)) if lines[j].strip() == "---"), 0)
        out.append(("".join(lines[: end + 1]), MARKUP))
        i = end + 1
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush()
            marks, info = fence.group(1), fence.group(2).strip()
            if not info and directives and marks == directives[-1]:
                directives.pop()
                out.append((line, MARKUP))
                i += 1
            elif info.startswith("{"):
                directives.append(marks)
                out.append((line, MARKUP))
                i += 1
                while i < len(lines) and _OPTION.match(lines[i]):
                    out.append((lines[i], MARKUP))
                    i += 1
            else:  # a code block, up to its closing fence
                j = i + 1
                while j < len(lines) and lines[j].strip() != marks:
                    j += 1
                out.append(("".join(lines[i : j + 1]), CODE))
                i = j + 1
        elif not line.strip():
            flush()
            out.append((line, MARKUP))
            i += 1
        else:
            prose.append(line)
            i += 1
    flush()
    return out


def split_code(text: str) -> tuple[list[str], str]:
    """The code blocks of markdown ``text``, and the text without them."""
    pieces = split_markdown(text)
    return ([piece.strip() for piece, kind in pieces if kind == CODE],
            "".join(piece for piece, kind in pieces if kind != CODE))


# --------------------------------------------------------------------------- translation files

class _Dumper(yaml.SafeDumper):
    pass


def _represent_str(dumper: yaml.SafeDumper, text: str):
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _represent_str)

_ENTRY_KEYS = ("id", "hash", "en", "old_en", "zh")

_FILE_HEADER = """\
# The Chinese text of {source}: one entry per {unit}, in page order.
# Translators edit `zh` only. An entry is to do while its `zh` is empty or it has
# `old_en`: the English that `zh` was written for; revise `zh` to the new `en`,
# then delete `old_en`. `hash` is written by the tool. Written by
# tools/make_chinese_edition.py --update, which keeps no comments: see i18n/README.md.
"""


def dump_entries(entries: list[dict], source: str, unit: str) -> str:
    """The YAML text of a translation file (entries in page order)."""
    body = [{key: entry[key] for key in _ENTRY_KEYS if key in entry} for entry in entries]
    text = yaml.dump({"source": source, "entries": body}, Dumper=_Dumper, allow_unicode=True,
                     sort_keys=False, width=100)
    if yaml.safe_load(text)["entries"] != body:  # block scalars cannot hold every string
        raise AssertionError(f"{source}: the translation file would not read back as written")
    return _FILE_HEADER.format(source=source, unit=unit) + text


def load_entries(path: Path) -> list[dict]:
    """The entries of a translation file (``zh`` is ``""`` where the file leaves it empty)."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    entries = data.get("entries") or []
    for n, entry in enumerate(entries, start=1):
        unknown = set(entry) - set(_ENTRY_KEYS)
        if unknown or "en" not in entry:
            raise SystemExit(f"{path}: entry {n} has keys {sorted(entry)}; "
                             f"expected {', '.join(_ENTRY_KEYS)} (en required)")
        entry.setdefault("zh", "")
        entry["zh"] = entry["zh"] or ""
    return entries


# --------------------------------------------------------------------------- matching


@dataclass
class Pair:
    """A unit of the English page and the entry that translates it (either may be missing)."""

    unit: Unit | None
    entry: dict | None

    @property
    def state(self) -> str:
        """``translated``, ``todo``, ``new`` (no entry), ``changed`` (hash differs), ``removed``."""
        if self.entry is None:
            return "new"
        if self.unit is None:
            return "removed"
        if self.entry.get("hash") != text_hash(self.unit.text):
            return "changed"
        if not self.entry["zh"].strip() or "old_en" in self.entry:
            return "todo"
        return "translated"

    @property
    def label(self) -> str:
        """The cell id, or the first words of a block."""
        unit = self.unit or Unit(self.entry["en"], self.entry.get("id"))
        return unit.id or unit.text.strip().splitlines()[0][:50]


def match(units_: list[Unit], entries: list[dict]) -> list[Pair]:
    """Pair units with entries: by cell id, or for blocks of a page by aligning their hashes.

    Unchanged blocks pair by equal hashes; the blocks between two unchanged
    ones pair in order (an edited paragraph keeps its old translation as a
    hint); what is left over is new or removed.
    """
    if units_ and units_[0].id is not None:
        by_id = {entry.get("id"): entry for entry in entries}
        known = {unit.id for unit in units_}
        pairs = [Pair(unit, by_id.get(unit.id)) for unit in units_]
        return pairs + [Pair(None, entry) for entry in entries if entry.get("id") not in known]
    pairs = []
    matcher = difflib.SequenceMatcher(
        None, [text_hash(u.text) for u in units_], [e.get("hash") for e in entries], autojunk=False)
    for _, i1, i2, j1, j2 in matcher.get_opcodes():
        old, new = entries[j1:j2], units_[i1:i2]
        for k in range(max(len(old), len(new))):
            pairs.append(Pair(new[k] if k < len(new) else None, old[k] if k < len(old) else None))
    return pairs


def update_entries(pairs: list[Pair]) -> list[dict]:
    """The entries after recording the English as it is now (see ``--update``)."""
    out = []
    for pair in pairs:
        unit, entry = pair.unit, pair.entry
        if unit is None:
            continue  # the English unit was removed
        new = {"id": unit.id} if unit.id is not None else {}
        new.update(hash=text_hash(unit.text), en=unit.text)
        if entry is None:
            new["zh"] = ""
        elif pair.state == "changed":
            if entry["zh"].strip():
                new["old_en"] = entry.get("old_en", entry["en"])
            new["zh"] = entry["zh"]
        else:
            new = {**entry, **new}
        out.append(new)
    return out


# --------------------------------------------------------------------------- checks


_ROLE = re.compile(r"\{(doc|ref|numref|eq|term|download|cite(?::\w+)?)\}`([^`]*)`")
_CJK = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef"
_CJK_LINE_BREAK = re.compile(f"[{_CJK}]\n[{_CJK}]")


def structure(text: str) -> dict[str, list]:
    """What a translation must keep of the English: directives and their options, headings,
    code blocks, display math, and the targets of cross-references, glossary terms and
    citations (link texts may change: ``{term}`多头注意力 <multi-head attention>```)."""
    code, prose = split_code(text)
    targets = set()
    for role, body in _ROLE.findall(prose):
        explicit = re.search(r"<([^<>]*)>\s*$", body)
        target = (explicit.group(1) if explicit else body).strip()
        if role.startswith("cite"):
            targets |= {f"cite:{key.strip()}" for key in target.split(",")}
        else:
            targets.add(f"{role}:{target.lower() if role == 'term' else target}")
    lines = prose.splitlines()
    return {
        "directives": [line.strip() for line in lines if _FENCE.match(line)],
        "options": [line.strip() for line in lines if _OPTION.match(line)],
        "headings": [len(h) for h in re.findall(r"^(#{1,6})\s", prose, re.M)],
        "code blocks": code,
        "display math": [" ".join(m.split()) for m in re.findall(r"\$\$(.+?)\$\$", prose, re.S)],
        "references": sorted(targets),
    }


def translation_problems(english: str, chinese: str) -> list[str]:
    """How ``chinese`` fails to keep the structure of ``english``, and line breaks that would
    show as spaces inside Chinese sentences."""
    out = []
    want, have = structure(english), structure(chinese)
    for key in want:
        if want[key] != have[key]:
            lost = [x for x in want[key] if x not in have[key]]
            extra = [x for x in have[key] if x not in want[key]]
            detail = (f"lost {lost}" if lost else "") + (" " if lost and extra else "") + (
                f"added {extra}" if extra else "") or "a different order or count"
            out.append(f"{key} differ from the English: {detail}")
    for found in _CJK_LINE_BREAK.finditer(split_code(chinese)[1]):
        out.append(f"a line break inside a Chinese sentence shows as a space: {found.group(0)!r}")
    return out

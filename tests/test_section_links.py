"""A "Backed by:" paragraph names the sections of other chapters that back a
claim: `[chapter 3](03_qkv_and_masks.ipynb), section "Padding masks"`. The
links point at the chapter's page (anchors would differ between the English
and the Chinese edition); the quoted titles say where on it to look. This
test checks that each quoted title is still a heading of the chapter linked
just before it, so a renamed section cannot leave a reader looking for it.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

CHAPTER_LINK = re.compile(r"\[chapter (\d+)\]\(((\d\d)_\w+\.ipynb)\)")
QUOTED = re.compile(r'"([^"]+)"')
HEADING = re.compile(r"^#{1,6} +(.+?)\s*$", re.M)


def _markdown(path: Path) -> list[str]:
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]


def _headings(path: Path) -> set[str]:
    return {h for text in _markdown(path) for h in HEADING.findall(text)}


def backed_by_references(path: Path) -> list[tuple[str, str, list[str]]]:
    """(link text, linked notebook, quoted section titles) for every chapter
    link in the notebook's "Backed by:" paragraphs."""
    refs = []
    for text in _markdown(path):
        for paragraph in re.split(r"\n\s*\n", text):
            if not paragraph.lstrip().startswith("Backed by:"):
                continue
            links = list(CHAPTER_LINK.finditer(paragraph))
            for i, link in enumerate(links):
                end = links[i + 1].start() if i + 1 < len(links) else len(paragraph)
                titles = QUOTED.findall(paragraph[link.end():end])
                refs.append((link.group(0), link.group(2), titles))
    return refs


CASES = [(p.name, ref) for p in NOTEBOOKS for ref in backed_by_references(p)]


def test_chapter_9_backs_its_answers():
    """Chapter 9 links every answer to the experiments behind it."""
    refs = [ref for name, ref in CASES if name == "09_interview_questions.ipynb"]
    assert len(refs) >= 19, refs


@pytest.mark.parametrize("notebook, ref", CASES, ids=[f"{n}:{r[0]}" for n, r in CASES])
def test_named_sections_exist(notebook, ref):
    link, target, titles = ref
    number = int(re.search(r"chapter (\d+)", link).group(1))
    assert int(target[:2]) == number, f"{notebook}: {link} names another chapter than it links"
    assert titles, f'{notebook}: {link} names no section (add: section "Its title")'
    headings = _headings(ROOT / "notebooks" / target)
    missing = [t for t in titles if t not in headings]
    assert not missing, (
        f"{notebook}: {link} names section(s) {missing}, which {target} no longer has; "
        f"its headings are: {sorted(headings)}")

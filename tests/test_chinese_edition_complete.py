"""The whole book is in Chinese: every page translated, nothing left to do (issue 16).

Kept on the branch ``zh-complete`` until the translation is done, then merged
into main; ``tests/test_chinese_edition.py`` checks everything else (that
``zh/`` is generated from the current English and translations, that code
and outputs are identical, that translations keep the English's structure).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import make_chinese_edition as zh  # noqa: E402

PAGES = zh.pages()


@pytest.mark.parametrize("page", PAGES, ids=[p.docname for p in PAGES])
def test_every_page_is_translated(page):
    status = zh.page_status(page)
    assert status.has_file, (f"{page.source} has no translation: start it with "
                             f"`python tools/make_chinese_edition.py --update {page.source}`")
    left = [f"{pair.label!r} ({pair.state})" for pair in status.pairs
            if pair.state != "translated"]
    assert not left, (f"{page.translation}: {len(left)} of {len(status.pairs)} units not "
                      "translated:\n  " + "\n  ".join(left)
                      + "\n(`python tools/make_chinese_edition.py --todo` shows them)")


def test_the_book_title_and_captions_are_translated():
    status = zh.book_status()
    left = [pair.label for pair in status.pairs if pair.state != "translated"]
    assert status.has_file and not left, f"{zh.BOOK_STRINGS}: not translated: {left}"


def test_every_chinese_chapter_is_a_notebook():
    placeholders = sorted(p.name for p in (ROOT / zh.EDITION / "notebooks").glob("*.md"))
    assert not placeholders, f"placeholder pages left in zh/notebooks: {placeholders}"


def test_the_checkers_speak_chinese_in_full():
    from minitransformer.exercises.locales import en
    from minitransformer.exercises.locales import zh as chinese

    assert zh.LANGUAGE_CELL is not None, "the Chinese chapters do not select Chinese verdicts"
    missing = sorted(set(en.MESSAGES) - set(chinese.MESSAGES))
    assert not missing, (f"minitransformer/exercises/locales/zh.py lacks {len(missing)} of "
                         f"{len(en.MESSAGES)} messages: {missing[:10]} ...")

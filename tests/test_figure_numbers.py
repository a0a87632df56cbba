"""book/_ext/figure_numbers.py: figures numbered per chapter (the built pages are checked by
tests/test_browser.py::test_figures_are_numbered_per_chapter)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book" / "_ext"))

import figure_numbers  # noqa: E402


def test_chapter_number_comes_from_the_file_name():
    assert figure_numbers.chapter_number("notebooks/10_translation_end_to_end") == 10
    assert figure_numbers.chapter_number("notebooks/00_overview") == 0
    assert figure_numbers.chapter_number("book/intro") is None
    assert figure_numbers.chapter_number("book/glossary") is None


def test_book_wide_numbers_become_per_chapter_numbers():
    # What Sphinx assigns without a numbered toctree: one run through the book.
    book_wide = {
        "notebooks/00_overview": {"figure": {"fig-b": (2,), "fig-a": (1,), "fig-c": (3,)}},
        "notebooks/07_layernorm_residuals": {"figure": {"fig-x": (29,), "fig-w": (28,)},
                                             "table": {"tab-1": (4,)}},
        "book/intro": {"figure": {"fig-i": (54,)}},
    }
    assert figure_numbers.renumber(book_wide) == {
        "notebooks/00_overview": {"figure": {"fig-a": (0, 1), "fig-b": (0, 2), "fig-c": (0, 3)}},
        "notebooks/07_layernorm_residuals": {"figure": {"fig-w": (7, 1), "fig-x": (7, 2)},
                                             "table": {"tab-1": (7, 1)}},
        "book/intro": {"figure": {"fig-i": (1,)}},
    }


def test_wide_figures_name_figures_of_the_book_and_are_marked():
    """reading.WIDE_FIGURES, the one list of the figures that keep their size on a phone
    (book/_ext/static/reading.css; test_browser.py::test_page_fits_a_phone measures them),
    names figures of the notebooks, and the transform marks those and only those."""
    import nbformat
    import reading
    from docutils import nodes

    root = Path(__file__).resolve().parents[1]
    names = {
        (cell.metadata.get("mystnb", {}).get("figure") or {}).get("name")
        for path in sorted((root / "notebooks").glob("*.ipynb"))
        for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"
    }
    assert reading.WIDE_FIGURES, "no figure is marked wide"
    assert set(reading.WIDE_FIGURES) <= names, set(reading.WIDE_FIGURES) - names
    assert "fig-cross-attention-heads" in reading.WIDE_FIGURES  # Fig. 10.7, 8-point labels

    doc = nodes.container()
    for name in (reading.WIDE_FIGURES[0], "fig-other"):
        figure = nodes.figure(ids=[name])
        figure += nodes.image(uri="x.png")
        doc += figure
    assert reading.mark_wide_figures(doc) == [reading.WIDE_FIGURES[0]]
    classes = [figure["classes"] for figure in doc.findall(nodes.figure)]
    assert classes == [["wide-figure"], []]
    assert reading.mark_wide_figures(doc) == []  # marked once


def test_punctuation_and_opening_marks_stay_with_their_math():
    """reading.keep_punctuation_with_math: the punctuation right after an inline formula and
    the opening mark right before it go into one span.nobr with it; nothing else moves."""
    import reading
    from docutils import nodes

    def paragraph(*children):
        p = nodes.paragraph()
        for child in children:
            p += child
        return p

    zh = paragraph(nodes.Text("权重（"), nodes.math(text="e^{-x}"), nodes.Text("）下溢，"),
                   nodes.math(text="d"), nodes.Text("。"))
    en = paragraph(nodes.Text("a, b (see "), nodes.math(text="x"), nodes.Text(", and "),
                   nodes.math(text="y"), nodes.Text(" here, ("))
    plain = paragraph(nodes.Text("no "), nodes.math(text="z"), nodes.Text(" punctuation"))
    doc = nodes.container()
    doc += [zh, en, plain]
    assert reading.keep_punctuation_with_math(doc) == 3
    held = [h.astext() for h in doc.findall(nodes.inline) if "nobr" in h["classes"]]
    assert held == ["（e^{-x}）", "d。", "x,"]
    # the text around is kept whole and in order
    assert zh.astext() == "权重（e^{-x}）下溢，d。"
    assert en.astext() == "a, b (see x, and y here, ("
    assert plain.astext() == "no z punctuation" and not list(plain.findall(nodes.inline))

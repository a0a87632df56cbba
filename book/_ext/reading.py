"""How the book's pages read: code that fits its column, Chinese typeset as Chinese.

- ``reading.css`` (screen): a code or output line longer than the text
  column wraps (``white-space: pre-wrap``) instead of being cut or scrolled
  sideways (``tools/format_notebooks.py`` formats the code cells to the
  column; what it cannot break, a long docstring line, wraps); below the
  desktop layout (a phone) a printed table (``output-table``,
  :class:`TableOutputs`) keeps its rows whole and scrolls sideways where the
  column is narrower; a displayed equation wider than the column scrolls
  rather than being cut (the long ones are written over lines); both show a
  scrollbar when they scroll (a phone's overlay scrollbar would not); on a
  phone the article header's buttons fit the screen; the sidebar title does
  not break inside a Chinese word; below the desktop layout the figures named in
  :data:`WIDE_FIGURES` keep the size they were drawn for and scroll sideways in their box
  (:class:`WideFigures` marks them ``wide-figure``).
- Search (``search-scorer.js``): the glossary's entries rank after the chapters'
  text (Sphinx ranks a glossary term, an index entry, above any page's text).
- An inline equation and the punctuation right after it (``$x$。``,
  ``$x$,``) and the opening bracket or quote right before it (``（$x$``) are
  held together (``span.nobr``), so a line never starts with a full stop,
  comma or 、 after math, nor ends with an opening mark before it (both
  editions).
- In the Chinese edition (``language: zh_CN``):

  * sphinx-togglebutton's hints ("Click to show" / "Click to hide") are set in
    Chinese, and ``reading-zh.js`` puts the theme's tooltips and labels that
    Sphinx leaves in English ("Link to this heading", "Toggle primary
    sidebar", ...) in Chinese, then marks ``<html data-ui-translated="zh">``;
  * a section whose heading is Chinese gets a readable anchor
    (``#第-1-部分十二个问题``, not ``#id7``);
  * sphinx-exercise's solution title reads "练习 (Q1) 的解答" (Chinese puts
    "of the exercise" first), not "解答 练习 (Q1)".
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

STATIC = Path(__file__).parent / "static"
#: Punctuation that must not start a line in Chinese text (GB/T 15834; JIS X 4051 kinsoku).
NO_LINE_START = "，。、；：！？）》」』”’〕】…,.;:!?)"
#: sphinx-togglebutton's hints in Chinese.
TOGGLE_HINTS = {"togglebutton_hint": "点击显示", "togglebutton_hint_hide": "点击隐藏"}
#: Opening marks that must not end a line (the same rules): one right before math stays with it.
NO_LINE_END = "（《「『“‘〔【("
_LEADING = re.compile(f"^[{re.escape(NO_LINE_START)}]+")
_TRAILING = re.compile(f"[{re.escape(NO_LINE_END)}]+$")


def is_chinese(config) -> bool:
    return (config.language or "").lower().startswith("zh")


_CJK = re.compile(r"[\u3400-\u9fff]")
_NOT_IN_SLUG = re.compile(r"[^\w\u3400-\u9fff-]+")


def heading_slug(title: str) -> str:
    """A readable anchor for a heading with Chinese in it: its words, lower case, joined by
    hyphens, Chinese characters kept ("第 1 部分：十二个问题" -> "第-1-部分十二个问题")."""
    words = (_NOT_IN_SLUG.sub("", word) for word in title.lower().split())
    return "-".join(word for word in words if word)


def readable_section_ids(app, doctree: nodes.document) -> None:
    """Give each section whose heading has Chinese in it a readable first id (docutils
    makes ``id7`` of a heading with no ASCII letters); its old ids stay as well, so links
    to them still work. Runs before Sphinx collects the page's table of contents."""
    if not is_chinese(app.config):
        return
    for section in doctree.findall(nodes.section):
        title = section.next_node(nodes.title)
        if title is None or not _CJK.search(title.astext()):
            continue
        slug = heading_slug(title.astext())
        if not slug or slug in section["ids"]:
            continue
        base, n = slug, 1
        while slug in doctree.ids:
            n += 1
            slug = f"{base}-{n}"
        section["ids"].insert(0, slug)
        doctree.ids[slug] = section


def _configure(app, config) -> None:
    config.html_static_path = [*config.html_static_path, str(STATIC)]
    app.add_css_file("reading.css")
    if not config.html_search_scorer:
        config.html_search_scorer = str(STATIC / "search-scorer.js")
    if is_chinese(config):
        app.add_js_file("reading-zh.js")
        for name, text in TOGGLE_HINTS.items():
            if name in config.values:
                config[name] = text


def keep_punctuation_with_math(doctree: nodes.Node) -> int:
    """Wrap each inline ``math`` node, the line-start-forbidden punctuation right after it
    (:data:`NO_LINE_START`: ``$x$。``, ``$x$,``) and the line-end-forbidden opening mark right
    before it (:data:`NO_LINE_END`: ``（$x$``) in ``inline(classes=["nobr"])``, so that a line
    neither starts with the one nor ends with the other; return how many were wrapped."""
    wrapped = 0
    for math in list(doctree.findall(nodes.math)):
        parent = math.parent
        if parent is None:
            continue
        index = parent.index(math)
        after = parent.children[index + 1] if index + 1 < len(parent.children) else None
        before = parent.children[index - 1] if index > 0 else None
        closing = _LEADING.match(str(after)) if isinstance(after, nodes.Text) else None
        opening = _TRAILING.search(str(before)) if isinstance(before, nodes.Text) else None
        if not closing and not opening:
            continue
        # by position: Text nodes compare as strings, so list.index could find another one
        first, last = index - (1 if opening else 0), index + (1 if closing else 0)
        for _ in range(first, last + 1):
            parent.pop(first)
        holder = nodes.inline(classes=["nobr"])
        if opening:
            holder += nodes.Text(opening.group(0))
        holder += math
        if closing:
            holder += nodes.Text(closing.group(0))
        pieces = [nodes.Text(str(before)[: opening.start()])] if opening else []
        pieces.append(holder)
        if closing:
            pieces.append(nodes.Text(str(after)[closing.end():]))
        for offset, piece in enumerate(p for p in pieces if not isinstance(p, nodes.Text) or p):
            parent.insert(first + offset, piece)
        wrapped += 1
    return wrapped


class PunctuationWithMath(SphinxPostTransform):
    """:func:`keep_punctuation_with_math` on every page (both editions: an English comma
    or full stop after a formula must not start a line either)."""

    default_priority = 900
    formats = ("html",)

    def run(self, **kwargs) -> None:
        keep_punctuation_with_math(self.document)


#: A row of a printed table: text, a gap of two or more spaces, more text (a gap before ``#``
#: is an inline comment of printed code, not a column).
_TABLE_ROW = re.compile(r"\S {2,}[^\s#]")


def is_table_output(text: str) -> bool:
    """Whether a printed output is a table: at least two of its lines have columns."""
    return sum(bool(_TABLE_ROW.search(line)) for line in text.splitlines()) >= 2


class TableOutputs(SphinxPostTransform):
    """Mark each printed output that is a table (:func:`is_table_output`) with the class
    ``output-table``: on a narrow screen ``reading.css`` keeps its rows whole (it scrolls
    sideways, with a scrollbar that shows, where the column is narrower), while other
    outputs wrap."""

    default_priority = 900
    formats = ("html",)

    def run(self, **kwargs) -> None:
        for block in self.document.findall(nodes.literal_block):
            if "output" in block["classes"] and is_table_output(block.astext()):
                block["classes"].append("output-table")


#: Figures too detailed to shrink to a phone's column (their labels would be 4-5 px tall at
#: 390 px), by figure name (the ``mystnb.figure.name`` of their cell): below the desktop
#: layout ``reading.css`` shows them at the size they were drawn for, in a box that scrolls
#: sideways with a scrollbar that shows (the page itself does not); tapping one opens its
#: image whole, as for every figure. The one place that says which figures these are.
WIDE_FIGURES = (
    "fig-cross-attention-heads",  # chapter 10: eight heads' heatmaps, labels at 8 points
    "fig-gqa-cache-time",  # chapter 12: two panels side by side
)


def mark_wide_figures(doctree: nodes.Node, names=WIDE_FIGURES) -> list[str]:
    """Give each figure named in ``names`` the class ``wide-figure``; return the names
    marked."""
    marked = []
    for figure in doctree.findall(nodes.figure):
        name = next((i for i in figure["ids"] if i in names), None)
        if name is not None and "wide-figure" not in figure["classes"]:
            figure["classes"].append("wide-figure")
            marked.append(name)
    return marked


class WideFigures(SphinxPostTransform):
    """:func:`mark_wide_figures` on every page (both editions: the names are the same)."""

    default_priority = 900
    formats = ("html",)

    def run(self, **kwargs) -> None:
        mark_wide_figures(self.document)


class ChineseSolutionTitle(SphinxPostTransform):
    """"解答 练习 (Q1)" -> "练习 (Q1) 的解答": runs after sphinx-exercise's title transforms."""

    default_priority = 30

    def run(self, **kwargs) -> None:
        if not is_chinese(self.config):
            return
        try:
            from sphinx_exercise.nodes import solution_node, translate
        except ImportError:
            return
        word = str(translate("Solution to"))
        for node in self.document.findall(solution_node):
            title = node.children[0] if node.children else None
            if not isinstance(title, nodes.title) or len(title.children) < 2:
                continue
            first, reference = title.children[0], title.children[1]
            if not (isinstance(first, nodes.Text) and str(first) == word):
                continue
            title.remove(first)
            if reference.children and isinstance(reference.children[0], nodes.Text):
                reference.replace(reference.children[0],
                                  nodes.Text(str(reference.children[0]).lstrip()))
            title += nodes.Text(f" 的{word}")
            node["title"] = title.astext()


def setup(app) -> dict:
    # Before sphinx-togglebutton writes its hints into the page (its own config-inited).
    app.connect("config-inited", _configure, priority=100)
    # Before Sphinx's table-of-contents collector (priority 500) reads the sections' ids.
    app.connect("doctree-read", readable_section_ids, priority=400)
    app.add_post_transform(ChineseSolutionTitle)
    app.add_post_transform(PunctuationWithMath)
    app.add_post_transform(TableOutputs)
    app.add_post_transform(WideFigures)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

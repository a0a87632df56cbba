"""Figure numbers per chapter: "Fig. 10.3" is chapter 10's third figure.

Sphinx numbers figures per section only under a numbered toctree
(``numfig_secnum_depth``); the book's ``_toc.yml`` parts are ``numbered: false``
(chapter titles carry no "1.2" prefixes), so Sphinx numbers every figure of the
book in one run (Fig. 1 .. Fig. 53). After Sphinx has assigned the numbers
(``env-get-updated``, where its toctree collector fills ``env.toc_fignumbers``),
this extension renumbers each document's figures (and any other numbered
captions: tables, code blocks) in their order there, prefixed by the chapter
number that the file name starts with (``notebooks/10_translation...`` -> 10;
``00`` -> 0). Captions and ``{numref}`` references both read these numbers, in
the HTML and in the single-page build the PDF is printed from. A document without
such a prefix (the introduction, the glossary) numbers its own from 1.
"""

from __future__ import annotations

import re

_CHAPTER = re.compile(r"(?:^|/)(\d+)_[^/]*$")


def chapter_number(docname: str) -> int | None:
    """``notebooks/07_layernorm_residuals`` -> 7; ``book/intro`` -> None."""
    match = _CHAPTER.search(docname)
    return int(match.group(1)) if match else None


def renumber(toc_fignumbers: dict) -> dict:
    """Each document's numbers, per figure type, as (chapter, k) with k = 1, 2, ... in the
    order Sphinx numbered them (document order); (k,) where the name has no chapter."""
    renumbered = {}
    for docname, figtypes in toc_fignumbers.items():
        chapter = chapter_number(docname)
        prefix = () if chapter is None else (chapter,)
        renumbered[docname] = {
            figtype: {figure_id: (*prefix, k)
                      for k, figure_id in enumerate(sorted(ids, key=ids.get), start=1)}
            for figtype, ids in figtypes.items()}
    return renumbered


def _renumber_figures(app, env) -> list[str]:
    new = renumber(env.toc_fignumbers)
    changed = [docname for docname in new if new[docname] != env.toc_fignumbers.get(docname)]
    env.toc_fignumbers = new
    return changed


def setup(app) -> dict:
    # After Sphinx's toctree collector (priority 500) has assigned the book-wide numbers.
    app.connect("env-get-updated", _renumber_figures, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""Small fixes to the HTML that Jupyter Book 1 writes, so pages load without console errors.

- Sphinx 7.4 writes each inline ``<script>`` that an extension adds after the
  builder starts twice (once from the registry, once from the builder); for
  sphinx-thebe's ``const THEBE_JS_URL = ...`` the second copy is a
  SyntaxError ("Identifier 'THEBE_JS_URL' has already been declared").
  ``html-page-context`` drops the repeated inline scripts.
- pydata-sphinx-theme logs "Got invalid theme mode" on a reader's first
  visit when no ``default_mode`` is set. The book's figures are drawn on
  white, so the default is the light theme (readers can still switch).
- pydata-sphinx-theme 0.17 puts a search field into a page-wide top bar
  (``navbar_persistent``) unless the option is set, which sphinx-book-theme's
  own default (empty) no longer does; with the search field of the primary
  sidebar, a wide page showed two. The option is set empty: one search field
  beside the contents on a wide screen, the article header's search button on
  a narrow one (sphinx-book-theme shows each at its width).

It also leaves the Colab install cell (the first cell of every chapter, see
CONTRIBUTING.md) out of the web pages: it does nothing outside Colab, and
on a page it would stand above the chapter's title. Colab still runs it.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes

#: The first line of the canonical Colab cell (tools/sync_colab_cell.py).
COLAB_CELL_START = "# On Colab, install the book's package"


def _set_default_mode(app, config) -> None:
    config.html_context = {**(config.html_context or {})}
    config.html_context.setdefault("default_mode", "light")


def _one_search_field(app, config) -> None:
    config.html_theme_options = {**(config.html_theme_options or {})}
    config.html_theme_options.setdefault("navbar_persistent", [])


def _dedupe_inline_scripts(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple[str, str]] = set()
    kept: list[Any] = []
    for script in scripts:
        body = getattr(script, "attributes", {}).get("body")
        if body:
            key = (getattr(script, "filename", None) or "", body)
            if key in seen:
                continue
            seen.add(key)
        kept.append(script)
    scripts[:] = kept


def _drop_colab_cell(app, doctree) -> None:
    for cell in doctree.findall(nodes.container):
        if cell.get("nb_element") == "cell_code" and cell.get("cell_index") == 0:
            if cell.astext().lstrip().startswith(COLAB_CELL_START):
                cell.parent.remove(cell)
            return


def setup(app) -> dict:
    app.connect("config-inited", _set_default_mode)
    app.connect("config-inited", _one_search_field)
    app.connect("html-page-context", _dedupe_inline_scripts)
    app.connect("doctree-read", _drop_colab_cell)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

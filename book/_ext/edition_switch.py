"""A link in every page's header to the same page in the book's other edition.

The English book is built into ``_build/html/`` and the Chinese one into
``_build/html/zh/`` from the same page names (``tools/make_chinese_edition.py``
generates ``zh/`` from the English pages), so the other edition's page is at
the same path below the other edition's root. Each edition's configuration
says where that root is, seen from its own root, and what the link says::

    sphinx:
      config:
        edition_switch: {label: 中文, tooltip: ..., lang: zh-CN, root: zh/}

The link (``a.edition-switch``, template ``templates/edition-switch.html``)
stands first among the article's header buttons of sphinx-book-theme.
``static/edition-switch.js`` keeps the search query and the section the reader
is at when the link is followed (the section by its place in the page: the
two editions' anchors differ). For
the Chinese edition this extension also hands Sphinx's Chinese search the
glossary's terms as a jieba user dictionary (``edition_search_words``, a
file in the source folder), so that a term such as 多头注意力 is indexed
whole as well as in its parts.
"""

from __future__ import annotations

from pathlib import Path

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"  # edition-switch.css, edition-switch.js
#: sphinx-book-theme's default ``article_header_end`` (its theme.conf).
BOOK_THEME_HEADER_END = ["article-header-buttons.html"]


def _configure(app, config) -> None:
    if not config.edition_switch:
        return
    config.templates_path = [*config.templates_path, str(TEMPLATES)]
    config.html_static_path = [*config.html_static_path, str(STATIC)]
    app.add_css_file("edition-switch.css")
    app.add_js_file("edition-switch.js")
    options = dict(config.html_theme_options or {})
    end = list(options.get("article_header_end") or BOOK_THEME_HEADER_END)
    if "edition-switch.html" not in end:
        options["article_header_end"] = ["edition-switch.html", *end]
    config.html_theme_options = options
    if config.edition_search_words:
        words = Path(app.srcdir) / config.edition_search_words
        config.html_search_options = {**(config.html_search_options or {}), "dict": str(words)}


def other_edition_url(pagename: str, root: str) -> str:
    """The URL of ``pagename`` in the edition at ``root`` (relative to this edition's root),
    relative to the page."""
    return "../" * pagename.count("/") + root + pagename + ".html"


def _add_link(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    switch = app.config.edition_switch
    if switch:
        context["edition_switch"] = {**switch, "url": other_edition_url(pagename, switch["root"])}


def setup(app) -> dict:
    app.add_config_value("edition_switch", None, "html", types=[dict, type(None)])
    app.add_config_value("edition_search_words", None, "html", types=[str, type(None)])
    app.connect("config-inited", _configure)
    app.connect("html-page-context", _add_link)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

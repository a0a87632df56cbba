"""The book as one PDF per edition: print styling, the single-page build, the header's link.

``tools/build_pdf.py`` builds each edition with Sphinx's ``singlehtml``
builder and prints that page to PDF in headless Chromium. This extension
serves both halves of that:

- Every page (the web pages and the single page) gets ``static/book-print.css``
  for print media: no sidebars or buttons, code and outputs wrapped instead
  of clipped, each chapter on a new page, folded solutions shown.
- The ``singlehtml`` builder gets the HTML writers of every node that an
  extension registered for ``html`` only. Sphinx looks a builder's node
  writers up by its name and falls back to its format only when no
  extension registered any writer for that name; sphinx-exercise registers
  ``singlehtml`` writers, so without this the single page fails on the first
  node that has an ``html`` writer only (sphinx-jupyterbook-latex's
  ``HiddenCellNode``, for one).
- The web pages' download menu in the article header gets a link to the
  edition's whole-book PDF (``PDF_FILES``), at the edition's root, where
  ``tools/build_book.py`` and ``tools/build_pdf.py`` put it.
"""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).parent / "static"
PRINT_CSS = "book-print.css"

#: Each edition's PDF (a file at the edition's root in the built site), by ``language``.
PDF_FILES = {"en": "minitransformer.pdf", "zh_CN": "minitransformer-zh.pdf"}
#: The download menu's entry for it: (text, tooltip), by ``language``.
PDF_LINK_TEXT = {
    "en": ("Book (.pdf)", "Download the whole book as a PDF"),
    "zh_CN": ("全书 (.pdf)", "下载全书的 PDF"),
}
#: The theme's own ".pdf" entry prints the page being read: said so, so that the menu's two
#: PDF entries do not read alike.
PRINT_PAGE_TEXT = {"en": "This page (print)", "zh_CN": "本页（打印）"}


def edition_language(language: str | None) -> str:
    """The key of ``PDF_FILES`` for a Sphinx ``language`` setting (``None`` means English)."""
    language = language or "en"
    if language not in PDF_FILES:
        raise ValueError(f"no PDF file name for language {language!r}; "
                         f"expected one of {sorted(PDF_FILES)} (book/_ext/book_pdf.py)")
    return language


def _add_print_css(app, config) -> None:
    if str(STATIC) not in map(str, config.html_static_path):
        config.html_static_path = [*config.html_static_path, str(STATIC)]
    app.add_css_file(PRINT_CSS, media="print")


def _share_html_writers(app) -> None:
    if app.builder.name != "singlehtml":
        return
    handlers = app.registry.translation_handlers
    single = handlers.setdefault("singlehtml", {})
    for name, writers in handlers.get("html", {}).items():
        single.setdefault(name, writers)


def _add_pdf_link(app, pagename: str, templatename: str, context: dict, doctree) -> None:
    if app.builder.name != "html":
        return
    language = edition_language(app.config.language)
    text, tooltip = PDF_LINK_TEXT[language]
    for button in context.get("header_buttons", []):
        if button.get("label") == "download-buttons":
            for entry in button["buttons"]:
                if entry.get("label") == "download-pdf-button":
                    entry["text"] = PRINT_PAGE_TEXT[language]
            button["buttons"].insert(0, {
                "type": "link",
                "url": context["pathto"](PDF_FILES[language], 1),
                "text": text,
                "tooltip": tooltip,
                "icon": "fas fa-book",
                "label": "download-book-pdf-button",
            })


def setup(app) -> dict:
    app.connect("config-inited", _add_print_css)
    app.connect("builder-inited", _share_html_writers)
    # after sphinx-book-theme's add_header_buttons (priority 501)
    app.connect("html-page-context", _add_pdf_link, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

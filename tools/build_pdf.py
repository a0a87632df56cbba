"""Build a PDF of the whole book, one per edition, by printing it in headless Chromium.

    python tools/build_pdf.py                  # _build/pdf/minitransformer.pdf and ...-zh.pdf
    python tools/build_pdf.py --edition zh     # the Chinese edition only
    python tools/build_pdf.py --output /tmp/b  # into /tmp/b/_build/pdf/

Each edition (the English book at the root, the Chinese one in ``zh/``, as
``tools/build_book.py`` builds them) is built with Sphinx's ``singlehtml``
builder: every page of ``_toc.yml`` on one page, with the stored notebook
outputs, warnings as errors. Chromium (Debian's ``chromium``, driven by
Python Playwright) opens that page and waits until MathJax has typeset
every equation (``MathJax.startup.promise``), the fonts are loaded and every
figure is decoded. The page then gets a table of contents (the parts of
``_toc.yml``, their chapters and the chapters' sections) and is printed with
the book's print styling (``book/_ext/static/book-print.css``: code wrapped
at the margin, each chapter on a new page, solutions shown), page numbers
in the footer. It is printed twice: the first print says on which page each
entry of the contents falls, the second prints those numbers. pypdf then
adds the PDF's outline (bookmarks: chapters and sections) and its title.

If the HTML site exists (``OUTPUT/_build/html``), each PDF is also copied to
the root of its edition there (``book_pdf.PDF_FILES``), where the download
menu of the pages' header links it; ``tools/build_book.py`` copies them in
after it rebuilds the site. Needs Chromium (``apt-get install chromium``) and
a CJK font for the Chinese edition (``fonts-noto-cjk``).
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "_ext"))
sys.path.insert(0, str(ROOT / "tools"))

from book_pdf import PDF_FILES, edition_language  # noqa: E402
from build_book import EDITIONS, jupyter_book  # noqa: E402

#: Flags that headless Chromium needs on the project's machines (as the browser tests use).
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]
CHROMIUM_CANDIDATES = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
#: Page margins, as in book-print.css's @page (the footer with the page number sits in the
#: bottom one).
MARGINS = {"top": "16mm", "right": "16mm", "bottom": "18mm", "left": "16mm"}
#: The text column's width in CSS pixels (A4 less the side margins, at 96 per inch): the
#: page is laid out at this width before a display equation wider than it is scaled down.
COLUMN_PX = round((210 - 16 - 16) / 25.4 * 96)
#: Milliseconds Chromium may take to load, typeset or print the whole book: a limit for a
#: hung browser, far above what a busy 2-core machine needs.
BROWSER_TIMEOUT_MS = 900_000
#: The contents' heading, by edition language (``book_pdf.edition_language``).
CONTENTS_TITLE = {"en": "Contents", "zh_CN": "目录"}
#: Page numbers in the bottom margin (Chromium fills in the span of class pageNumber).
FOOTER = ('<div style="font-size:8pt;width:100%;text-align:center;color:#444;">'
          '<span class="pageNumber"></span></div>')
#: pypdf warns that Chromium's PDFs hold more objects than their trailer says; it reads
#: them all the same.
logging.getLogger("pypdf").setLevel(logging.ERROR)
#: How often the book is printed at most until the contents' page numbers stop changing.
MAX_PRINTS = 6


@dataclass(frozen=True)
class Part:
    """One part of ``_toc.yml``: its caption and its chapters' docnames, in order."""

    caption: str
    docnames: tuple[str, ...]


@dataclass(frozen=True)
class Entry:
    """One line of the printed contents and one bookmark: a chapter (level 1) or one of
    its sections (level 2), with the id of its section on the page."""

    anchor: str
    title: str
    level: int


@dataclass(frozen=True)
class BookPdf:
    """What printing one edition made and showed."""

    path: Path
    pages: int
    entries: tuple[Entry, ...]
    equations: int
    equations_scaled: int  # display equations set smaller to fit the column
    figures: int
    seconds_singlehtml: float
    seconds_print: float


def find_chromium() -> str:
    """The Chromium binary (``MINITRANSFORMER_CHROMIUM`` wins); raises if there is none."""
    override = os.environ.get("MINITRANSFORMER_CHROMIUM")
    if override:
        if not Path(override).is_file():
            raise FileNotFoundError(f"MINITRANSFORMER_CHROMIUM={override} does not exist")
        return override
    for name in CHROMIUM_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    raise FileNotFoundError(
        "no Chromium found (looked for " + ", ".join(CHROMIUM_CANDIDATES) + "); install it "
        "with `apt-get install -y chromium` or point MINITRANSFORMER_CHROMIUM at a Chrome binary")


def _docname(name: str) -> str:
    return re.sub(r"\.(md|ipynb)$", "", name)


def toc_parts(source: Path) -> tuple[str, list[Part]]:
    """The root docname and the parts of the book at ``source`` (its ``_toc.yml``)."""
    toc = yaml.safe_load((source / "_toc.yml").read_text(encoding="utf-8"))
    parts = [Part(part.get("caption", ""),
                  tuple(_docname(chapter["file"]) for chapter in part.get("chapters", [])))
             for part in toc.get("parts", [])]
    return _docname(toc["root"]), parts


def edition_of(source: Path) -> str:
    """The edition language (a key of ``book_pdf.PDF_FILES``) of the book at ``source``."""
    config = yaml.safe_load((source / "_config.yml").read_text(encoding="utf-8"))
    return edition_language(((config.get("sphinx") or {}).get("config") or {}).get("language"))


def build_singlehtml(source: Path, work: Path, timeout: int = 900) -> Path:
    """``jupyter-book build source --builder singlehtml`` into ``work``; returns the page.

    The builder writes the whole book as its root document (``book/intro.html``), but
    the links to styles and figures on it are relative to the build folder, so the page
    returned is a copy at the folder's top (``book.html``)."""
    cmd = [jupyter_book(), "build", str(source), "--builder", "singlehtml", "--all",
           "-W", "-n", "--keep-going", "--path-output", str(work)]
    env = dict(os.environ, PYTHONWARNINGS="ignore", NO_COLOR="1", TERM="dumb")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=source)
    log = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    if proc.returncode:
        raise RuntimeError(f"the singlehtml build of {source} failed:\n{log[-4000:]}")
    root, _ = toc_parts(source)
    out = work / "_build" / "singlehtml"
    page = out / "book.html"
    shutil.copyfile(out / (root + ".html"), page)
    return page


#: Resolves once the page is ready to print: every equation typeset, fonts loaded, figures
#: decoded. Returns what it found.
_WAIT_UNTIL_READY = """
async () => {
  if (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) {
    throw new Error("MathJax is not on the page");
  }
  await MathJax.startup.promise;
  await document.fonts.ready;
  await Promise.all([...document.images].map(img => img.decode().catch(() => null)));
  return {
    equations: document.querySelectorAll("mjx-container").length,
    mathErrors: document.querySelectorAll("mjx-merror").length,
    untypeset: [...document.querySelectorAll(".math")].filter(
      el => !el.querySelector("mjx-container")).length,
    figures: document.images.length,
    broken: [...document.images].filter(img => !img.complete || img.naturalWidth === 0)
      .map(img => img.getAttribute("src")),
  };
}
"""

#: Marks the page as the book PDF (html.book-pdf in book-print.css), points links to the
#: root document at their anchors on this page, unfolds folded content, fits display
#: equations to the column and inserts the contents before the first chapter. Returns the
#: contents' entries and the number of equations it set smaller.
_PREPARE = r"""
({root, parts, contentsTitle}) => {
  document.documentElement.classList.add("book-pdf");
  const rootPage = root.split("/").pop() + ".html";
  for (const a of document.querySelectorAll("a[href]")) {
    const href = a.getAttribute("href");
    const hash = href.indexOf("#");
    if (hash > 0 && href.slice(0, hash).endsWith(rootPage)) {
      a.setAttribute("href", href.slice(hash));
    }
  }
  for (const el of document.querySelectorAll(".toggle-hidden")) {
    el.classList.remove("toggle-hidden");
  }
  for (const el of document.querySelectorAll("details")) el.open = true;
  // MathJax 3 does not break display equations into lines: one wider than the column
  // is set in a smaller size until it fits.
  let scaled = 0;
  // (The room is that of the narrowest block around it: the equation's own box and its
  // wrapper grow with it.)
  const article = document.querySelector(".bd-article");
  for (const el of document.querySelectorAll('mjx-container[display="true"]')) {
    const math = el.querySelector("mjx-math");
    const wide = math ? math.getBoundingClientRect().width : 0;
    let room = Infinity;
    for (let box = el.parentElement; box && article.contains(box); box = box.parentElement) {
      room = Math.min(room, box.clientWidth);
    }
    if (wide > room) {
      const size = parseFloat(getComputedStyle(el).fontSize);
      el.style.fontSize = (size * room / wide * 0.98) + "px";
      scaled += 1;
    }
  }

  // A heading as plain text for the outline (equations from their MathML: √, ^, _, /) and
  // as a copy with its typeset equations for the printed contents.
  const mathText = node => {
    const kids = () => [...node.children].map(mathText).join("");
    switch (node.localName) {
      case "annotation": case "annotation-xml": return "";
      case "msqrt": {
        const inner = kids();
        return "√" + (/[+\-−/⋅·, ]/.test(inner) ? "(" + inner + ")" : inner);
      }
      case "msup": return mathText(node.children[0]) + "^" + mathText(node.children[1]);
      case "msub": return mathText(node.children[0]) + "_" + mathText(node.children[1]);
      case "msubsup": return mathText(node.children[0]) + "_" + mathText(node.children[1]) +
        "^" + mathText(node.children[2]);
      case "mfrac": return mathText(node.children[0]) + "/" + mathText(node.children[1]);
      case "mi": case "mn": case "mo": case "mtext": return node.textContent.trim();
      default: return node.children.length ? kids() : node.textContent.trim();
    }
  };
  const plainText = h => {
    const copy = h.cloneNode(true);
    for (const a of copy.querySelectorAll("a.headerlink")) a.remove();
    for (const m of copy.querySelectorAll("mjx-container")) {
      const math = m.querySelector("mjx-assistive-mml math");
      m.replaceWith(document.createTextNode(math ? mathText(math) : m.textContent));
    }
    return copy.textContent.replace(/\s+/g, " ").trim();
  };
  const shownTitle = h => {
    const copy = h.cloneNode(true);
    for (const a of copy.querySelectorAll("a.headerlink, mjx-assistive-mml")) a.remove();
    return [...copy.childNodes];
  };
  const entries = [];
  const nav = document.createElement("nav");
  nav.className = "book-contents";
  const heading = document.createElement("h2");
  heading.textContent = contentsTitle;
  nav.appendChild(heading);
  const list = document.createElement("ol");
  // Section ids repeat across chapters on the single page ("exercises"), so each heading
  // listed gets an id of its own to link to.
  const line = (h, level) => {
    h.id = "book-pdf-" + entries.length;
    const item = document.createElement("li");
    item.className = level === 1 ? "chapter" : "section";
    const link = document.createElement("a");
    link.href = "#" + h.id;
    link.dataset.anchor = h.id;
    const text = document.createElement("span");
    text.className = "title";
    text.append(...shownTitle(h));
    const page = document.createElement("span");
    page.className = "page";
    link.append(text, page);
    item.appendChild(link);
    list.appendChild(item);
    entries.push({anchor: h.id, title: plainText(h), level});
  };
  for (const part of parts) {
    const partItem = document.createElement("li");
    partItem.className = "part";
    partItem.textContent = part.caption;
    list.appendChild(partItem);
    for (const docname of part.docnames) {
      const anchor = document.getElementById("document-" + docname);
      const chapter = anchor && anchor.nextElementSibling;
      const title = chapter && chapter.querySelector(":scope > h1, :scope > h2");
      if (!title) throw new Error("found no chapter title for " + docname);
      line(title, 1);
      for (const section of chapter.querySelectorAll(":scope > section")) {
        const h = section.querySelector(":scope > h3");
        if (h) line(h, 2);
      }
    }
  }
  nav.appendChild(list);
  const first = document.querySelector(".toctree-wrapper");
  first.parentNode.insertBefore(nav, first);
  return {entries, scaled};
}
"""

_SET_PAGES = """
(pages) => {
  for (const link of document.querySelectorAll("nav.book-contents a[data-anchor]")) {
    link.querySelector(".page").textContent = pages[link.dataset.anchor] ?? "";
  }
}
"""


def anchor_pages(reader, anchors: list[str]) -> dict[str, int]:
    """The page (1-based) of each anchor, from the named destinations that Chromium writes
    for every link target; raises if one is missing."""
    names = {}
    for name, dest in reader.named_destinations.items():
        # the document's /Dests dictionary keys them as PDF names: "/" + the element's id
        names[name.removeprefix("/")] = reader.get_destination_page_number(dest) + 1
    missing = [a for a in anchors if a not in names]
    if missing:
        raise RuntimeError(f"the PDF has no destination for {missing[:5]} "
                           f"({len(missing)} of {len(anchors)} contents entries)")
    return {a: names[a] for a in anchors}


def _print(tab) -> bytes:
    return tab.pdf(format="A4", margin=MARGINS, print_background=True, tagged=True,
                   display_header_footer=True, header_template="<span></span>",
                   footer_template=FOOTER)


def print_book(page: Path, root: str, parts: list[Part], language: str
               ) -> tuple[bytes, list[Entry], dict]:
    """Print the single page ``page`` of a book; returns the PDF, its contents' entries and
    what the page showed (equations typeset, figures)."""
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=find_chromium(),
                                             args=CHROMIUM_FLAGS)
        try:
            tab = browser.new_page(viewport={"width": COLUMN_PX, "height": 1000})
            tab.set_default_timeout(BROWSER_TIMEOUT_MS)
            tab.emulate_media(media="print")  # lay the page out as it will print
            tab.goto(page.as_uri(), wait_until="load")
            shown = tab.evaluate(_WAIT_UNTIL_READY)
            if shown["broken"] or shown["mathErrors"] or shown["untypeset"]:
                raise RuntimeError(
                    f"{page}: {len(shown['broken'])} figures did not load "
                    f"({shown['broken'][:3]}), {shown['mathErrors']} equations have TeX errors "
                    f"and {shown['untypeset']} were not typeset")
            prepared = tab.evaluate(_PREPARE, {
                "root": root, "contentsTitle": CONTENTS_TITLE[language],
                "parts": [{"caption": p.caption, "docnames": list(p.docnames)} for p in parts]})
            entries = [Entry(**e) for e in prepared["entries"]]
            shown["scaled"] = prepared["scaled"]
            anchors = [e.anchor for e in entries]
            pdf, pages, seen = b"", {}, []
            for _ in range(MAX_PRINTS):
                pdf = _print(tab)
                found = anchor_pages(PdfReader(io.BytesIO(pdf)), anchors)
                if found == pages:
                    break
                if found in seen:  # a cycle (numbers that change the contents' layout):
                    # give every entry the latest page it has had, which the next print keeps
                    found = {a: max(state[a] for state in [*seen, found]) for a in anchors}
                seen.append(found)
                pages = found
                tab.evaluate(_SET_PAGES, pages)
            else:
                raise RuntimeError(f"{page}: the contents' page numbers did not settle "
                                   f"in {MAX_PRINTS} prints")
        finally:
            browser.close()
    return pdf, entries, shown


def add_outline(pdf: bytes, entries: list[Entry], title: str, language: str) -> bytes:
    """The PDF with an outline of ``entries`` (chapters, their sections below them), its
    title and language, opening with the outline shown."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import NameObject, TextStringObject

    reader = PdfReader(io.BytesIO(pdf))
    pages = anchor_pages(reader, [e.anchor for e in entries])
    writer = PdfWriter(clone_from=reader)
    chapter = None
    for entry in entries:
        parent = chapter if entry.level == 2 else None
        item = writer.add_outline_item(title=entry.title, page_number=pages[entry.anchor] - 1,
                                       parent=parent)
        if entry.level == 1:
            chapter = item
    writer.add_metadata({"/Title": title, "/Author": "The minitransformer authors"})
    writer._root_object[NameObject("/Lang")] = TextStringObject(language.replace("_", "-"))
    writer.page_mode = "/UseOutlines"
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def build_pdf(edition: str, output: Path, source_root: Path = ROOT) -> BookPdf:
    """Build the PDF of one edition (``"en"`` or ``"zh"``) into ``output/_build/pdf/``."""
    source = source_root / EDITIONS[edition]
    language = edition_of(source)
    title = yaml.safe_load((source / "_config.yml").read_text(encoding="utf-8"))["title"]
    started = time.monotonic()
    page = build_singlehtml(source, output / "_build" / "pdf" / f"{edition}-singlehtml")
    built = time.monotonic()
    root, parts = toc_parts(source)
    pdf, entries, shown = print_book(page, root, parts, language)
    pdf = add_outline(pdf, entries, title, language)
    path = output / "_build" / "pdf" / PDF_FILES[language]
    path.write_bytes(pdf)
    from pypdf import PdfReader

    return BookPdf(path, len(PdfReader(path).pages), tuple(entries), shown["equations"],
                   shown["scaled"], shown["figures"], built - started,
                   time.monotonic() - built)


def copy_into_site(output: Path) -> list[Path]:
    """Copy each edition's PDF, where built, to the root of that edition in the HTML site
    ``output/_build/html`` (where the site exists); returns the copies."""
    site = output / "_build" / "html"
    copies = []
    for folder in EDITIONS.values():
        source = ROOT / folder
        if not (source / "_config.yml").is_file():
            continue
        name = PDF_FILES[edition_of(source)]
        pdf = output / "_build" / "pdf" / name
        target = site if folder == "." else site / folder
        if pdf.is_file() and target.is_dir():
            shutil.copyfile(pdf, target / name)
            copies.append(target / name)
    return copies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edition", choices=sorted(EDITIONS), action="append",
                        help="build only this edition (repeatable; default: every edition)")
    parser.add_argument("--output", type=Path, default=ROOT, help="default: the repository root")
    args = parser.parse_args(argv)
    output = args.output.resolve()
    editions = args.edition or [e for e, folder in EDITIONS.items()
                                if (ROOT / folder / "_config.yml").is_file()]
    try:
        find_chromium()
    except FileNotFoundError as err:
        print(f"cannot print the book: {err}", file=sys.stderr)
        return 1
    for edition in editions:
        book = build_pdf(edition, output)
        chapters = sum(e.level == 1 for e in book.entries)
        print(f"{book.path}: {book.pages} pages, {chapters} chapters, {book.equations} "
              f"equations ({book.equations_scaled} set smaller to fit), {book.figures} "
              f"figures (singlehtml {book.seconds_singlehtml:.0f} s, "
              f"printing {book.seconds_print:.0f} s)")
    for copy in copy_into_site(output):
        print(f"copied into the site: {copy}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

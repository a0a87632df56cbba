"""The whole-book PDF of each edition (``make pdf``, ``tools/build_pdf.py``).

Both PDFs are built once per session, as ``make pdf`` builds them, and read
back with poppler (``pdftotext``, ``pdffonts``, ``pdfimages``) and pypdf. They
are checked against the sources, not against themselves: every chapter of
``_toc.yml`` starts its own page under the title its source gives it, in the
printed contents and in the outline, with the right page; every font is
embedded (a CJK one in the Chinese edition); no word lies outside the page's
text area (a code line wider than the column would); the longest code lines of
the notebooks are all there (wrapped, not cut); every equation was typeset and
every figure is in. The fast tests check the download link the web pages get
and the copying of the PDFs into the site.

Needs Chromium (as the browser tests) and poppler-utils; ``.ci/run``
installs both. Without them these tests skip and say why.
"""

from __future__ import annotations

import concurrent.futures
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "book" / "_ext"))

import book_pdf  # noqa: E402
import build_pdf  # noqa: E402

EDITIONS = {"en": ROOT, "zh": ROOT / "zh"}
#: The side margins of build_pdf.MARGINS in PostScript points (the page's width is read
#: from the PDF: Chromium's A4 is 595.92 points wide, not 595.28).
MM = 72 / 25.4
LEFT = float(build_pdf.MARGINS["left"].removesuffix("mm")) * MM
RIGHT_MARGIN = float(build_pdf.MARGINS["right"].removesuffix("mm")) * MM
#: How far a word's box may reach past the margin, in points, before the page is looked
#: at for ink there (a fullwidth closing bracket's box, ）, reaches past its ink). A code
#: line cut at the margin would run past it by at least a character (4.8 points).
TOLERANCE = 2.0
#: More pages than this means the layout fell apart (e.g. code broken after every
#: character); the book has about 200.
MAX_PAGES = 500


def _missing_tools() -> str:
    missing = [tool for tool in ("pdftotext", "pdffonts", "pdfimages") if not shutil.which(tool)]
    if missing:
        return f"{', '.join(missing)} not found: `apt-get install -y poppler-utils` (.ci/run does)"
    try:
        build_pdf.find_chromium()
    except FileNotFoundError as err:
        return str(err)
    return ""


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def _chapter_titles(source: Path) -> list[str]:
    """Each chapter's title, read from its source (the first ``# `` heading)."""
    _, parts = build_pdf.toc_parts(source)
    titles = []
    for docname in (d for part in parts for d in part.docnames):
        path = next(source / (docname + s) for s in (".ipynb", ".md")
                    if (source / (docname + s)).is_file())
        if path.suffix == ".ipynb":
            cells = nbformat.read(path, as_version=4).cells
            text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
        else:
            text = path.read_text(encoding="utf-8")
        titles.append(re.search(r"^# (.+)$", text, re.M).group(1).strip())
    return titles


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


# --------------------------------------------------------------------------- the build


@pytest.fixture(scope="session")
def pdfs(tmp_path_factory) -> dict[str, build_pdf.BookPdf]:
    reason = _missing_tools()
    if reason:
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("pdf")
    # In a thread of its own: the browser tests' session keeps Playwright's
    # synchronous API (an asyncio loop) running in the main thread, and a
    # second sync_playwright() there is refused.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return {edition: pool.submit(build_pdf.build_pdf, edition, out).result()
                for edition in EDITIONS}


def _outline(path: Path) -> list[tuple[int, str, int]]:
    """(level, title, page) of every outline item, in order."""
    from pypdf import PdfReader

    reader = PdfReader(path)
    items = []

    def walk(nodes, level):
        for node in nodes:
            if isinstance(node, list):
                walk(node, level + 1)
            else:
                items.append((level, node.title, reader.get_destination_page_number(node) + 1))

    walk(reader.outline, 1)
    return items


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("edition", EDITIONS)
def test_each_chapter_starts_a_page_listed_in_contents_and_outline(pdfs, edition):
    book = pdfs[edition]
    titles = _chapter_titles(EDITIONS[edition])
    assert len(titles) + 2 <= book.pages <= MAX_PAGES  # a title page, the contents, chapters
    chapters = [(title, page) for level, title, page in _outline(book.path) if level == 1]
    assert [title for title, _ in chapters] == titles
    pages = [page for _, page in chapters]
    assert pages == sorted(set(pages)) and pages[-1] <= book.pages
    text = _run("pdftotext", "-layout", str(book.path), "-").split("\f")
    for title, page in chapters:
        assert _squash(text[page - 1]).startswith(_squash(title)), (title, page)
    # the printed contents (page 2 on) give the same page for each chapter
    contents = " ".join(" ".join(page.split()) for page in text[1:pages[0] - 1])
    for title, page in chapters:
        assert f"{' '.join(title.split())} {page}" in contents, (title, page)
    sections = [item for item in _outline(book.path) if item[0] == 2]
    assert len(sections) >= len(titles), "the outline lists the chapters' sections too"


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("edition", EDITIONS)
def test_every_font_is_embedded_and_maps_to_unicode(pdfs, edition):
    """Embedded: the PDF looks the same where its fonts are not installed; mapped to Unicode:
    its text can be searched and copied. Chromium embeds a font with TrueType outlines by
    name (DejaVu) and one with CFF outlines (Noto Sans CJK, MathJax's) as Type 3 glyphs."""
    rows = _run("pdffonts", str(pdfs[edition].path)).splitlines()[2:]
    assert rows
    # columns: name, type (one or two words), encoding, emb, sub, uni, object id, generation
    not_embedded = [row for row in rows if row.split()[-5] != "yes"]
    assert not not_embedded, not_embedded
    no_unicode = [row for row in rows if row.split()[-3] != "yes"]
    assert not no_unicode, no_unicode
    names = " ".join(row.split()[0] for row in rows)
    assert "DejaVuSansMono" in names  # code in the print styling's monospace font
    if edition == "zh":  # the Chinese text is set in those embedded fonts
        text = _run("pdftotext", str(pdfs[edition].path), "-")
        assert len(re.findall(r"[\u4e00-\u9fff]", text)) > 20_000


def _ink_between(pdf: Path, page: int, x: tuple[float, float], y: tuple[float, float]) -> bool:
    """Whether anything is drawn in the box ``x`` × ``y`` (points) of ``page`` (from 1)."""
    scale = 288 / 72
    x0, y0 = int(x[0] * scale), int(y[0] * scale)
    width, height = max(1, int((x[1] - x[0]) * scale)), max(1, int((y[1] - y[0]) * scale))
    pgm = subprocess.run(["pdftoppm", "-f", str(page), "-l", str(page), "-r", "288", "-gray",
                          "-x", str(x0), "-y", str(y0), "-W", str(width), "-H", str(height),
                          str(pdf)], capture_output=True, check=True).stdout
    pixels = pgm.split(b"\n", 3)[3]  # after the P5 header: magic, size, maximum
    return min(pixels) < 200


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("edition", EDITIONS)
def test_no_text_runs_past_the_margins(pdfs, edition):
    """No word's ink lies outside the text area.

    A word's box (pdftotext) is its glyphs' advance boxes, so a fullwidth closing
    bracket at the end of a justified line (its right half blank, trimmed by Chromium's
    text-spacing-trim) reaches up to half an em past the margin with its ink inside.
    A box past the margin fails only if the page has ink in the strip beyond it.
    """
    path = pdfs[edition].path
    xml = _run("pdftotext", "-bbox", str(path), "-")
    word = re.compile(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">'
                      r"([^<]*)<")
    outside, words = [], 0
    for number, page in enumerate(xml.split("<page ")[1:], start=1):
        right = float(re.match(r'width="([\d.]+)"', page).group(1)) - RIGHT_MARGIN
        for x_min, y_min, x_max, y_max, text in word.findall(page):
            words += 1
            x_min, x_max, y = float(x_min), float(x_max), (float(y_min), float(y_max))
            low, high = LEFT - TOLERANCE, right + TOLERANCE
            past = [strip for strip, beyond in (((x_min, low), x_min < low),
                                                ((high, x_max), x_max > high)) if beyond]
            if any(_ink_between(path, number, strip, y) for strip in past):
                outside.append(f"page {number}: {text!r} at x {x_min:.1f}-{x_max:.1f} "
                               f"(text area {LEFT:.1f}-{right:.1f})")
    assert words > 10_000
    assert not outside, f"{len(outside)} words outside the text area: " + "; ".join(outside[:10])


#: A code cell's frame is drawn with myst-nb's green left border: (0, 128, 0).
_FRAME_GREEN = ((0, 60), (90, 170), (0, 60))
#: How much of a code frame may be empty above its first or below its last word, in points
#: (its padding is about 10).
FRAME_SLACK = 40


def _pages_as_pixels(pdf: Path, dpi: int) -> list:
    """Every page of ``pdf`` as an ``(height, width, 3)`` uint8 array (pdftoppm's PPMs)."""
    import numpy as np

    out = subprocess.run(["pdftoppm", "-r", str(dpi), str(pdf)], capture_output=True,
                         check=True).stdout
    pages, at = [], 0
    while at < len(out):
        header = re.match(rb"P6\s+(\d+)\s+(\d+)\s+255\s", out[at:at + 40])
        width, height = int(header.group(1)), int(header.group(2))
        at += header.end()
        pages.append(np.frombuffer(out, np.uint8, width * height * 3, at)
                     .reshape(height, width, 3))
        at += width * height * 3
    return pages


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("edition", EDITIONS)
def test_no_code_frame_is_left_empty(pdfs, edition):
    """Every stretch of a code frame on a page has code in it.

    When a code block that is kept whole moves to the next page, a frame drawn by its
    wrapper stays behind, an empty box down to the foot of the page (85 pages of the
    Chinese PDF had one before the frame moved to the block). The frames are found by
    their green left border in the rendered page, the code by pdftotext's words.
    """
    import numpy as np

    dpi = 50
    path = pdfs[edition].path
    pages = _pages_as_pixels(path, dpi)
    xml = _run("pdftotext", "-bbox", str(path), "-").split("<page ")[1:]
    assert len(pages) == len(xml)
    word = re.compile(r'<word xMin="[\d.]+" yMin="([\d.]+)" xMax="[\d.]+" yMax="([\d.]+)">')
    empty, frames = [], 0
    for number, (pixels, page) in enumerate(zip(pages, xml), start=1):
        green = np.ones(pixels.shape[:2], bool)
        for channel, (low, high) in enumerate(_FRAME_GREEN):
            green &= (pixels[:, :, channel] >= low) & (pixels[:, :, channel] <= high)
        rows = np.flatnonzero(green.any(axis=1))
        words = [(float(top), float(bottom)) for top, bottom in word.findall(page)]
        for run in np.split(rows, np.flatnonzero(np.diff(rows) > 1) + 1) if len(rows) else []:
            top, bottom = run[0] * 72 / dpi, (run[-1] + 1) * 72 / dpi
            if bottom - top < FRAME_SLACK / 2:
                continue  # a green mark in a figure or a heading, not a frame
            frames += 1
            inside = [w for w in words if w[0] >= top - 2 and w[1] <= bottom + 2]
            first = min((w[0] for w in inside), default=bottom)
            last = max((w[1] for w in inside), default=top)
            if first - top > FRAME_SLACK or bottom - last > FRAME_SLACK:
                empty.append(f"page {number}: frame at y {top:.0f}-{bottom:.0f}, "
                             f"code at {first:.0f}-{last:.0f}")
    assert frames > 100
    assert not empty, (f"{len(empty)} code frames with nothing in part of them: "
                       + "; ".join(empty[:8]))


def _longest_code_lines(source: Path, count: int = 8) -> list[str]:
    lines = []
    for path in sorted((source / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells[1:]:  # not the Colab cell
            if cell.cell_type == "code":
                lines += [line for line in cell.source.splitlines() if line.strip()]
    return sorted(lines, key=len, reverse=True)[:count]


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("edition", EDITIONS)
def test_the_longest_code_lines_are_printed_whole(pdfs, edition):
    # -layout: without it pdftotext joins a line that ends in "-" to the next and drops the "-"
    text = _squash(_run("pdftotext", "-layout", str(pdfs[edition].path), "-"))
    for line in _longest_code_lines(EDITIONS[edition]):
        assert _squash(line) in text, f"not in the PDF (cut?): {line}"


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("edition", EDITIONS)
def test_every_equation_is_typeset_and_every_figure_printed(pdfs, edition):
    book = pdfs[edition]
    page = book.path.parent / f"{edition}-singlehtml" / "_build" / "singlehtml" / "book.html"
    html = page.read_text(encoding="utf-8")
    math = len(re.findall(r'class="math[ "]', html))
    assert math > 100 and book.equations >= math
    figures = {f.name for f in (page.parent / "_images").iterdir()}
    assert figures and book.figures >= len(figures)
    listed = _run("pdfimages", "-list", str(book.path)).splitlines()[2:]
    images = {row.split()[10] for row in listed if row.split()[2] == "image"}
    assert len(images) >= len(figures)


# --------------------------------------------------------------------------- the link


class _App:
    """What ``book_pdf._add_pdf_link`` reads of a Sphinx application."""

    def __init__(self, language):
        self.builder = type("Builder", (), {"name": "html"})()
        self.config = type("Config", (), {"language": language})()


def _download_menu() -> dict:
    return {"type": "group", "label": "download-buttons",
            "buttons": [{"label": "download-source-button"},
                        {"label": "download-pdf-button", "text": ".pdf"}]}


@pytest.mark.parametrize("language, depth", [(None, 0), ("zh_CN", 2)])
def test_the_download_menu_links_the_editions_pdf_at_its_root(language, depth):
    menu = _download_menu()
    context = {"header_buttons": [menu],
               "pathto": lambda name, resource: "../" * depth + name}
    book_pdf._add_pdf_link(_App(language), "notebooks/x", "page.html", context, None)
    link = menu["buttons"][0]
    assert link["url"] == "../" * depth + book_pdf.PDF_FILES[language or "en"]
    assert link["type"] == "link" and link["text"].endswith("(.pdf)")
    assert menu["buttons"][1] == {"label": "download-source-button"}
    # the theme's entry, which prints one page, no longer reads like the book's PDF
    assert menu["buttons"][2]["text"] == book_pdf.PRINT_PAGE_TEXT[language or "en"]
    assert not menu["buttons"][2]["text"].endswith(".pdf")


def test_an_edition_without_a_pdf_name_is_refused():
    with pytest.raises(ValueError, match="no PDF file name for language 'fr'"):
        book_pdf.edition_language("fr")


def test_each_editions_pdf_name_follows_its_config():
    for source in EDITIONS.values():
        config = yaml.safe_load((source / "_config.yml").read_text(encoding="utf-8"))
        assert "book_pdf" in config["sphinx"]["local_extensions"]
        assert build_pdf.PDF_FILES[build_pdf.edition_of(source)].startswith("minitransformer")
    names = [build_pdf.PDF_FILES[build_pdf.edition_of(s)] for s in EDITIONS.values()]
    assert len(set(names)) == len(names)


def test_the_pdfs_are_copied_to_the_root_of_their_edition(tmp_path):
    pdf_dir = tmp_path / "_build" / "pdf"
    pdf_dir.mkdir(parents=True)
    for source in EDITIONS.values():
        (pdf_dir / build_pdf.PDF_FILES[build_pdf.edition_of(source)]).write_bytes(b"%PDF-")
    assert build_pdf.copy_into_site(tmp_path) == []  # no site yet: nothing to copy into
    (tmp_path / "_build" / "html" / "zh").mkdir(parents=True)
    copies = build_pdf.copy_into_site(tmp_path)
    site = tmp_path / "_build" / "html"
    assert sorted(copies) == sorted([site / book_pdf.PDF_FILES["en"],
                                     site / "zh" / book_pdf.PDF_FILES["zh_CN"]])

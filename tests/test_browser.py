"""The rendered book, as a reader meets it, checked in headless Chromium.

Both editions are built once per session as ``make book`` builds them
(``jupyter-book build -W -n``, English at the site's root and Chinese under
``zh/``, into a temporary folder; notebooks are stored executed, so nothing
runs), served on 127.0.0.1, and every page of ``_toc.yml`` and of
``zh/_toc.yml`` is opened in Chromium and checked: no console errors or
failed requests, no request leaving the book (MathJax comes from
``book/_vendor``), every equation typeset, every figure loaded and readable,
the Colab launch link of each notebook (the Chinese pages open the Chinese
notebooks), the language switch to the same page in the other edition,
exercise solutions hidden until clicked. Clicking the switch lands on that
page; the search pages of both editions find terms. The same checks run on
a small fixture book that has every kind of content (so they are exercised
before the chapters have it) and on a deliberately broken page (so each
check is seen to fail).

Screenshots of the overview (in both editions) and of the chapter with the
most figures are saved in ``_build/artifacts/`` (or
``$MINITRANSFORMER_ARTIFACTS``); a CJK font must be installed for the
Chinese one to show its text (``.ci/run`` installs ``fonts-noto-cjk``).

Without Chromium (``apt-get install chromium``) or Playwright the browser
tests skip and say why; the build test still runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import book_browser as bb
import nbformat
import pytest

ZH = bb.ROOT / "zh"
ENGLISH = bb.toc_pages()
CHINESE = bb.toc_pages(ZH, edition="zh/")
PAGES = ENGLISH + CHINESE
CONFIG = bb.book_config()
CONFIGS = {"": CONFIG, "zh/": bb.book_config(ZH)}
ARTIFACTS = Path(os.environ.get("MINITRANSFORMER_ARTIFACTS", bb.ROOT / "_build" / "artifacts"))


def _figure_count(page: bb.TocPage) -> int:
    nb = nbformat.read(page.source, as_version=4)
    return sum(
        "image/png" in out.get("data", {}) or "image/svg+xml" in out.get("data", {})
        for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])
    )


def _screenshot_pages() -> dict[str, str]:
    """page path -> file name: the overview in both editions, the chapter with the most figures."""
    notebooks = [p for p in ENGLISH if p.is_notebook]
    if not notebooks:
        return {}
    shots = {notebooks[0].html: "overview.png", "zh/" + notebooks[0].html: "zh_overview.png"}
    chapters = notebooks[1:]
    if chapters:
        best = max(chapters, key=_figure_count)  # first one on ties
        shots[best.html] = f"chapter_{Path(best.docname).name}.png"
    return shots


def _other_edition(page: bb.TocPage) -> str:
    """The path of the same page in the other edition."""
    return ("" if page.edition else "zh/") + page.docname + ".html"


SCREENSHOTS = _screenshot_pages()


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def book_build(tmp_path_factory) -> bb.BuildResult:
    return bb.build_book(bb.ROOT, tmp_path_factory.mktemp("book"))


@pytest.fixture(scope="session")
def fixture_build(tmp_path_factory) -> bb.BuildResult:
    source = bb.make_fixture_book(tmp_path_factory.mktemp("fixture_src") / "book")
    return bb.build_book(source, tmp_path_factory.mktemp("fixture_out"))


@pytest.fixture(scope="session")
def browser_context():
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is missing (pip install -r requirements.txt)"
    )
    chromium, reason = bb.find_chromium()
    if chromium is None:
        pytest.skip(reason)
    playwright = sync_api.sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=chromium, args=bb.CHROMIUM_FLAGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        yield context
        context.close()
        browser.close()
    finally:
        playwright.stop()


@pytest.fixture(scope="session")
def book_url(book_build):
    if not (book_build.html / "index.html").is_file():
        pytest.fail("the book did not build:\n" + book_build.log[-3000:])
    with bb.serve(book_build.html) as url:
        yield url


@pytest.fixture(scope="session")
def fixture_url(fixture_build):
    assert fixture_build.returncode == 0, "\n".join(fixture_build.warnings) or fixture_build.log
    with bb.serve(fixture_build.html) as url:
        yield url


def _fail_on(report: bb.PageReport) -> None:
    if report.problems:
        pytest.fail(f"{report.url}:\n  " + "\n  ".join(report.problems), pytrace=False)


# --------------------------------------------------------------------------- the real book


@pytest.mark.slow
def test_book_builds_without_warnings(book_build):
    problems = book_build.warnings or [book_build.log[-3000:]]
    assert book_build.returncode == 0, "jupyter-book build -W -n failed:\n" + "\n".join(problems)


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES, ids=[p.html.removesuffix(".html") for p in PAGES])
def test_page_reads_well(page, browser_context, book_url, book_build, capsys):
    """Loads cleanly; equations typeset; figures load; Colab link; language switch;
    solutions hidden."""
    if not (book_build.html / page.html).is_file():
        pytest.fail(f"{page.html} was not built (is {page.source.name} valid?)")
    shot = ARTIFACTS / SCREENSHOTS[page.html] if page.html in SCREENSHOTS else None
    report = bb.check_page(browser_context, book_url + page.html, page, CONFIGS[page.edition],
                           screenshot=shot, switch=book_url + _other_edition(page))
    if shot is not None:
        with capsys.disabled():
            print(f"\n[browser] screenshot of {page.html}: {shot}")
    _fail_on(report)


#: Pages whose language switch is clicked (every page's link is checked by test_page_reads_well).
SWITCH_PAGES = [p for p in PAGES if p.docname in (
    "book/intro", "notebooks/00_overview", "notebooks/03_qkv_and_masks", "book/glossary")]


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("page", SWITCH_PAGES, ids=[p.html.removesuffix(".html")
                                                    for p in SWITCH_PAGES])
def test_language_switch_lands_on_the_same_page(page, browser_context, book_url):
    landed, status, back = bb.follow_switch(browser_context, book_url + page.html)
    assert (landed, status) == (book_url + _other_edition(page), 200)
    assert back == book_url + page.html, f"the switch on {landed} leads to {back}, not back"


@pytest.mark.slow
@pytest.mark.browser
def test_a_cjk_font_shows_the_chinese_pages():
    fc_list = shutil.which("fc-list")
    fonts = subprocess.run([fc_list, ":lang=zh", "family"], capture_output=True,
                           text=True).stdout if fc_list else ""
    assert fonts.strip(), ("no font for Chinese: screenshots of the Chinese pages would show "
                           "boxes; apt-get install fonts-noto-cjk (.ci/run does)")


@pytest.mark.slow
@pytest.mark.browser
def test_search_finds_terms(browser_context, book_url):
    found = bb.search(browser_context, book_url, "attention")
    assert found, "searching the book for 'attention' found no page"
    # A glossary entry is found on the glossary page.
    assert "Glossary" in bb.search(browser_context, book_url, "positional"), (
        "searching for 'positional' did not list the glossary"
    )
    # And a word that is nowhere is not found (the search really filters).
    assert bb.search(browser_context, book_url, "qzxvwkjq") == []


def _title(path: Path) -> str:
    return next(line[2:].strip() for line in path.read_text(encoding="utf-8").splitlines()
                if line.startswith("# "))


@pytest.mark.slow
@pytest.mark.browser
def test_chinese_search_finds_terms(browser_context, book_url):
    """Chinese words are indexed (jieba), glossary terms whole (zh/_search_words.txt)."""
    glossary = _title(ZH / "book" / "glossary.md")
    for term in ["多头注意力", "层归一化", "注意力"]:
        assert glossary in bb.search(browser_context, book_url + "zh/", term), (
            f"searching the Chinese edition for {term!r} did not list its glossary ({glossary})")
    assert bb.search(browser_context, book_url + "zh/", "qzxvwkjq") == []


# --------------------------------------------------------------------------- the checks themselves


@pytest.mark.slow
@pytest.mark.browser
def test_checks_see_every_kind_of_content(browser_context, fixture_url, fixture_build):
    """On a fixture page with math, a figure and an exercise, every check finds its object."""
    page = bb.TocPage("notebooks/99_fixture", Path("notebooks/99_fixture.ipynb"))
    report = bb.check_page(browser_context, fixture_url + page.html, page, CONFIG)
    _fail_on(report)
    # inline, display, align, and the exercise's and solution's inline math
    assert report.math >= 5, report
    assert report.figures == 1, report
    assert report.solutions == 1, report
    assert report.colab_links == [bb.colab_url(page, CONFIG)] * len(report.colab_links)
    assert "Fixture chapter" in bb.search(browser_context, fixture_url, "FIXTURESOLUTIONTEXT")


BROKEN_PAGE = r"""<!DOCTYPE html><html><head><meta charset="utf-8">
<script src="https://cdn.example.invalid/mathjax/tex-chtml.js" async></script></head>
<body><article>
<p>Raw \(x^2\) and $$y$$ left in the text.</p>
<span class="math notranslate nohighlight">\(z\)</span>
<img src="missing.png"><img src="empty.png">
<pre>if "google.colab" in sys.modules: pass</pre>
<pre style="width: 200px">a_code_line_wider_than_its_box = "xxxxxxxxxxxxxxxxxxxx"</pre>
<div class="solution admonition"><p class="admonition-title">Solution</p>
<section>Shown from the start.</section></div>
</article><script>console.error("boom");</script></body></html>
"""


@pytest.mark.slow
@pytest.mark.browser
def test_checks_report_a_broken_page(browser_context, tmp_path):
    (tmp_path / "broken.html").write_text(BROKEN_PAGE, encoding="utf-8")
    (tmp_path / "empty.png").write_bytes(b"")
    page = bb.TocPage("broken", tmp_path / "broken.ipynb")
    with bb.serve(tmp_path) as url:
        report = bb.check_page(browser_context, url + "broken.html", page, CONFIG,
                               switch=url + "zh/broken.html")
    text = "\n".join(report.problems)
    for expected in [
        "console error: boom",
        "request outside the book: https://cdn.example.invalid",
        "MathJax did not load",
        "equation not typeset",
        "raw TeX in the text",
        "image missing.png: HTTP 404",
        "image empty.png: HTTP 200, 0 bytes",
        "no Colab launch link",
        "solution 1 is visible before a click",
        "the Colab install cell shows on the page",
        "the language switch leads to nowhere",
        "code scrolls sideways by",
    ]:
        assert expected in text, f"{expected!r} not reported; got:\n{text}"


BROKEN_CHINESE_PAGE = """<!DOCTYPE html><html lang="zh-CN"><head><meta charset="utf-8">
<script src="reading-zh.js"></script></head>
<body><button title="Toggle primary sidebar">=</button>
<p class="logo__title" style="width: 2.5em">中文版</p><article style="width: 300px">
<p>一个公式<span class="math" style="display: inline-block; width: 100%">x</span>。后面的文字</p>
<p>路径<a href="#"><code style="display: inline-block; width: 100%">a/b.json</code></a>，后面</p>
<div class="solution admonition"><p class="admonition-title">解答 练习 (Q1)</p></div>
<details class="hide above-input"><summary aria-label="Toggle hidden content">
<p class="collapsed">Show code cell content</p><p class="expanded">Hide code cell content</p>
</summary><pre>x = 1</pre></details>
</article></body></html>
"""


@pytest.mark.slow
@pytest.mark.browser
def test_checks_report_a_broken_chinese_page(browser_context, tmp_path):
    """A full stop pushed to the next line after math, a comma after a code span (in a
    link), English tooltips, the toggle of a hidden code cell and a solution title in English
    word order are reported (the real pages' script, without its translations)."""
    (tmp_path / "broken.html").write_text(BROKEN_CHINESE_PAGE, encoding="utf-8")
    (tmp_path / "reading-zh.js").write_text(
        'document.documentElement.dataset.uiTranslated = "zh";', encoding="utf-8")
    with bb.serve(tmp_path) as url:
        report = bb.check_page(browser_context, url + "broken.html")
    text = "\n".join(report.problems)
    for expected in ["punctuation starts a line after math or code: 'x。",
                     "punctuation starts a line after math or code: 'a/b.json，",
                     'English on a Chinese page: title="Toggle primary sidebar"',
                     'solution title "解答 练习 (Q1)"',
                     'English on a Chinese page: aria-label="Toggle hidden content"',
                     'English on a Chinese page: hint "Show code cell content"',
                     "the sidebar title breaks inside '中文版'"]:
        assert expected in text, f"{expected!r} not reported; got:\n{text}"


@pytest.fixture(scope="session")
def phone_context(browser_context):
    """A phone's screen, in a browser that draws scrollbars as a phone does (Playwright starts
    Chromium with --hide-scrollbars, which would hide a styled scrollbar too)."""
    browser = browser_context.browser.browser_type.launch(
        executable_path=bb.find_chromium()[0], args=bb.CHROMIUM_FLAGS,
        ignore_default_args=bb.SHOW_SCROLLBARS)
    context = browser.new_context(
        viewport={"width": bb.PHONE_WIDTH, "height": 844}, is_mobile=True, has_touch=True)
    yield context
    context.close()
    browser.close()


#: Chapters whose tables of the text are checked to fit a phone's column.
TABLES_FIT = {"notebooks/02_dot_product_attention", "notebooks/07_layernorm_residuals",
              "notebooks/08_transformer_vs_rnn_cnn", "notebooks/10_translation_end_to_end",
              "notebooks/11_gpt_and_bert"}


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("page", PAGES, ids=[p.html.removesuffix(".html") for p in PAGES])
def test_page_fits_a_phone(page, phone_context, book_url):
    """At 390 px the page does not scroll sideways, the header's buttons are on screen, every
    displayed equation shows whole (it fits, or its box scrolls with a scrollbar that shows),
    no inline formula or inline code runs past the edge of its paragraph or box (an exercise,
    a folded answer) and no row of a printed table wraps."""
    problems = bb.check_phone_layout(phone_context, book_url + page.html,
                                     tables=page.docname in TABLES_FIT)
    assert not problems, f"{page.html} at {bb.PHONE_WIDTH} px:\n  " + "\n  ".join(problems)


@pytest.mark.slow
@pytest.mark.browser
def test_phone_check_sees_a_page_too_wide(phone_context, tmp_path):
    (tmp_path / "wide.html").write_text(
        '<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width">'
        '</head><body><div style="width: 600px">wide</div></body></html>', encoding="utf-8")
    with bb.serve(tmp_path) as url:
        problems = bb.check_phone_layout(phone_context, url + "wide.html")
    assert any("scrolls sideways" in p for p in problems), problems


NARROW_PAGE = """<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width">
<link rel="stylesheet" href="reading.css"><style>span.pre { white-space: nowrap }</style>
</head><body><article>
<mjx-container display="true" style="display: block" id="plain">
<span style="display: inline-block; width: 600px">a formula too wide</span></mjx-container>
<mjx-container display="true" style="display: block" id="styled">
<span style="display: inline-block; width: 600px">a formula that scrolls</span></mjx-container>
<div class="cell_output"><div class="output"><pre style="white-space: pre-wrap">
name          value        a long third column of the printed table
first         1            xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
</pre></div></div>
<div class="cell_output"><div class="output output-table"><pre>
name          value        a long third column of the printed table
first         1            xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
</pre></div></div>
<table><tr><td style="min-width: 500px">a table of the text wider than the column</td>
</tr></table>
<div class="admonition" style="overflow: hidden; padding: 0 1.5em"><p>In
<span class="math" style="display: inline-flex; max-width: 100%; overflow: hidden">
<mjx-container class="MathJax" id="cut"><span style="display: inline-block; width: 500px">
a formula wider than the box</span></mjx-container></span>, an inline formula too wide, and
<code id="unbroken" style="white-space: nowrap">a_name_of_inline_code_that_has_no_place_to_break_at
</code>, and one the book's CSS lets break:
<code class="docutils literal notranslate" id="breaking"><span class="pre">
another_name_of_inline_code_that_has_no_place_to_break_at_all</span></code>
and <mjx-container class="MathJax" id="fitting"><span style="display: inline-block; width:
200px">a formula that fits</span></mjx-container>.</p></div></article></body></html>
"""


@pytest.mark.slow
@pytest.mark.browser
def test_phone_check_sees_what_does_not_show_whole(phone_context, tmp_path):
    """An equation wider than its box with no scrollbar that shows, a wrapped row of a printed
    table, a table wider than the column, and inline math or code that runs past the edge of
    an exercise's box are reported; what the book's CSS handles (a styled scrollbar, rows
    kept whole, inline code that breaks) is not."""
    (tmp_path / "narrow.html").write_text(NARROW_PAGE, encoding="utf-8")
    css = (bb.ROOT / "book" / "_ext" / "static" / "reading.css").read_text(encoding="utf-8")
    # the second equation stands for one the book's CSS handles; the first has no such rule
    (tmp_path / "reading.css").write_text(css.replace(
        'mjx-container[display="true"]', 'mjx-container[display="true"]#styled'),
        encoding="utf-8")
    with bb.serve(tmp_path) as url:
        problems = bb.check_phone_layout(phone_context, url + "narrow.html")
    text = "\n".join(problems)
    assert "an equation does not show whole: plain" in text, text
    assert "styled" not in text, text
    assert text.count("a row of a table output wraps") == 2, text
    assert "a table output does not show whole" not in text, text
    assert "a table is wider than the column" in text, text
    assert "an inline formula runs past its box: cut" in text, text
    assert "inline code runs past its box: unbroken" in text, text
    assert "box: fitting" not in text and "box: breaking" not in text, text


WIDE_FIGURE_PAGE = """<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width">
<style>img {{ max-width: 100%; }}</style>{css}</head><body><article>
<div class="cell_output"><figure class="align-default wide-figure" id="fig-wide">
<a class="reference internal image-reference" href="figure.png"><img alt="a figure"
src="figure.png" style="width: 760px; height: 380px;"></a>
<figcaption><p>Fig. 1 a wide figure</p></figcaption></figure></div></article></body></html>
"""


@pytest.mark.slow
@pytest.mark.browser
def test_phone_check_sees_a_wide_figure_shrunk(phone_context, tmp_path):
    """A figure marked wide (reading.WIDE_FIGURES) that the theme shrinks to the column is
    reported; with the book's CSS it keeps its size in a box that scrolls with a scrollbar
    that shows, and the page does not scroll sideways."""
    (tmp_path / "figure.png").write_bytes(bb._png_bytes())
    (tmp_path / "reading.css").write_text(
        (bb.ROOT / "book" / "_ext" / "static" / "reading.css").read_text(encoding="utf-8"),
        encoding="utf-8")
    (tmp_path / "plain.html").write_text(WIDE_FIGURE_PAGE.format(css=""), encoding="utf-8")
    (tmp_path / "styled.html").write_text(
        WIDE_FIGURE_PAGE.format(css='<link rel="stylesheet" href="reading.css">'),
        encoding="utf-8")
    with bb.serve(tmp_path) as url:
        plain = bb.check_phone_layout(phone_context, url + "plain.html")
        styled = bb.check_phone_layout(phone_context, url + "styled.html")
    assert any("a wide figure does not keep its size: fig-wide: shown" in p
               for p in plain), plain
    assert not styled, styled


@pytest.mark.slow
@pytest.mark.browser
def test_language_switch_keeps_the_section_and_the_query(browser_context, book_url):
    """From a section of a chapter the switch lands on the same section of the other edition
    (the anchors differ: the section's place in the page is the same); from the search page
    it keeps the query."""
    page = browser_context.new_page()
    page.set_default_timeout(bb.PAGE_TIMEOUT_MS)
    try:
        page.goto(book_url + "notebooks/03_qkv_and_masks.html", wait_until="load")
        ids = page.eval_on_selector_all("article section[id]", "els => els.map(e => e.id)")
        assert len(ids) > 3, ids
        page.goto(book_url + f"notebooks/03_qkv_and_masks.html#{ids[3]}", wait_until="load")
        with page.expect_navigation(wait_until="load"):
            page.click("a.edition-switch")
        assert page.url.split("#")[0] == book_url + "zh/notebooks/03_qkv_and_masks.html"
        page.wait_for_function("() => location.hash.length > 1")
        landed = page.evaluate("() => decodeURIComponent(location.hash.slice(1))")
        zh_ids = page.eval_on_selector_all("article section[id]", "els => els.map(e => e.id)")
        assert landed == zh_ids[3], (landed, zh_ids[:5])

        page.goto(book_url + "search.html?q=attention", wait_until="load")
        with page.expect_navigation(wait_until="load"):
            page.click("a.edition-switch")
        assert page.url == book_url + "zh/search.html?q=attention"
    finally:
        page.close()


@pytest.mark.slow
@pytest.mark.browser
def test_search_lists_chapters_before_the_glossary(browser_context, book_url):
    zh_glossary = _title(ZH / "book" / "glossary.md")
    for base, term, glossary in [(book_url, "positional", "Glossary"),
                                 (book_url + "zh/", "层归一化", zh_glossary)]:
        found = bb.search(browser_context, base, term)
        assert glossary in found, f"{term!r}: the glossary is not listed ({found})"
        assert found[0] != glossary and not found[0].startswith(glossary), (
            f"{term!r}: the glossary comes first ({found[:5]})")


@pytest.mark.slow
def test_chinese_sections_have_readable_anchors(book_build):
    """A Chinese heading's anchor is made of its words (#第-1-部分十二个问题), not #id7."""
    opaque = {}
    for page in CHINESE:
        html = (book_build.html / page.html).read_text(encoding="utf-8")
        found = re.findall(r'<section id="(id\d+)"', html)
        if found:
            opaque[page.html] = found
    assert not opaque, f"sections whose anchor is an opaque id: {opaque}"
    ch09 = (book_build.html / "zh/notebooks/09_interview_questions.html").read_text("utf-8")
    assert re.search(r'<section id="[^"]*[\u4e00-\u9fff][^"]*"', ch09)


def _expected_figure_numbers(page: bb.TocPage) -> dict[str, str]:
    """figure name -> "N.k": the chapter number of the file name (``10_...`` -> 10) and the
    figure's place among the chapter's captioned figures, read from the notebook's cells
    (the ``mystnb.figure`` metadata), independently of how Sphinx numbers them."""
    chapter = int(Path(page.docname).name.split("_")[0])
    nb = nbformat.read(page.source, as_version=4)
    names = [cell.metadata["mystnb"]["figure"]["name"] for cell in nb.cells
             if cell.cell_type == "code"
             and (cell.metadata.get("mystnb", {}).get("figure") or {}).get("caption")]
    return {name: f"{chapter}.{k}" for k, name in enumerate(names, start=1)}


_CAPTION_NUMBER = re.compile(
    r'<figure[^>]*\bid="(fig-[^"]+)".*?<span class="caption-number">([^<]*)</span>', re.S)
_NUMREF = re.compile(r'<a class="reference internal" href="([^"]*)#(fig-[^"]+)">'
                     r'<span class="std std-numref">([^<]*)</span></a>')


@pytest.mark.slow
def test_figures_are_numbered_per_chapter(book_build):
    """Captions and {numref} links read "Fig. 10.3" (Chinese: "图 10.3") for chapter 10's third
    figure, counting from 1 in each chapter, in both editions."""
    expected = {}  # (edition, figure name) -> "N.k"
    for page in PAGES:
        if page.is_notebook and re.match(r"\d+_", Path(page.docname).name):
            expected.update({(page.edition, name): number
                             for name, number in _expected_figure_numbers(page).items()})
    assert sum(number == "10.3" for number in expected.values()) == 2, (
        "expected a third figure in chapter 10 of each edition")
    label = {"": "Fig. {}", "zh/": "图 {}"}
    problems, captions, links = [], 0, 0
    for page in PAGES:
        html = (book_build.html / page.html).read_text(encoding="utf-8")
        for name, shown in _CAPTION_NUMBER.findall(html):
            captions += 1
            want = label[page.edition].format(expected.get((page.edition, name), "?"))
            if shown.strip() != want:
                problems.append(f"{page.html}: caption of {name} reads {shown.strip()!r}, "
                                f"not {want!r}")
        for _href, name, shown in _NUMREF.findall(html):
            links += 1
            want = label[page.edition].format(expected.get((page.edition, name), "?"))
            if shown.strip() != want:
                problems.append(f"{page.html}: the link to {name} reads {shown.strip()!r}, "
                                f"not {want!r}")
    assert captions == len(expected), f"{captions} numbered captions for {len(expected)} figures"
    assert links >= 2, "no {numref} link to a figure was found"
    assert not problems, "\n".join(problems)


_VISIBLE_SEARCH_CONTROLS = """() => Array.from(document.querySelectorAll(
    '.search-button, .search-button-field, form.bd-search'))
  .filter(e => e.offsetParent !== null && !e.closest('dialog'))
  .map(e => e.className + ' in ' + (e.parentElement.closest('[class]') || {}).className)"""


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("edition", ["", "zh/"])
def test_one_search_field_at_each_width(edition, browser_context, phone_context, book_url):
    """A page shows one search control: the sidebar's field at 1280 px (pydata-sphinx-theme
    0.17 added a second one in a top bar, book/_ext/html_fixes.py), the header's button at
    390 px."""
    for context, width in ((browser_context, 1280), (phone_context, bb.PHONE_WIDTH)):
        page = context.new_page()
        try:
            page.goto(book_url + edition + "notebooks/05_feed_forward.html", wait_until="load")
            found = page.evaluate(_VISIBLE_SEARCH_CONTROLS)
        finally:
            page.close()
        assert len(found) == 1, f"{edition or 'en/'} at {width} px: {found}"

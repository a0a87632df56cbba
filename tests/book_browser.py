"""Helpers for the browser tests: build the book, serve it, check pages in Chromium.

The tests in ``test_browser.py`` use these to check the rendered book as a
reader meets it, in both editions (English, and Chinese under ``zh/``):
every page of the table of contents loads without console errors, its
equations are typeset by the MathJax copy served with the book, its figures
load, its launch link opens the right notebook on Colab, its language switch
leads to the same page in the other edition, its exercise solutions start
hidden and open on click, and the search page finds terms.

Chromium is driven by Python Playwright (``playwright`` on PyPI) using the
system's Chromium (Debian's ``chromium``; Playwright's own browser download
is not used). ``find_chromium()`` says where it is, or why it is missing.
"""

from __future__ import annotations

import base64
import functools
import http.server
import io
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat
import yaml

if TYPE_CHECKING:  # playwright is imported only by the tests that drive a browser
    from playwright.sync_api import BrowserContext

ROOT = Path(__file__).resolve().parents[1]

#: Headless flags that work on the project's machines (ENVIRONMENT.md).
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Where a Chromium or Chrome binary may be; ``MINITRANSFORMER_CHROMIUM`` wins.
CHROMIUM_CANDIDATES = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
#: Milliseconds a wait may last before it counts as hung. Every wait is for a condition (the
#: page's load event, MathJax's startup promise, a solution shown): this bounds a page that
#: never gets there, even on a 2-core machine running a second test suite beside.
PAGE_TIMEOUT_MS = 600_000
#: A figure drawn smaller than this fraction of its own pixel width is unreadable.
MIN_FIGURE_SCALE = 0.5


def find_chromium() -> tuple[str | None, str]:
    """Return ``(path, "")`` of a Chromium binary, or ``(None, reason)``."""
    override = os.environ.get("MINITRANSFORMER_CHROMIUM")
    if override:
        if Path(override).is_file():
            return override, ""
        return None, f"MINITRANSFORMER_CHROMIUM={override} does not exist"
    for name in CHROMIUM_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path, ""
    return None, (
        "no Chromium found (looked for " + ", ".join(CHROMIUM_CANDIDATES) + "); "
        "install it with `apt-get install -y chromium` (.ci/run does) "
        "or point MINITRANSFORMER_CHROMIUM at a Chrome binary"
    )


# --------------------------------------------------------------------------- table of contents


@dataclass(frozen=True)
class TocPage:
    """One page of the table of contents."""

    docname: str  # e.g. "notebooks/03_qkv_and_masks" (no suffix)
    source: Path  # the .ipynb or .md file in the repository
    edition: str = ""  # where the page's edition is in the built site: "" or "zh/"

    @property
    def html(self) -> str:
        """The page's path in the built site."""
        return self.edition + self.docname + ".html"

    @property
    def is_notebook(self) -> bool:
        return self.source.suffix == ".ipynb"


def _toc_files(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key in ("root", "file"):
            if key in node:
                yield node[key]
        for key in ("parts", "chapters", "sections"):
            for child in node.get(key, []):
                yield from _toc_files(child)
    elif isinstance(node, list):
        for child in node:
            yield from _toc_files(child)


def toc_pages(root: Path = ROOT, edition: str = "") -> list[TocPage]:
    """Every page named in ``root/_toc.yml``, in reading order; ``edition`` is where that
    book is in the built site ("zh/" for the Chinese edition, rooted at ``ROOT/zh``)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    pages = []
    for docname in _toc_files(toc):
        docname = docname.removesuffix(".md").removesuffix(".ipynb")
        for suffix in (".ipynb", ".md"):
            if (root / (docname + suffix)).is_file():
                pages.append(TocPage(docname, root / (docname + suffix), edition))
                break
        else:
            raise FileNotFoundError(f"_toc.yml names {docname!r}, but no .ipynb or .md exists")
    return pages


def book_config(root: Path = ROOT) -> dict:
    return yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))


def colab_url(page: TocPage, config: dict) -> str:
    """The launch link the book should show for a notebook page."""
    repo = config["repository"]
    owner_name = repo["url"].rstrip("/").removeprefix("https://github.com/")
    base = config["launch_buttons"]["colab_url"].rstrip("/")
    path = "/".join(p for p in (repo.get("path_to_book", "").strip("/"), page.docname) if p)
    return f"{base}/github/{owner_name}/blob/{repo.get('branch', 'main')}/{path}.ipynb"


# --------------------------------------------------------------------------- building


@dataclass
class BuildResult:
    """The outcome of one ``jupyter-book build``."""

    html: Path
    returncode: int
    log: str

    @property
    def warnings(self) -> list[str]:
        return [
            line
            for line in self.log.splitlines()
            if "WARNING" in line or "ERROR" in line or "CRITICAL" in line
        ]


def build_book(source: Path, output: Path, timeout: int = 900) -> BuildResult:
    """Build the book at ``source`` into ``output`` with warnings as errors, as ``make book``
    does (``tools/build_book.py``): the English edition, and the Chinese one into ``zh/`` of
    the site when ``source/zh`` has one.

    ``--keep-going`` makes a build with warnings still write every page, so
    the browser checks can run and the warnings be reported separately.
    """
    sys.path.insert(0, str(ROOT / "tools"))
    import build_book as builder

    status, log = builder.build(source, output, timeout)
    return BuildResult(output / "_build" / "html", status, log)


def _png_bytes() -> bytes:
    """A small matplotlib figure drawn with the book's style, as PNG bytes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minitransformer.instruments.plotting import use_book_style

    use_book_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [0, 1, 4], label="y = x²")
    ax.set_xlabel("x (units)")
    ax.set_ylabel("y (units)")
    ax.legend()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


FIXTURE_MARKDOWN = r"""# Fixture chapter

Inline math $q \cdot k / \sqrt{d_k}$ and a {term}`mask`, cited {cite:p}`vaswani2017attention`.

$$
\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\left(\frac{QK^\top}{\sqrt{d_k}}\right) V
$$

\begin{align}
  \mu &= \frac{1}{D} \sum_i x_i
\end{align}
"""

FIXTURE_EXERCISE = """## Exercises

```{exercise}
:label: fixture-ex

Compute $2 + 2$.
```

```{solution} fixture-ex
:class: dropdown

FIXTURESOLUTIONTEXT: it is $4$.
```
"""


def make_fixture_book(dest: Path, root: Path = ROOT) -> Path:
    """A small book with the real configuration and one page of every kind of content.

    Lets the checks be exercised on math, a figure, a cross-reference and an
    exercise before (and independently of) the chapters that will have them.
    """
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(root / "_config.yml", dest / "_config.yml")
    shutil.copytree(root / "book", dest / "book")
    (dest / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python",
                                 "name": "python3"}
    code = nbformat.v4.new_code_cell("plt.plot([0, 1, 2], [0, 1, 4])\nplt.show()")
    code.execution_count = 1
    code.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"image/png": base64.b64encode(_png_bytes()).decode(),
                  "text/plain": "<Figure size 640x360 with 1 Axes>"},
        )
    ]
    sys.path.insert(0, str(root / "tools"))
    from sync_colab_cell import COLAB_CELL

    nb.cells = [nbformat.v4.new_code_cell(COLAB_CELL),
                nbformat.v4.new_markdown_cell(FIXTURE_MARKDOWN), code,
                nbformat.v4.new_markdown_cell(FIXTURE_EXERCISE)]
    nbformat.write(nb, dest / "notebooks" / "99_fixture.ipynb")
    toc = {
        "format": "jb-book",
        "root": "book/intro",
        "chapters": [{"file": "notebooks/99_fixture"}, {"file": "book/glossary"},
                     {"file": "book/references"}],
    }
    (dest / "_toc.yml").write_text(yaml.safe_dump(toc), encoding="utf-8")
    return dest


# --------------------------------------------------------------------------- serving


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        pass


@contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1 (ephemeral port); yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# --------------------------------------------------------------------------- checking pages


@dataclass
class PageReport:
    """What one page showed, and what was wrong with it."""

    url: str
    problems: list[str] = field(default_factory=list)
    math: int = 0  # equations typeset
    figures: int = 0  # images checked in the article
    solutions: int = 0  # hidden solutions that opened on click
    colab_links: list[str] = field(default_factory=list)
    switch: str | None = None  # where the language switch leads (absolute URL)


_WAIT_FOR_MATHJAX = """
async () => {
  if (!document.querySelector('.math')) return 'no math';
  if (!document.querySelector('script[src*="mathjax" i]'))
    return 'the page has equations but loads no MathJax';
  // Called after the window's load event, which waits for every script of the page to run
  // or fail: MathJax has started by now, or never will. Then wait for its typesetting.
  if (!(window.MathJax && MathJax.startup && MathJax.startup.promise))
    return 'MathJax did not load (its script had not run when the page finished loading)';
  await MathJax.startup.promise;
  return 'ok';
}
"""

#: Code blocks, outputs and displayed equations that scroll sideways in the article.
_OVERFLOW_STATE = r"""
() => {
  const article = document.querySelector('article') || document.body;
  const wide = (el) => el.scrollWidth > el.clientWidth + 1;
  const show = (el) => el.textContent.trim().split('\n')[0].slice(0, 60);
  const code = Array.from(article.querySelectorAll('pre')).filter(wide).map(
    p => ({kind: p.closest('.cell_output, .output') ? 'output' : 'code', text: show(p),
           over: p.scrollWidth - p.clientWidth}));
  const math = Array.from(article.querySelectorAll('mjx-container[display="true"]'))
    .filter(wide).map(m => ({kind: 'equation', text: (m.closest('.math') || m).getAttribute(
      'id') || show(m.closest('.math') || m), over: m.scrollWidth - m.clientWidth}));
  return [...code, ...math];
}
"""

#: Chinese punctuation that starts a line right after inline math or an inline code span (it
#: must stay with it; a code span too long for what is left of the line would otherwise
#: leave its comma to start the next one).
_PUNCTUATION_STATE = r"""
(zh) => {
  // Chinese pages: after math or a code span; English pages: after math (code wraps there).
  const forbidden = zh ? /^[，。、；：！？）》」』”’]/ : /^[,.;:!?)\]’”]/;
  const opening = /[（《「『“‘〔【(]$/;
  const out = [];
  const spans = document.querySelectorAll(zh ? 'article span.math, article code'
                                             : 'article span.math');
  const rectOf = (node, start, end) => {
    const range = document.createRange();
    range.setStart(node, start);
    range.setEnd(node, end);
    return range.getClientRects()[0];
  };
  // the node beside el on side ('nextSibling' / 'previousSibling'), also beside the link or
  // emphasis that el ends (or starts)
  const besideOf = (el, side) => {
    while (!el[side] && el.parentElement
           && el.parentElement.matches('a, em, strong, span:not(.math)'))
      el = el.parentElement;
    return el[side];
  };
  for (const span of spans) {
    if (span.closest('pre')) continue;
    const rects = span.getClientRects();
    const first = rects[0], last = rects[rects.length - 1];
    if (!first) continue;
    // the text after the span, also after the link or emphasis that ends with it
    const next = besideOf(span, 'nextSibling');
    if (next && next.nodeType === Node.TEXT_NODE && forbidden.test(next.data)) {
      const mark = rectOf(next, 0, 1);
      if (mark && mark.top >= last.bottom - 1)
        out.push((span.textContent.trim().slice(0, 45) + next.data.slice(0, 10))
                 .replace(/\s+/g, ' '));
    }
    // an opening bracket or quote right before math that ends the line above it
    if (!span.matches('span.math')) continue;
    const prev = besideOf(span, 'previousSibling');
    if (prev && prev.nodeType === Node.TEXT_NODE && opening.test(prev.data)) {
      const mark = rectOf(prev, prev.data.length - 1, prev.data.length);
      if (mark && first.top >= mark.bottom - 1)
        out.push('opening mark ends a line before math: '
                 + (prev.data.slice(-10) + span.textContent.trim().slice(0, 40))
                   .replace(/\s+/g, ' '));
    }
  }
  return out;
}
"""

#: Runs of Chinese characters of the sidebar's book title that are split over two lines.
_TITLE_STATE = r"""
() => {
  const out = [];
  for (const title of document.querySelectorAll('.logo__title')) {
    if (!title.offsetParent) continue;
    const node = title.firstChild;
    if (!node || node.nodeType !== Node.TEXT_NODE) continue;
    for (const m of node.data.matchAll(/[\u3400-\u9fff]+/g)) {
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
      if (tops.size > 1) out.push(m[0]);
    }
  }
  return out;
}
"""

#: English left in the Chinese edition's interface: tooltips, labels, toggle hints, solution
#: titles (names such as Colab, GitHub, PDF and the link back to English are allowed).
_ENGLISH_UI_STATE = r"""
() => {
  const allowed = /\b(minitransformer|Colab|GitHub|PDF|English|Transformer|Ctrl|K)\b/g;
  const english = (text) => /[A-Za-z]{3,}/.test((text || '').replace(allowed, ''));
  const out = [];
  const attrs = ['title', 'aria-label', 'placeholder', 'data-bs-title'];
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('a.edition-switch, pre, code, .cell_output, mjx-container')) continue;
    const inArticle = el.closest('article');
    // In the article only the theme's own parts; a citation's title is its reference.
    if (inArticle && !el.matches('.headerlink, .toggle-button, .toggle-button *, button, '
                                 + 'details.hide > summary'))
      continue;
    for (const name of attrs) {
      const value = el.getAttribute(name);
      if (english(value)) out.push(`${name}="${value}"`);
    }
  }
  // the toggle hints, also those of hidden code cells (myst-nb's "Show code cell content")
  const hints = Array.from(document.querySelectorAll(
    '.toggle-button__hint, .summary-text, details.hide > summary > *'));
  for (const hint of hints)
    if (english(hint.textContent)) out.push(`hint "${hint.textContent.trim()}"`);
  for (const title of document.querySelectorAll('.solution > .admonition-title')) {
    const text = title.textContent.trim();
    if (/^解答/.test(text) || english(text.replace(/[(（][^)）]*[)）]/g, '')))
      out.push(`solution title "${text}"`);
  }
  return out;
}
"""

_MATH_STATE = r"""
() => {
  const article = document.querySelector('article') || document.body;
  const maths = Array.from(article.querySelectorAll('.math'));
  const untypeset = maths.filter(m => !m.querySelector('mjx-container'))
                         .map(m => m.textContent.trim().slice(0, 80));
  const errors = Array.from(article.querySelectorAll('mjx-merror'))
                      .map(e => (e.getAttribute('data-mjx-error') || e.textContent).slice(0, 80));
  // Text a reader sees, without code, outputs and typeset math.
  const clone = article.cloneNode(true);
  clone.querySelectorAll('pre, code, mjx-container, script, style, .output, .cell_output')
       .forEach(e => e.remove());
  const text = clone.textContent;
  const raw = [];
  for (const d of ['\\(', '\\)', '\\[', '\\]', '$$', '\\begin{']) {
    const i = text.indexOf(d);
    if (i >= 0) raw.push(text.slice(Math.max(0, i - 30), i + 40).replace(/\s+/g, ' '));
  }
  const scripts = Array.from(document.querySelectorAll('script[src*="mathjax" i]'))
                       .map(s => s.src);
  return {count: maths.length, untypeset, errors, raw, scripts};
}
"""

_FIGURE_STATE = """
async () => {
  const article = document.querySelector('article') || document.body;
  const out = [];
  for (const img of Array.from(article.querySelectorAll('img'))) {
    img.scrollIntoView();
    try { await img.decode(); } catch (e) {}
    let bytes = -1, status = 0;
    try {
      const r = await fetch(img.currentSrc || img.src);
      status = r.status;
      bytes = (await r.arrayBuffer()).byteLength;
    } catch (e) {}
    // A HiDPI ("retina") figure has twice the pixels of the size it is meant to be shown at,
    // which its width attribute gives (or its style: docutils writes an image's :width:
    // option, which myst-nb takes from the output's metadata, as style="width: ...px").
    const meant = parseFloat(img.getAttribute('width')) || parseFloat(img.style.width)
      || img.naturalWidth;
    out.push({src: img.getAttribute('src'), natural: meant,
              shown: img.getBoundingClientRect().width, status, bytes,
              output: !!img.closest('.cell_output, .output')});
  }
  return out;
}
"""


_SOLUTION_VISIBLE = """(i) => {
  const sol = document.querySelectorAll('.solution')[i];
  const body = sol.querySelector('.solution-content, section') || sol.lastElementChild;
  const r = body.getBoundingClientRect();
  return !!(body.offsetParent) && r.height > 0 && getComputedStyle(body).visibility !== 'hidden';
}"""


def _solution_state(page, index: int) -> dict:
    return {"visible": page.evaluate(_SOLUTION_VISIBLE, index)}


def check_page(
    context: BrowserContext, url: str, page_info: TocPage | None = None, config: dict | None = None,
    screenshot: Path | None = None, switch: str | None = None,
) -> PageReport:
    """Load ``url`` in a fresh tab of ``context`` and check what a reader would meet.

    ``switch``: the URL the page's language switch must lead to (the same
    page in the other edition); not checked when None.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    report = PageReport(url)
    base = url.split("/", 3)[:3]
    origin = "/".join(base)
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)

    def on_console(msg):
        if msg.type == "error":
            report.problems.append(f"console error: {msg.text}")

    def on_response(resp):
        if resp.status >= 400:
            report.problems.append(f"HTTP {resp.status} for {resp.url}")

    def on_route(route):
        if route.request.url.startswith(origin) or route.request.url.startswith("data:"):
            route.continue_()
        else:
            report.problems.append(f"request outside the book: {route.request.url}")
            route.abort()

    page.on("console", on_console)
    page.on("pageerror", lambda exc: report.problems.append(f"page error: {exc}"))
    page.on("response", on_response)
    page.on("requestfailed", lambda req: report.problems.append(
        f"request failed: {req.url} ({req.failure})") if req.url.startswith(origin) else None)
    page.route("**/*", on_route)
    try:
        page.goto(url, wait_until="load")

        # Equations (waits for MathJax's typesetting, not for a time or an idle network).
        status = page.evaluate(_WAIT_FOR_MATHJAX)
        if status not in ("ok", "no math"):
            report.problems.append(status)
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.evaluate("() => window.scrollTo(0, 0)")
            page.screenshot(path=str(screenshot), full_page=True)
        math = page.evaluate(_MATH_STATE)
        report.math = math["count"] - len(math["untypeset"])
        for text in math["untypeset"]:
            report.problems.append(f"equation not typeset: {text!r}")
        for text in math["errors"]:
            report.problems.append(f"MathJax error: {text!r}")
        for text in math["raw"]:
            report.problems.append(f"raw TeX in the text: {text!r}")
        for src in math["scripts"]:
            if not src.startswith(origin):
                report.problems.append(f"MathJax loaded from outside the book: {src}")

        # Figures.
        for img in page.evaluate(_FIGURE_STATE):
            report.figures += 1
            name = img["src"]
            if img["status"] != 200 or img["bytes"] <= 0:
                report.problems.append(
                    f"image {name}: HTTP {img['status']}, {img['bytes']} bytes")
            elif img["natural"] <= 0:
                report.problems.append(f"image {name} did not decode")
            elif img["output"] and img["shown"] < MIN_FIGURE_SCALE * img["natural"]:
                report.problems.append(
                    f"figure {name} is shown at {img['shown']:.0f} px of its "
                    f"{img['natural']} px: too small to read; make it narrower "
                    f"(figsize width <= ~7 in at the book style's dpi)")

        # The Colab install cell belongs to Colab, not to the page (book/_ext/html_fixes.py).
        if page_info is not None and page_info.is_notebook:
            if "google.colab" in page.eval_on_selector("article, body", "e => e.textContent"):
                report.problems.append("the Colab install cell shows on the page")

        # Launch link (notebook pages).
        report.colab_links = page.eval_on_selector_all(
            'a[href*="colab.research.google.com"]', "els => els.map(e => e.href)")
        if page_info is not None and page_info.is_notebook and config is not None:
            want = colab_url(page_info, config)
            if want not in report.colab_links:
                report.problems.append(
                    f"no Colab launch link to {want} (found {report.colab_links})")

        # Language switch (book/_ext/edition_switch.py): one link, to the same page.
        links = page.eval_on_selector_all("a.edition-switch", "els => els.map(e => e.href)")
        report.switch = links[0] if links else None
        if switch is not None and links != [switch]:
            report.problems.append(f"the language switch leads to {links or 'nowhere'}, "
                                   f"not to {switch}")

        # Exercise solutions: hidden at first, shown after a click.
        n = page.locator(".solution").count()
        for i in range(n):
            if _solution_state(page, i)["visible"]:
                report.problems.append(f"solution {i + 1} is visible before a click")
                continue
            sol = page.locator(".solution").nth(i)
            toggle = sol.locator("summary, button.toggle-button, .admonition-title").first
            toggle.scroll_into_view_if_needed()
            # the title's right end: its centre may hold a link (a long title), which jumps
            box = toggle.bounding_box()
            where = {"x": max(box["width"] - 8, 1), "y": box["height"] / 2} if box else None
            toggle.click(position=where)
            try:  # the toggle animates; wait for the body to show, however slow the machine
                page.wait_for_function(f"() => ({_SOLUTION_VISIBLE})({i})")
                report.solutions += 1
            except PlaywrightTimeoutError:
                report.problems.append(f"solution {i + 1} did not open on click")

        # Layout: nothing in the article scrolls sideways; Chinese typeset as Chinese.
        for item in page.evaluate(_OVERFLOW_STATE):
            report.problems.append(f"{item['kind']} scrolls sideways by {item['over']} px: "
                                   f"{item['text']!r}")
        zh = page.evaluate("() => document.documentElement.lang").lower().startswith("zh")
        for text in page.evaluate(_PUNCTUATION_STATE, zh):
            report.problems.append(f"punctuation starts a line after math or code: {text!r}")
        if zh:
            if page.locator('script[src*="reading-zh"]').count():
                page.wait_for_function("() => document.documentElement.dataset.uiTranslated")
            else:
                report.problems.append("the Chinese page loads no reading-zh.js "
                                       "(book/_ext/reading.py)")
            for text in page.evaluate(_TITLE_STATE):
                report.problems.append(f"the sidebar title breaks inside {text!r}")
            for text in page.evaluate(_ENGLISH_UI_STATE):
                report.problems.append(f"English on a Chinese page: {text}")
    finally:
        page.close()
    return report


#: The width of a phone's screen in CSS pixels.
PHONE_WIDTH = 390
#: ``ignore_default_args`` for a browser whose scrollbars show as the reader's would:
#: Playwright starts Chromium with ``--hide-scrollbars``, which hides even a styled one. On a
#: phone (``is_mobile``) an unstyled scrollbar is an overlay that takes no room.
SHOW_SCROLLBARS = ["--hide-scrollbars"]

#: What does not read whole on a narrow screen (book/_ext/static/reading.css):
#: - a displayed equation wider than its box whose box does not scroll with a scrollbar that
#:   shows (a phone's overlay scrollbar is hidden until touched: the reader would not know
#:   the rest is there), or whose box runs past the text column;
#: - a row of a printed table (a line with columns: text, a gap of two or more spaces, text;
#:   an output with two such rows is a table)
#:   that wraps onto a second line, or a table output wider than its box without a scrollbar
#:   that shows;
#: - a table of the text wider than the column (its theme container then scrolls it).
_NARROW_READING_STATE = r"""
() => {
  const article = document.querySelector('article') || document.body;
  // the text column: the article's content box
  const frame = article.getBoundingClientRect(), pad = getComputedStyle(article);
  const column = {left: frame.left + parseFloat(pad.paddingLeft),
                  right: frame.right - parseFloat(pad.paddingRight)};
  column.width = column.right - column.left;
  const show = (text) => text.trim().replace(/\s+/g, ' ').slice(0, 60);
  // A box that scrolls sideways with a scrollbar that takes room (not an overlay one).
  const scrollsVisibly = (el) => {
    const style = getComputedStyle(el);
    const bar = el.offsetHeight - el.clientHeight - parseFloat(style.borderTopWidth)
      - parseFloat(style.borderBottomWidth);
    return ['auto', 'scroll'].includes(style.overflowX) && bar >= 3;
  };
  const wide = (el) => el.scrollWidth > el.clientWidth + 1;
  const equations = [];
  for (const m of article.querySelectorAll('mjx-container[display="true"]')) {
    const box = m.getBoundingClientRect();
    const name = (m.closest('.math') || m).getAttribute('id')
      || show((m.querySelector('mjx-assistive-mml') || m).textContent);
    if (box.right > column.right + 1 || box.left < column.left - 1)
      equations.push(`${name}: its box runs past the column (${Math.round(box.left)} to `
                     + `${Math.round(box.right)} px, column ${Math.round(column.left)} to `
                     + `${Math.round(column.right)} px)`);
    else if (wide(m) && !scrollsVisibly(m))
      equations.push(`${name}: ${m.scrollWidth} px wide in a ${m.clientWidth} px box `
                     + 'that shows no scrollbar');
  }
  const rows = [], outputs = [];
  const row = /\S {2,}[^\s#]/;  // (a gap before a # is a comment in printed code)
  for (const pre of article.querySelectorAll('div.cell_output pre, div.output pre')) {
    const text = pre.textContent;
    const lines = text.split('\n');
    if (lines.filter(l => row.test(l)).length < 2) continue;  // not a table
    if (wide(pre) && !scrollsVisibly(pre))
      outputs.push(`${show(lines.find(l => row.test(l)))}: ${pre.scrollWidth} px wide in a `
                   + `${pre.clientWidth} px box that shows no scrollbar`);
    // the text nodes of the output, with where each starts in its text
    const nodes = [];
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(), at = 0; n; n = walker.nextNode()) {
      nodes.push({n, at});
      at += n.data.length;
    }
    const locate = (offset) => {
      let k = nodes.length - 1;
      while (k > 0 && nodes[k].at > offset) k--;
      return [nodes[k].n, Math.min(offset - nodes[k].at, nodes[k].n.data.length)];
    };
    let start = 0;
    for (const line of lines) {
      const end = start + line.length;
      if (row.test(line) && line.trim()) {
        const first = line.search(/\S/), last = line.trimEnd().length;
        const range = document.createRange();
        range.setStart(...locate(start + first));
        range.setEnd(...locate(start + last));
        const rects = Array.from(range.getClientRects()).filter(r => r.width > 0);
        const top = Math.min(...rects.map(r => r.top));
        if (rects.some(r => r.top > top + r.height / 2)) rows.push(show(line));
      }
      start = end + 1;
    }
  }
  const tables = Array.from(article.querySelectorAll('table'))
    .filter(t => !t.closest('div.cell_output'))
    .filter(t => t.getBoundingClientRect().width > column.width + 1
                 || t.getBoundingClientRect().right > column.right + 1)
    .map(t => `${show(t.rows[0] ? t.rows[0].textContent : '')}: `
              + `${Math.round(t.getBoundingClientRect().width)} px in a `
              + `${Math.round(column.width)} px column`);
  // The figures reading.py names as wide (class wide-figure): shown at the size they were
  // drawn for (their labels legible), in a box that scrolls with a scrollbar that shows.
  const figures = [];
  for (const img of article.querySelectorAll('figure.wide-figure img')) {
    const name = img.closest('figure').id || img.getAttribute('src');
    const meant = parseFloat(img.getAttribute('width')) || parseFloat(img.style.width)
      || img.naturalWidth;
    const shown = img.getBoundingClientRect().width;
    if (shown < meant - 1)
      figures.push(`${name}: shown ${Math.round(shown)} px wide, drawn for ${meant} px`);
    const box = img.parentElement.closest('figure > *');
    if (box && wide(box) && !scrollsVisibly(box))
      figures.push(`${name}: ${box.scrollWidth} px wide in a ${box.clientWidth} px box `
                   + 'that shows no scrollbar');
  }
  // Inline math and inline code: MathJax sets an inline formula as one box that cannot break,
  // and a long name in code has nowhere to break; one wider than the line that holds it runs
  // past the edge of its block (a paragraph, a list item, an exercise's or an answer's box),
  // where the box cuts it or it runs into the margin, unless a box around it scrolls with a
  // scrollbar that shows.
  const blockOf = (el) => {
    let b = el.parentElement;
    while (b && b !== article && ['inline', 'contents'].includes(getComputedStyle(b).display))
      b = b.parentElement;
    return b || article;
  };
  const scrollsAround = (el) => {
    for (let e = el.parentElement; e && e !== article.parentElement; e = e.parentElement)
      if (wide(e) && scrollsVisibly(e)) return true;
    return false;
  };
  const inline = [];
  for (const el of article.querySelectorAll(
      'mjx-container:not([display="true"]), code:not(pre code)')) {
    if (el.closest('pre, mjx-container[display="true"]')) continue;
    const box = el.getBoundingClientRect();
    if (!box.width) continue;  // not shown
    const block = blockOf(el), frame = block.getBoundingClientRect();
    const style = getComputedStyle(block);
    const right = Math.min(column.right, frame.right - parseFloat(style.borderRightWidth)
                                         - parseFloat(style.paddingRight));
    if (box.right > right + 1 && !scrollsAround(el)) {
      const text = show((el.querySelector('mjx-assistive-mml') || el).textContent);
      inline.push(`${el.tagName === 'CODE' ? 'inline code' : 'an inline formula'} runs past `
                  + `its box: ${el.id ? el.id + ' ' : ''}${JSON.stringify(text)}, `
                  + `${Math.round(box.width)} px wide, to ${Math.round(box.right)} px, its `
                  + `${block.tagName.toLowerCase()}'s text ending at ${Math.round(right)} px`);
    }
  }
  return {equations, rows, outputs, tables, figures, inline};
}
"""


def check_phone_layout(context: BrowserContext, url: str, tables: bool = True) -> list[str]:
    """Load ``url`` in ``context`` (a phone-sized viewport) and say what does not fit: the page
    scrolls sideways, the header's buttons or a heading (its inline math) run past the
    screen's edge, an output figure is drawn out of shape (its width capped, not its
    height), a figure marked wide (``reading.WIDE_FIGURES``) is shrunk below the size it
    was drawn for or its box shows no scrollbar, Chinese punctuation starts a line after math
    or a code span, a displayed equation or a table output is wider than its box and the box
    shows no scrollbar, inline math or inline code runs past the edge of its block (a
    paragraph, an exercise's or an answer's box) with no scrollbar around it that shows, a
    row of a table output wraps, a table of the text is wider than the column
    (``_NARROW_READING_STATE``; not checked when ``tables`` is False)."""
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page.goto(url, wait_until="load")
        status = page.evaluate(_WAIT_FOR_MATHJAX)
        problems = [] if status in ("ok", "no math") else [status]
        state = page.evaluate("""() => {
          const root = document.documentElement;
          const header = Array.from(document.querySelectorAll(
              '.bd-header-article .btn, .bd-header-article a, .bd-header-article button'))
            .filter(e => e.offsetParent)
            .map(e => e.getBoundingClientRect().right);
          const headings = Array.from(document.querySelectorAll(
              'article h1, article h2, article h3, article h4'))
            .filter(h => [h, ...h.querySelectorAll('mjx-container, span.nobr, code')].some(
                e => e.getBoundingClientRect().right > root.clientWidth + 1))
            .map(h => h.textContent.trim().slice(0, 40));
          // an output figure drawn out of shape (its width capped, its height not)
          const squashed = Array.from(document.querySelectorAll('div.cell_output img'))
            .filter(i => i.naturalWidth && i.clientWidth && i.clientHeight)
            .filter(i => Math.abs((i.clientWidth / i.clientHeight)
                                  / (i.naturalWidth / i.naturalHeight) - 1) > 0.03)
            .map(i => `${i.clientWidth}x${i.clientHeight} (drawn ${i.naturalWidth}x`
                      + `${i.naturalHeight})`);
          return {scroll: root.scrollWidth, width: root.clientWidth,
                  header: header.length ? Math.max(...header) : 0, headings, squashed};
        }""")
        if state["scroll"] > state["width"]:
            problems.append(f"the page is {state['scroll']} px wide on a {state['width']} px "
                            "screen (it scrolls sideways)")
        if state["header"] > state["width"]:
            problems.append(f"the header's buttons reach {state['header']:.0f} px on a "
                            f"{state['width']} px screen")
        for heading in state["headings"]:
            problems.append(f"the heading {heading!r} runs past the screen's edge")
        for figure in state["squashed"]:
            problems.append(f"a figure is shown out of shape: {figure}")
        zh = page.evaluate("() => document.documentElement.lang").lower().startswith("zh")
        for text in page.evaluate(_PUNCTUATION_STATE, zh):
            problems.append(f"punctuation starts a line after math or code: {text!r}")
        narrow = page.evaluate(_NARROW_READING_STATE)
        for text in narrow["equations"]:
            problems.append(f"an equation does not show whole: {text}")
        for text in narrow["outputs"]:
            problems.append(f"a table output does not show whole: {text}")
        for text in narrow["rows"]:
            problems.append(f"a row of a table output wraps: {text!r}")
        for text in narrow["figures"]:
            problems.append(f"a wide figure does not keep its size: {text}")
        problems.extend(narrow["inline"])
        for text in narrow["tables"] if tables else []:
            problems.append(f"a table is wider than the column: {text}")
        return problems
    finally:
        page.close()


def follow_switch(context: BrowserContext, url: str) -> tuple[str, int, str | None]:
    """Click the language switch of the page at ``url``: (the URL it lands on, its HTTP
    status, and where the landed page's own switch leads)."""
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page.goto(url, wait_until="load")
        with page.expect_navigation(wait_until="load") as navigation:
            page.click("a.edition-switch")
        response = navigation.value
        back = page.eval_on_selector_all("a.edition-switch", "els => els.map(e => e.href)")
        return page.url, response.status if response else 0, back[0] if back else None
    finally:
        page.close()


def search(context: BrowserContext, base_url: str, term: str) -> list[str]:
    """Titles of the pages the book's search page lists for ``term``."""
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page.goto(f"{base_url}search.html?q={term}", wait_until="load")
        # Sphinx lists the results one by one and writes the summary ("Search finished, found
        # N page(s)", or "did not match", in the page's language) once the last is shown.
        page.wait_for_function(
            "() => { const s = document.querySelector('#search-results p.search-summary');"
            " return s && s.textContent.trim() !== ''; }"
        )
        return page.eval_on_selector_all(
            "#search-results li a", "els => els.map(e => e.textContent.trim())")
    finally:
        page.close()

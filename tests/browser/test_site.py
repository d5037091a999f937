"""The course's website in headless Chromium, offline: the site built by `python tools/build_site.py`
(once per session, tests/test_site.py's built_site()) served on 127.0.0.1; any request off 127.0.0.1 is
blocked and fails the test (no CDN: MathJax comes from the site).

- every page (the front page, every lesson, every docs page) renders: its title, every image loaded,
  math typeset by MathJax (no raw `$$`, `\\(` or `\\[` left in the text outside code);
- every internal link of every page resolves, #anchors included;
- the search page finds "FlashAttention";
- a solution toggle opens and shows the solution's code;
- a screenshot of lesson 12 with math and a figure on screen: test-artifacts/browser/site-lesson12.png.
"""
import functools
import http.server
import re
import threading
import urllib.parse
from pathlib import Path

import pytest

from tests.browser.driver import image_stats
from tests.browser.server import ARTIFACTS
from tests.test_site import ROOT, built_site

pytestmark = [pytest.mark.browser, pytest.mark.slow]   # the exhaustive browser tests: RUN_SLOW=1

LESSONS = sorted(p.stem for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
DOCS = sorted(p.stem for p in (ROOT / "docs").glob("*.md"))
PAGES = ["index"] + [f"lessons/{n}" for n in LESSONS] + [f"docs/{n}" for n in DOCS]
PAGE_TIMEOUT = 30_000  # ms, one page with its pictures and MathJax
SCREENSHOT = "site-lesson12.png"

MATH_DONE = """async () => {
    if (!document.querySelector('main .math')) return 'no math';  // Sphinx's math: span.math, div.math
    for (let i = 0; i < 200 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++)
        await new Promise(r => setTimeout(r, 100));
    if (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) return 'MathJax did not start';
    await MathJax.startup.promise;
    return 'typeset';
}"""
IMAGES = """async () => Promise.all(Array.from(document.querySelectorAll('main img')).map(async img => {
    img.loading = 'eager';
    try { await img.decode(); } catch (e) {}
    return {src: img.getAttribute('src'), width: img.naturalWidth, complete: img.complete};
}))"""
PROSE = """() => {  // the text a reader sees, without code, typeset math or scripts
    const main = document.querySelector('main').cloneNode(true);
    main.querySelectorAll('pre, code, mjx-container, script, style').forEach(e => e.remove());
    return main.textContent;
}"""
LINKS = """() => Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"""


@pytest.fixture(scope="module")
def site_url():
    site = built_site()
    if site.returncode:
        pytest.fail(f"`python tools/build_site.py` failed (exit {site.returncode}); its log ends with:\n"
                    f"{site.log[-3000:]}")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site.html)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class Page:
    """A page of the site in a new tab; requests that leave 127.0.0.1 are blocked and recorded."""

    def __init__(self, browser, base):
        self.base, self.blocked, self.errors = base, [], []
        self.page = browser.new_page()
        self.page.set_default_timeout(PAGE_TIMEOUT)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.route(re.compile(r"^(?!" + re.escape(base) + r"|data:|blob:)"), self._block)

    def _block(self, route):
        self.blocked.append(route.request.url)
        route.abort()

    def open(self, path):
        response = self.page.goto(self.base + path)
        assert response and response.ok, f"{path}: HTTP {response.status if response else 'no answer'}"
        self.math = self.page.evaluate(MATH_DONE)
        return self.page

    def close(self):
        self.page.close()


@pytest.fixture
def tab(browser, site_url):
    page = Page(browser, site_url)
    yield page
    page.close()
    assert not page.blocked, f"the page asked for files off 127.0.0.1 (a CDN?): {sorted(set(page.blocked))[:5]}"
    assert not page.errors, f"JavaScript errors on the page: {page.errors[:3]}"


@pytest.mark.parametrize("path", PAGES)
def test_page_renders_with_its_pictures_and_typeset_math(tab, path):
    page = tab.open(f"{path}.html")
    title = page.locator("main h1").first.inner_text()
    if path.startswith("lessons/"):
        assert title.startswith("Lesson"), f"{path}: the page's title is {title!r}"
        assert page.locator("main div.cell").count() > 0, f"{path}: no code cells on the page"
        assert page.locator("main a[href*='colab.research.google.com'][href*='/notebooks/']").count(), \
            f"{path}: no link to open the exercises in Colab"
    broken = [i["src"] for i in page.evaluate(IMAGES) if not (i["complete"] and i["width"] > 0)]
    assert not broken, f"{path}: pictures that do not load: {broken}"
    assert tab.math in ("typeset", "no math"), f"{path}: {tab.math}"
    if tab.math == "typeset":
        assert page.locator("main mjx-container").count() > 0, f"{path}: MathJax ran but typeset nothing"
    raw = re.findall(r".{0,40}(?:\$\$|\\\(|\\\[).{0,40}", page.evaluate(PROSE))
    assert not raw, f"{path}: math left as raw TeX in the text: {raw[:3]}"


def _ids(text):
    return set(re.findall(r'\bid="([^"]+)"', text))


def test_every_internal_link_resolves(tab, site_url):
    links = {}
    for path in PAGES:
        for href in tab.open(f"{path}.html").evaluate(LINKS):
            if href.startswith(site_url):
                links.setdefault(href, path)
    broken, pages = [], {}
    for href, where in sorted(links.items()):
        url, _, anchor = href.partition("#")
        if url not in pages:
            response = tab.page.request.get(url)
            pages[url] = response.text() if response.ok else None
        if pages[url] is None:
            broken.append(f"{where}: {href} (not found)")
        elif anchor and urllib.parse.unquote(anchor) not in _ids(pages[url]):
            broken.append(f"{where}: {href} (no #{anchor} on that page)")
    assert len(links) > len(PAGES), "too few links found: did the pages load?"
    assert not broken, f"{len(broken)} internal links do not resolve: " + "; ".join(broken[:10])


def test_search_finds_flashattention(tab):
    page = tab.open("search.html?q=FlashAttention")
    results = page.locator("#search-results ul.search li a")
    results.first.wait_for()
    found = results.evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert any("13_attention_at_scale" in href for href in found), f"search results: {found}"


def test_a_solution_toggle_opens(tab):
    lesson = next(n for n in LESSONS if "tag_solution" in
                  (built_site().html / "lessons" / f"{n}.html").read_text(encoding="utf-8"))
    page = tab.open(f"lessons/{lesson}.html")
    starter = page.locator("main div.cell.tag_exercise").first
    assert "NotImplementedError" in starter.inner_text()
    toggle = page.locator("main div.cell.tag_solution details").first
    code = toggle.locator("div.cell_input")
    assert toggle.get_attribute("open") is None and not code.is_visible(), "the solution shows before a click"
    assert "Show the solution" in toggle.locator("summary").inner_text()
    toggle.locator("summary").click()
    code.wait_for(state="visible")
    assert toggle.get_attribute("open") is not None
    assert "NotImplementedError" not in code.inner_text() and code.inner_text().strip()
    assert "Hide the solution" in toggle.locator("summary").inner_text()


FIGURE_WITH_MATH = """() => {  // the first figure with typeset math on screen when the figure is in the middle
    for (const img of document.querySelectorAll('main img')) {
        if (img.naturalWidth < 200) continue;  // not a badge
        img.scrollIntoView({block: 'center'});
        const inView = e => { const r = e.getBoundingClientRect();
                              return r.top >= 0 && r.bottom <= window.innerHeight && r.width > 0; };
        if (inView(img) && Array.from(document.querySelectorAll('main mjx-container')).some(inView))
            return img.getAttribute('src');
    }
    return null;
}"""


def test_screenshot_of_lesson_12_with_math_and_a_figure(tab):
    lesson = next((n for n in LESSONS if n.startswith("12_")), None)
    if lesson is None:
        pytest.skip("no lesson 12 in solutions/")
    page = tab.open(f"lessons/{lesson}.html")
    page.evaluate(IMAGES)
    figure = page.evaluate(FIGURE_WITH_MATH)
    assert figure, f"lessons/{lesson}.html: no figure with typeset math next to it"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / SCREENSHOT
    png = page.screenshot(path=str(path))
    colours, spread = image_stats(png)
    assert colours > 16 and spread > 10, f"the screenshot {path} looks blank"
    print(f"\nscreenshot of lessons/{lesson}.html (figure {Path(figure).name}): {path}")

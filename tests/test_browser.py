"""What a reader sees: every page of the built book opened in one headless Chromium.

The build (`_build/html`, shared with test_book.py, see book_build.py) is served over HTTP on
127.0.0.1 and each page of _toc.yml is visited once; everything checked on a page is collected
from that one visit, then each test below reports its check for every page at once:

- the maths is typeset (MathJax, served from the build, has put an `mjx-container` in every
  `.math` element, with no TeX error) and no raw TeX (`$$`, `\\(`, `\\[`, ...) is left in the text;
- every image in the page has loaded (`complete` with a non-zero natural size);
- the browser console shows no error, and nothing is loaded from outside the served build;
- the previous/next links of the chapter pages lead to pages of the book;
- each student notebook page's download button gives that notebook, byte for byte;
- the search page finds chapter 1 for "softmax";
- on a phone (390 px wide, light and dark mode, `PHONE`): no page is wider than the screen, every
  display equation fits or scrolls in its own box with a cue (the fade of _static/course.css),
  every figure keeps a readable width (scrolling sideways) and no reading page offers a notebook
  named like an exercise notebook, which `check` would mistake for it.

Needs Debian's `chromium` and `chromium-driver` (`make` installs them when run as root).
Without them the tests fail, saying what to install; only outside CI (CI unset) they skip.
"""
import functools
import http.server
import os
import re
import shutil
import tempfile
import threading
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

from book_build import HTML, ROOT, chapter_pages, student_notebooks, toc_files

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                  "--window-size=1280,1024"]
TIMEOUT_S = 30                       # for a page to load, MathJax to typeset, images, search
PHONE = {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True}
# A figure is drawn at 110 dpi with 10-11 pt text: shown at least this wide (or at its own width
# if narrower), its text stays about 10 px or more; squeezed to a phone's column it would be 5 px.
FIGURE_MIN_PX = 600

# Raw TeX a reader must never see: display/inline delimiters, environments, or a $...$ span
# holding a TeX command (dollarmath left unparsed).
RAW_TEX = re.compile(r"\$\$|\\\(|\\\)|\\\[|\\\]|\\begin\{|\\end\{|\$[^$\s][^$\n]{0,200}?\\[A-Za-z]+[^$\n]{0,200}?\$")

# --- in-page scripts ----------------------------------------------------------------------

WAIT_FOR_MATHJAX = """
const timeoutMs = arguments[0], done = arguments[arguments.length - 1];
const start = Date.now();
(function poll() {
  const mj = window.MathJax;
  if (mj && mj.startup && mj.startup.promise) {
    mj.startup.promise.then(() => done("typeset"), (e) => done("failed: " + e));
  } else if (document.readyState === "complete" && !document.querySelector('script[src*="mathjax"]')) {
    done("no MathJax script");
  } else if (Date.now() - start > timeoutMs) {
    done("MathJax did not start within " + timeoutMs + " ms");
  } else {
    setTimeout(poll, 50);
  }
})();
"""

WAIT_FOR_IMAGES = """
const timeoutMs = arguments[0], done = arguments[arguments.length - 1];
const root = document.querySelector("article.bd-article") || document.querySelector("main") || document.body;
const images = Array.from(root.querySelectorAll("img"));
const pending = images.filter((img) => !img.complete).map((img) => new Promise((resolve) => {
  img.addEventListener("load", resolve);
  img.addEventListener("error", resolve);
  img.loading = "eager";
  img.scrollIntoView();
}));
const timeout = new Promise((resolve) => setTimeout(resolve, timeoutMs));
Promise.race([Promise.all(pending), timeout]).then(() => done(images.map((img) => ({
  src: img.getAttribute("src").slice(0, 120), complete: img.complete,
  width: img.naturalWidth, height: img.naturalHeight}))));
"""

COLLECT = """
const skip = "pre, code, kbd, samp, script, style, textarea, noscript, template, mjx-container, .highlight";
const texts = [];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  const parent = node.parentElement;
  if (parent && !parent.closest(skip) && node.nodeValue.trim()) texts.push(node.nodeValue);
}
const maths = Array.from(document.querySelectorAll(".math"));
const mathjax = document.querySelector('script[src*="mathjax"]');
const link = (selector) => { const a = document.querySelector(selector); return a ? a.href : null; };
const header = document.querySelector(".bd-header-article, .article-header-buttons") || document;
return {
  texts: texts,
  maths: maths.length,
  untypeset: maths.filter((m) => !m.querySelector("mjx-container"))
                  .map((m) => m.textContent.trim().slice(0, 80)),
  containers: document.querySelectorAll("mjx-container").length,
  tex_errors: Array.from(document.querySelectorAll("mjx-merror"))
                   .map((e) => e.getAttribute("data-mjx-error") || e.textContent.slice(0, 80)),
  mathjax_src: mathjax ? mathjax.src : null,
  resources: performance.getEntriesByType("resource").map((e) => e.name),
  prev: link(".prev-next-area a.left-prev"),
  next: link(".prev-next-area a.right-next"),
  downloads: Array.from(header.querySelectorAll("a"))
                  .filter((a) => a.textContent.trim() === ".ipynb").map((a) => a.href),
};
"""

ON_A_PHONE = """
const assignments = arguments[0], minFigure = arguments[1];
const root = document.documentElement, width = root.clientWidth;
const name = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
  (typeof e.className === "string" && e.className.trim() ? "." + e.className.trim().split(/\\s+/).join(".") : "");
const what = (e) => name(e) + " " + JSON.stringify((e.textContent || "").trim().slice(0, 60));
const clipped = (e) => {   // inside a box that scrolls or hides what sticks out of it
  for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
    if (getComputedStyle(a).overflowX !== "visible") return true;
  }
  return false;
};
const found = {viewport: window.innerWidth, width: [], maths: [], figures: [], downloads: []};
if (root.scrollWidth > width) {
  const out = Array.from(document.body.querySelectorAll("*")).filter((e) =>
    e.getBoundingClientRect().right > width + 1 && !clipped(e) &&
    !(e.parentElement.getBoundingClientRect().right > width + 1));
  found.width.push(`the page is ${root.scrollWidth} px wide on a ${width} px screen; sticking out: ` +
                   out.slice(0, 4).map(what).join(", "));
}
for (const m of document.querySelectorAll('mjx-container[display="true"]')) {
  const box = m.getBoundingClientRect(), style = getComputedStyle(m);
  const inside = box.left >= -1 && box.right <= width + 1;
  if (m.scrollWidth <= m.clientWidth + 1 && inside) continue;          // it fits
  if (!inside) {
    found.maths.push(`a display equation ${Math.round(box.width)} px wide sticks out of the screen: ${what(m)}`);
  } else if (!["auto", "scroll"].includes(style.overflowX)) {
    found.maths.push(`a display equation is cut (overflow-x: ${style.overflowX}): ${what(m)}`);
  } else if (!style.backgroundImage.includes("gradient")) {
    found.maths.push(`a display equation scrolls without a cue (a phone hides scrollbars): ${what(m)}`);
  }
}
for (const img of document.querySelectorAll(".cell_output img")) {
  const shown = img.getBoundingClientRect().width, natural = img.naturalWidth;
  if (natural && shown + 1 < Math.min(natural, minFigure)) {
    found.figures.push(`a figure ${natural} px wide is shown ${Math.round(shown)} px wide: ${img.getAttribute("src").slice(0, 80)}`);
  }
}
for (const menu of document.querySelectorAll(".dropdown-download-buttons .dropdown-menu")) {
  menu.classList.add("show");                  // open, as a tap on the download button does
  for (const a of menu.querySelectorAll("a[href]")) {
    const file = decodeURIComponent(new URL(a.href).pathname);
    const named = assignments.find((n) => file.endsWith("/" + n + ".ipynb"));
    if (named && a.checkVisibility() && !file.endsWith(`/_sources/notebooks/${named}/${named}.ipynb`)) {
      found.downloads.push(`the download menu offers ${file}, named like the exercise notebook ${named}.ipynb`);
    }
  }
  menu.classList.remove("show");
}
return found;
"""

WAIT_FOR_SEARCH = """
const results = document.querySelectorAll("#search-results ul.search li a");
const summary = document.querySelector("#search-results .search-summary");
const text = summary ? summary.textContent : "";
if (results.length || /finished|did not match/i.test(text)) {
  return {links: Array.from(results).map((a) => a.href), summary: text};
}
return null;
"""


# --- the server and the browser -----------------------------------------------------------

class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


class Served:
    """`directory` served over HTTP on a free port of 127.0.0.1, in a thread."""

    def __init__(self, directory):
        handler = functools.partial(QuietHandler, directory=str(directory))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def chromium_or_skip():
    """Fail (or, outside CI, skip) saying what to install when chromium is missing."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        message = (f"the browser test needs {', '.join(missing)}: install them with "
                   "`apt-get install chromium chromium-driver` (`make` does it when run as root)")
        if "CI" not in os.environ:
            pytest.skip(message + "; skipped because CI is unset")
        pytest.fail(message, pytrace=False)


@pytest.fixture(scope="module")
def browser():
    chromium_or_skip()
    profile = tempfile.mkdtemp(prefix="book-browser-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS + [f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path: selenium never runs Selenium Manager, so never downloads a driver.
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        driver.set_page_load_timeout(TIMEOUT_S)
        driver.set_script_timeout(TIMEOUT_S + 5)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def server(build):
    if build["returncode"] != 0:
        pytest.fail("the book did not build (see test_book.py::test_build_succeeds):\n"
                    + build["log"][-3000:], pytrace=False)
    served = Served(HTML)
    yield served
    served.close()


# --- one visit per page -------------------------------------------------------------------

def console_errors(driver):
    return [entry.get("message", "") for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def local_path(url, base):
    """The file of the served directory a URL of the server names, or None for another site."""
    if not url.startswith(base):
        return None
    return urllib.parse.unquote(urllib.parse.urlsplit(url).path).lstrip("/")


def inspect(driver, url, base):
    """Open a page and collect what every check needs; returns {check: [problems]} + facts."""
    driver.get_log("browser")                     # drop what an earlier page left behind
    driver.get(url)
    # get() waits for the page to load, yet once in some 60 visits the next script still saw a
    # document without the page's scripts: wait until this very page is complete.
    WebDriverWait(driver, TIMEOUT_S, poll_frequency=0.05).until(lambda d: d.execute_script(
        "return document.readyState === 'complete' && document.URL === arguments[0]", url))
    report = {"maths": [], "figures": [], "console": [], "offline": []}
    state = driver.execute_async_script(WAIT_FOR_MATHJAX, TIMEOUT_S * 1000)
    images = driver.execute_async_script(WAIT_FOR_IMAGES, TIMEOUT_S * 1000)
    page = driver.execute_script(COLLECT)

    if page["maths"] or page["mathjax_src"]:
        if state != "typeset":
            report["maths"].append(f"MathJax: {state}")
        source = local_path(page["mathjax_src"] or "", base)
        if page["mathjax_src"] and not (source or "").startswith("_static/mathjax/"):
            report["maths"].append(f"MathJax is not served from the build: {page['mathjax_src']}")
    if page["untypeset"]:
        report["maths"].append(f"{len(page['untypeset'])} of {page['maths']} maths elements not "
                               f"typeset, e.g. {page['untypeset'][:3]}")
    for error in page["tex_errors"]:
        report["maths"].append(f"TeX error: {error}")
    text = "\n".join(page["texts"])
    raw = [text[max(0, m.start() - 30):m.end() + 30].replace("\n", " ") for m in RAW_TEX.finditer(text)]
    if raw:
        report["maths"].append(f"raw TeX in the text {len(raw)} time(s), e.g. " + " | ".join(raw[:3]))

    for image in images:
        if not (image["complete"] and image["width"] > 0 and image["height"] > 0):
            report["figures"].append(f"image not loaded: {image['src']} "
                                     f"(complete={image['complete']}, {image['width']}x{image['height']})")

    report["offline"] = [f"loaded from outside the build: {r}" for r in page["resources"]
                         if not r.startswith(base) and not r.startswith(("data:", "blob:"))]
    report["console"] = console_errors(driver)
    report.update(prev=page["prev"], next=page["next"], downloads=page["downloads"],
                  math_count=page["maths"], containers=page["containers"], images=len(images))
    return report


@pytest.fixture(scope="module")
def visits(browser, server):
    """{page name: report} for every page of _toc.yml, each opened once."""
    return {name: inspect(browser, server.base + f"{name}.html", server.base) for name in toc_files()}


def problems(visits, check):
    return [f"{name}.html: {problem}" for name, report in visits.items() for problem in report[check]]


# --- the checks ---------------------------------------------------------------------------

def test_every_page_is_visited(visits):
    assert list(visits) == toc_files()
    assert any(report["math_count"] for report in visits.values()), "no page of the book has maths"


def test_maths_is_typeset(visits):
    found = problems(visits, "maths")
    assert not found, "maths a reader sees untypeset:\n" + "\n".join(found)


def test_figures_load(visits):
    for name in chapter_pages():
        assert visits[name]["images"] >= 2, f"{name}.html shows {visits[name]['images']} image(s)"
    found = problems(visits, "figures")
    assert not found, "images that did not load:\n" + "\n".join(found)


def test_no_console_errors(visits, search):
    found = problems(visits, "console") + [f"search.html: {e}" for e in search["console"]]
    assert not found, "errors in the browser console:\n" + "\n".join(found)


def test_nothing_is_loaded_from_elsewhere(visits):
    found = problems(visits, "offline")
    assert not found, "\n".join(found)


def test_chapters_have_previous_and_next_links(visits, server):
    pages = {f"{name}.html" for name in toc_files()}
    found = []
    for name, report in visits.items():
        for side in ("prev", "next"):
            href = report[side]
            if href is None:
                if name in chapter_pages():
                    found.append(f"{name}.html: no {side} link")
                continue
            target = local_path(href, server.base)
            if target is None or not (HTML / target).is_file():
                found.append(f"{name}.html: the {side} link {href} leads to no page of the build")
            elif target not in pages or target == f"{name}.html":
                found.append(f"{name}.html: the {side} link leads to {target}, not another page of the book")
    assert not found, "\n".join(found)


def test_download_button_gives_the_notebook(visits):
    notebooks = student_notebooks()
    assert notebooks, "the TOC lists no student notebook"
    found = []
    for name in notebooks:
        hrefs = visits[name]["downloads"]
        if not hrefs:
            found.append(f"{name}.html: no .ipynb item in the header's download button")
        expected = (ROOT / f"{name}.ipynb").read_bytes()
        for href in hrefs:
            with urllib.request.urlopen(href, timeout=TIMEOUT_S) as response:
                data = response.read()
            if data != expected:
                found.append(f"{name}.html: the download {href} is not {name}.ipynb "
                             f"({len(data)} bytes, expected {len(expected)})")
    assert not found, "\n".join(found)


def inspect_on_phone(driver, url, scheme):
    """Open a page as a phone in a light or dark scheme; {check: [problems]} for the phone's checks."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", PHONE)
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                           {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
    try:
        driver.get(url)
        WebDriverWait(driver, TIMEOUT_S, poll_frequency=0.05).until(lambda d: d.execute_script(
            "return document.readyState === 'complete' && document.URL === arguments[0]", url))
        driver.execute_async_script(WAIT_FOR_MATHJAX, TIMEOUT_S * 1000)    # equations take their width
        driver.execute_async_script(WAIT_FOR_IMAGES, TIMEOUT_S * 1000)     # figures take theirs
        found = driver.execute_script(ON_A_PHONE, sorted(p.name for p in (ROOT / "notebooks").iterdir()
                                                          if p.is_dir()), FIGURE_MIN_PX)
        theme = driver.execute_script("return document.documentElement.dataset.theme")
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    if found["viewport"] != PHONE["width"]:
        found["width"].append(f"laid out {found['viewport']} px wide on a {PHONE['width']} px screen: the phone "
                              "zooms out (a page without a viewport tag, or wider than the screen)")
    if theme != scheme:
        found["width"].append(f"shown in the {theme} theme, not the {scheme} one the phone asks for")
    return found


@pytest.fixture(scope="module", params=["light", "dark"])
def phone_visits(request, browser, server, visits):
    """{page name: the phone's report} for every page of _toc.yml, once in each colour scheme."""
    return {name: inspect_on_phone(browser, server.base + f"{name}.html", request.param)
            for name in toc_files()}


def test_no_page_is_wider_than_a_phone(phone_visits):
    found = problems(phone_visits, "width")
    assert not found, f"pages that scroll sideways on a {PHONE['width']} px phone:\n" + "\n".join(found)


def test_wide_equations_scroll_visibly_on_a_phone(phone_visits):
    found = problems(phone_visits, "maths")
    assert not found, "display equations cut on a phone:\n" + "\n".join(found)


def test_figures_stay_readable_on_a_phone(phone_visits):
    found = problems(phone_visits, "figures")
    assert not found, (f"figures squeezed on a phone (below {FIGURE_MIN_PX} px their text is "
                       "too small to read):\n" + "\n".join(found))


def test_no_reading_page_offers_a_notebook_named_like_an_exercise(phone_visits, visits):
    found = problems(phone_visits, "downloads")
    assert not found, ("`check` mistakes such a notebook for the exercises: the reading pages' "
                       ".ipynb item is hidden by _static/course.css\n" + "\n".join(found))
    for name in student_notebooks():          # while the exercise pages still offer theirs
        assert visits[name]["downloads"], f"{name}.html offers no .ipynb"


@pytest.fixture(scope="module")
def search(browser, server, visits):
    browser.get_log("browser")
    browser.get(server.base + "search.html?q=softmax")
    try:
        result = WebDriverWait(browser, TIMEOUT_S, poll_frequency=0.1).until(
            lambda d: d.execute_script(WAIT_FOR_SEARCH))
    except TimeoutException:
        result = {"links": None, "summary": "the search did not finish within "
                                            f"{TIMEOUT_S} s"}
    result["console"] = console_errors(browser)
    result["pages"] = [local_path(href, server.base) for href in result["links"] or []]
    return result


def test_search_finds_chapter_1_for_softmax(search):
    assert search["links"] is not None, search["summary"]
    assert "book/01-weights.html" in search["pages"], \
        f"search.html?q=softmax: {search['summary']!r}; results: {search['pages']}"


# --- the checks themselves catch a broken page --------------------------------------------

def broken_copies(directory):
    """Copies of chapter 1's page, each broken in one way, beside links to the rest of the build."""
    for entry in HTML.iterdir():
        if entry.name != "book":
            (directory / entry.name).symlink_to(entry)
    (directory / "book").mkdir()
    page = (HTML / "book" / "01-weights.html").read_text(encoding="utf-8")
    no_mathjax = re.sub(r'<script[^>]*src="[^"]*mathjax[^"]*"[^>]*>\s*</script>', "", page)
    assert no_mathjax != page
    missing_image, count = re.subn(r'(<img[^>]+src=")[^"]+(")', r"\1../_images/no-such-figure.png\2",
                                   page, count=1)
    assert count == 1
    console_error = page.replace("</head>", '<script>console.error("a planted error")</script></head>', 1)
    # What a phone would see without the course's styles: chapter 3 (long inline code, wide
    # equations, two-panel figures, a reading page's download menu).
    qkv = (HTML / "book" / "03-qkv.html").read_text(encoding="utf-8")
    no_course_css = re.sub(r'<link[^>]+href="[^"]*_static/course\.css[^"]*"[^>]*>', "", qkv)
    assert no_course_css != qkv
    copies = {"no-mathjax": no_mathjax, "missing-image": missing_image, "console-error": console_error,
              "no-course-css": no_course_css}
    for name, text in copies.items():
        (directory / "book" / f"{name}.html").write_text(text, encoding="utf-8")
    return list(copies)


def test_the_checks_catch_a_broken_page(browser, server, visits, tmp_path):
    broken_copies(tmp_path)
    served = Served(tmp_path)
    try:
        reports = {name: inspect(browser, served.base + f"book/{name}.html", served.base)
                   for name in ("no-mathjax", "missing-image", "console-error")}
    finally:
        served.close()
    assert any("not typeset" in p for p in reports["no-mathjax"]["maths"]), reports["no-mathjax"]
    assert any("raw TeX" in p for p in reports["no-mathjax"]["maths"]), reports["no-mathjax"]
    assert any("no-such-figure.png" in p for p in reports["missing-image"]["figures"]), reports["missing-image"]
    assert any("404" in p for p in reports["missing-image"]["console"]), reports["missing-image"]
    assert any("a planted error" in p for p in reports["console-error"]["console"]), reports["console-error"]
    for name, report in reports.items():       # each breaks only what it was meant to break
        assert not report["offline"], (name, report["offline"])


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_phone_checks_catch_a_page_without_the_course_styles(browser, server, visits, tmp_path, scheme):
    broken_copies(tmp_path)
    served = Served(tmp_path)
    try:
        broken = inspect_on_phone(browser, served.base + "book/no-course-css.html", scheme)
    finally:
        served.close()
    intact = inspect_on_phone(browser, server.base + "book/03-qkv.html", scheme)
    assert not any(intact[check] for check in ("width", "maths", "figures", "downloads")), intact
    assert any("px wide on a 390 px screen" in p for p in broken["width"]), broken
    assert any("without a cue" in p for p in broken["maths"]), broken
    assert any("a figure" in p for p in broken["figures"]), broken
    assert any("03-qkv.ipynb, named like" in p for p in broken["downloads"]), broken

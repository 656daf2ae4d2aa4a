"""Open the built site in a real headless browser and check every page.

For each page of `site/` (or the folder given) served on localhost, in Debian's Chromium
driven through Selenium: the navigation is there, every image loaded (and has a size), code
blocks are highlighted, no request left localhost (no web fonts or scripts from a CDN), the
browser logged no error, and every link to a page of the site reaches a page that has the
anchor it names. Takes screenshots of the home page, one guide and one reference page.

Usage: python docs/check_site.py [SITE_DIR] [--screenshots DIR]
(make docs-check; needs `pip install -e '.[docs]'` and `apt-get install chromium chromium-driver`)
Exits 1 and lists the problems when there are any.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

SCREENSHOTS = {"home": "index.html", "guide": "guides/algorithms.html",
               "reference": "reference/config.html"}  # fmt: skip
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


class _Ids(HTMLParser):
    """The ids a page's HTML defines (the anchors a link may name)."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids.update(v for k, v in attrs if k in ("id", "name") and v)


@functools.cache
def page_ids(path: Path) -> set[str]:
    parser = _Ids()
    parser.feed(path.read_text())
    return parser.ids


def serve(root: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A quiet HTTP server of `root` on a free localhost port, in a daemon thread."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(root))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-sync",
                 "--disable-component-update", "--window-size=1280,900"):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


def target_file(root: Path, base: str, href: str) -> tuple[Path, str] | None:
    """The HTML file and anchor a site link points at; None for a link off the site."""
    url, anchor = urldefrag(href)
    parsed = urlparse(url)
    if not url.startswith(base):
        return None
    path = root / unquote(parsed.path.lstrip("/"))
    if path.is_dir() or parsed.path.endswith("/"):
        path = path / "index.html"
    return path, anchor


def check_page(driver, root: Path, base: str, page: str) -> list[str]:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(base + page)
    where = page
    problems = []
    nav = (By.CSS_SELECTOR, "nav.md-nav--primary a.md-nav__link")
    try:  # the page is complete when its navigation is there
        WebDriverWait(driver, 10).until(lambda d: len(d.find_elements(*nav)) >= 10)
    except TimeoutException:
        pass  # reported below
    found = driver.execute_script(
        """
        const images = [...document.images].map(i => [i.src, i.complete && i.naturalWidth > 0]);
        const svgs = document.querySelectorAll('article svg[role="img"]').length;
        const nav = document.querySelectorAll('nav.md-nav--primary a.md-nav__link').length;
        // code blocks of a language (not text, console output or indented plain blocks)
        const blocks = [...document.querySelectorAll('article div.highlight')].filter(
            b => [...b.classList].some(c => c.startsWith('language-')
                 && !['language-text', 'language-console'].includes(c)));
        const plain = blocks.filter(b => !b.querySelector('pre code span[class]')).length;
        const links = [...document.querySelectorAll('a[href]')].map(a => a.href);
        const requests = performance.getEntriesByType('resource').map(r => r.name);
        return {images, svgs, nav, blocks: blocks.length, plain, links, requests,
                title: document.title};
        """
    )
    if found["nav"] < 10:
        problems.append(f"{where}: the navigation has {found['nav']} links")
    for src, loaded in found["images"]:
        if not loaded:
            problems.append(f"{where}: image {src} did not load")
    if found["plain"]:
        problems.append(
            f"{where}: {found['plain']} of {found['blocks']} code blocks not highlighted"
        )
    for request in found["requests"]:
        if not request.startswith(base):
            problems.append(f"{where}: a request left localhost: {request}")
    for entry in driver.get_log("browser"):
        if entry["level"] == "SEVERE":
            problems.append(f"{where}: browser error: {entry['message']}")
    for href in found["links"]:
        target = target_file(root, base, href)
        if target is None:
            continue
        path, anchor = target
        if not path.is_file():
            problems.append(f"{where}: broken link {href}")
        elif path.suffix == ".html" and anchor and unquote(anchor) not in page_ids(path):
            problems.append(f"{where}: link {href} names a missing anchor")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", type=Path, default=Path("site"))
    parser.add_argument("--screenshots", type=Path, default=Path("site-screenshots"))
    args = parser.parse_args()
    root = args.site.resolve()
    if not (root / "index.html").is_file():
        print(f"no built site in {root}: run `make docs` first", file=sys.stderr)
        return 2
    pages = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.html")
        if p.name != "404.html" and not p.relative_to(root).parts[0].startswith("assets")
    )
    server, base = serve(root)
    driver = browser()
    problems: list[str] = []
    try:
        for page in pages:
            problems += check_page(driver, root, base, page)
        args.screenshots.mkdir(parents=True, exist_ok=True)
        for name, page in SCREENSHOTS.items():
            driver.get(base + page)
            driver.save_screenshot(str(args.screenshots / f"{name}.png"))
    finally:
        driver.quit()
        server.shutdown()
    for problem in problems:
        print(problem)
    print(f"{len(pages)} pages checked in Chromium, {len(problems)} problems; screenshots of "
          f"{', '.join(SCREENSHOTS)} in {args.screenshots}")  # fmt: skip
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

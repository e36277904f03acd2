"""Screenshots of every page of the built site, for a person to look at (`make screenshots`).

The browser tests (`make test`) keep a first-screen screenshot of every page they load,
in both themes, under _build/screenshots/. This command adds what a review needs and the
tests do not: each page of every edition (the book, the student edition, in English and
in Korean) whole, at 1366x900 in light mode and on a 390x844 phone, and its first screen
in dark mode, under _build/screenshots/full/EDITION/.
Build the site first (`make pages`, which `make screenshots` does).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import CHROMIUM_ARGS, chromium_executable, serve_directory  # noqa: E402
from tests.site.pages import (  # noqa: E402
    HTML,
    PAGES,
    PHONE,
    PUBLISHED,
    STUDENT,
    open_page,
    wait_for_mathjax,
)

OUT = ROOT / "_build" / "screenshots" / "full"


def shoot(browser, site: str, edition: str, doc: str) -> None:
    name = doc.replace("/", "__")
    target = OUT / edition
    target.mkdir(parents=True, exist_ok=True)
    for scheme in ("light", "dark"):
        context, page, _ = open_page(browser, site, doc, color_scheme=scheme)
        try:
            # pictures load as they come near the screen: load them all for a whole page
            page.evaluate(
                "() => document.querySelectorAll('img[loading=lazy]')"
                ".forEach(i => { i.loading = 'eager'; })"
            )
            wait_for_mathjax(page)
            page.wait_for_load_state("networkidle")
            if scheme == "light":
                page.screenshot(path=target / f"{name}.png", full_page=True)
                page.set_viewport_size(PHONE)
                page.wait_for_timeout(500)  # reflow
                page.screenshot(path=target / f"{name}__phone.png", full_page=True)
            else:
                page.screenshot(path=target / f"{name}__dark.png")
        finally:
            context.close()


def main(argv: list[str]) -> int:
    """python scripts/screenshots.py [EDITION ...] [--page DOC ...]: every edition (book,
    student, ko, ko_student) and every page by default."""
    import argparse

    from playwright.sync_api import sync_playwright

    editions = {"book": "", "student": "/student", "ko": "/ko", "ko_student": "/ko/student"}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("editions", nargs="*", choices=list(editions))
    parser.add_argument("--page", action="append", choices=PAGES, help="only these pages")
    args = parser.parse_args(argv)
    if not (HTML / "index.html").exists() or not (STUDENT / "index.html").exists():
        print("build the site first: make pages")
        return 2
    with serve_directory(PUBLISHED) as published, sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium_executable(), headless=True, args=CHROMIUM_ARGS
        )
        for edition in args.editions or list(editions):
            for doc in args.page or PAGES:
                shoot(browser, f"{published}{editions[edition]}", edition, doc)
                print(f"{edition}: {doc}", flush=True)
        browser.close()
    print(f"Screenshots: {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The static explorer in a real browser: explorer.js swaps frames as a reader moves controls.

Serves a small page (an explorer's text/html output, book/_static/explorer.js and
explorer.css) from 127.0.0.1 and drives Debian's Chromium through playwright.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import numpy as np
import pytest
from matplotlib.figure import Figure

from helpers.widgets import Explorer, Param
from tests.conftest import ROOT, serve_directory

pytestmark = pytest.mark.browser

STATIC = ROOT / "book" / "_static"


LOGITS = np.array([2.0, 1.0, 0.5, 0.0, -1.0])


def caption(tau: float, scaled: bool) -> str:
    z = LOGITS / 4 if scaled else LOGITS
    p = np.exp((z - z.max()) / tau)
    return f"τ = {tau:g}, scaling {'on' if scaled else 'off'}: max {p.max() / p.sum():.2f}"


def two_parameter_explorer() -> Explorer:
    """Softmax over τ (a range input) with scaling of the logits on/off (radio buttons)."""
    fig = Figure(figsize=(3.2, 1.6))
    ax = fig.add_subplot()
    bars = ax.bar(range(5), np.zeros(5))
    ax.set_ylim(0, 1)

    def update(tau, scaled):
        z = LOGITS / 4 if scaled else LOGITS
        p = np.exp((z - z.max()) / tau)
        p /= p.sum()
        for bar, h in zip(bars, p, strict=True):
            bar.set_height(h)
        return caption(tau, scaled)

    params = [
        Param("tau", [0.25, 0.5, 1.0, 2.0, 4.0], label="τ", value=1.0),
        Param("scaled", [False, True], labels=["off", "on"], label="scaling"),
    ]
    return Explorer(fig, update, params, dpi=60, description="Softmax weights")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("explorer_site")
    shutil.copy(STATIC / "explorer.js", root / "explorer.js")
    shutil.copy(STATIC / "explorer.css", root / "explorer.css")
    body = two_parameter_explorer().static_html()
    (root / "index.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>explorer</title>"
        "<link rel='icon' href='data:,'><link rel='stylesheet' href='explorer.css'>"
        f"<script src='explorer.js'></script></head><body>{body}</body></html>",
        encoding="utf-8",
    )
    (root / "nojs.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><link rel='icon' href='data:,'>"
        f"</head><body>{body}</body></html>",
        encoding="utf-8",
    )

    with serve_directory(root) as url:
        yield url


@pytest.fixture
def page(browser):
    page = browser.new_page()
    page.errors = []
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    yield page
    page.close()


def state(page) -> dict:
    return page.evaluate(
        """() => {
            const root = document.querySelector('.explorer');
            const img = root.querySelector('img.explorer-image');
            return {
                src: img.getAttribute('src'),
                alt: img.alt,
                output: root.querySelector('output').textContent,
                caption: root.querySelector('.explorer-caption').textContent,
                valuetext: root.querySelector('input[type=range]').getAttribute('aria-valuetext'),
                ready: root.classList.contains('explorer-ready'),
                disabled: root.querySelectorAll(':disabled').length,
            };
        }"""
    )


def test_moving_the_range_swaps_the_frame_and_the_label(site, page):
    page.goto(f"{site}/index.html")
    first = state(page)
    assert first["ready"] and first["disabled"] == 0
    assert first["output"] == first["valuetext"] == "1"
    assert first["alt"] == first["caption"] == caption(1.0, False)

    page.locator(".explorer input[type=range]").fill("4")
    moved = state(page)
    assert moved["src"] != first["src"] and moved["src"].startswith("data:image/png;base64,")
    assert moved["output"] == moved["valuetext"] == "4"
    assert moved["caption"] == moved["alt"] == caption(4.0, False)

    range_input = page.locator(".explorer input[type=range]")
    range_input.focus()
    page.keyboard.press("Home")
    assert state(page)["output"] == "0.25"
    page.keyboard.press("ArrowRight")
    assert state(page)["output"] == "0.5"
    assert page.errors == []


def test_radio_buttons_swap_the_frame(site, page):
    page.goto(f"{site}/index.html")
    first = state(page)
    page.locator(".explorer").get_by_label("on", exact=True).check()
    scaled = state(page)
    assert scaled["src"] != first["src"]
    assert scaled["caption"] == caption(1.0, True)
    page.locator(".explorer").get_by_label("off", exact=True).check()
    assert state(page)["src"] == first["src"]
    assert page.errors == []


def test_without_javascript_the_initial_frame_shows_and_controls_are_disabled(site, page):
    page.goto(f"{site}/nojs.html")
    first = state(page)
    assert not first["ready"] and first["disabled"] == 3  # the range and two radios
    size = page.evaluate(
        "(i => [i.naturalWidth, i.width])(document.querySelector('img.explorer-image'))"
    )
    assert size == [384, 192]  # 3.2 in at 2 × 60 dpi (the data URI decoded), shown at 60 dpi
    assert first["output"] == "1"
    assert page.errors == []

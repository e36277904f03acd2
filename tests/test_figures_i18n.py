"""Words of figures in Korean (helpers/figures.py, helpers/locales/figures.ko.po).

With ``helpers.set_language("ko")`` a figure's titles, axis labels, legend entries and
annotations that the figure catalogue knows are drawn in Korean, in NanumGothic, at draw
time (the notebooks' code is unchanged), deterministically; English draws as before.
"""

from __future__ import annotations

import sys
import warnings

import pytest
from matplotlib.figure import Figure

import helpers
from helpers import figures
from helpers.figures import figure_png, recording_font_sizes
from helpers.i18n import figure_text
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import helpers_i18n

TEMPLATE_TEXT = "τ = 0.5: entropy 1.20397 nats (max log 5 = 1.60944)"


@pytest.fixture
def korean():
    helpers.set_language("ko")
    yield
    helpers.set_language("en")


def chapter_1_figure() -> Figure:
    """Chapter 1's words: a title, labels with mathematics, a legend, an f-string title."""
    fig = Figure(figsize=(4, 2.5), dpi=100)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], label="step")
    ax.plot([0, 1], [1, 0], label="max(x, 0)")
    ax.set_title("smooth argmax")
    ax.set_xlabel("temperature $\\tau$")
    ax.set_ylabel("entropy $H$ (nats)")
    ax.legend()
    ax.text(0.1, 0.5, TEMPLATE_TEXT, fontsize=8)
    return fig


def test_every_text_of_every_figure_has_a_korean_translation():
    assert helpers_i18n.figure_problems("ko") == []


def test_a_template_keeps_the_values_as_drawn():
    assert (
        figure_text(TEMPLATE_TEXT, "ko") == "τ = 0.5: 엔트로피 1.20397 nat (최대 log 5 = 1.60944)"
    )
    assert figure_text("temperature $\\tau$", "ko") == "온도 $\\tau$"
    assert figure_text("a text no figure draws", "ko") == "a text no figure draws"
    # Korean puts the whole before the part: the translation shows the values reordered
    assert figure_text("weights: 3 of 4 allowed", "ko") == "가중치: 4개 중 3개 허용"
    assert helpers_i18n._values("가중치: {1}개 중 {0}개 허용") == helpers_i18n._values("{} of {}")
    assert helpers_i18n._values("{0}개 중 {0}개") != helpers_i18n._values("{} of {}")
    assert figure_text(TEMPLATE_TEXT, "en") == TEMPLATE_TEXT


def test_a_korean_figure_is_drawn_in_a_korean_font_the_same_bytes_every_time(korean):
    fig = chapter_1_figure()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph ... missing from font(s)" would raise
        first, _ = figure_png(fig)
        again, _ = figure_png(chapter_1_figure())
    assert first == again
    helpers.set_language("en")
    english, _ = figure_png(chapter_1_figure())
    assert english != first
    ax = fig.axes[0]  # the figure itself is left in English
    assert ax.get_title() == "smooth argmax"
    assert ax.get_xlabel() == "temperature $\\tau$"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["step", "max(x, 0)"]
    assert figures.korean_font() == "NanumGothic"


def test_texts_drawn_outside_figure_png_are_translated_too(korean):
    """The explorers draw their frames themselves, with recording_font_sizes."""
    import io

    def drawn(language):
        helpers.set_language(language)
        out = io.BytesIO()
        with recording_font_sizes():
            chapter_1_figure().savefig(out, format="png", metadata={"Software": None})
        return out.getvalue()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert drawn("ko") != drawn("en")


def test_an_explorer_shown_again_after_a_language_switch_draws_that_language(korean):
    """An explorer keeps its static view once made, per language: shown in English, then in
    Korean in the same kernel (helpers.set_language), then in English again, it shows
    English frames and hint, Korean ones, and the first English view again."""
    from helpers.widgets import RUN_HINT, RUN_HINTS, Explorer, Param

    fig = chapter_1_figure()
    line = fig.axes[0].lines[0]

    def update(t):
        line.set_ydata(line.get_ydata() * t)

    explorer = Explorer(fig, update, [Param("t", [1.0, 2.0])], dpi=40)

    def shown(language):
        helpers.set_language(language)
        return explorer._render_static()[0], explorer.static_html()

    english_frames, english = shown("en")
    korean_frames, korean_view = shown("ko")
    assert korean_frames != english_frames
    assert RUN_HINT in english and RUN_HINTS["ko"] in korean_view and RUN_HINT not in korean_view
    assert shown("en") == (english_frames, english)


def test_without_the_korean_font_a_figure_stays_english_and_says_why(korean, monkeypatch):
    monkeypatch.setattr(figures, "korean_font", lambda: None)
    figures._warn_no_font.cache_clear()
    with pytest.warns(UserWarning, match="pip install koreanize-matplotlib"):
        png, _ = figure_png(chapter_1_figure())
    helpers.set_language("en")
    assert png == figure_png(chapter_1_figure())[0]

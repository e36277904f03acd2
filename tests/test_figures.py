"""Tests of helpers.figures, and of every figure the notebooks store.

Every figure a reader sees (a PNG output, or a frame of an explorer) must carry the
record of its smallest font size and its width in inches: the browser tests compute
from it how tall that text is as shown (tests/site), so a figure without it could not be
measured. The tests here check that each figure of every chapter and edition carries
it, at twice the resolution it is shown at.
"""

from __future__ import annotations

import base64
import io
import struct
from pathlib import Path

import nbformat
import numpy as np
import pytest
from IPython.core.formatters import DisplayFormatter
from matplotlib.figure import Figure
from PIL import Image

from helpers.figures import (
    FIGURE_KEY,
    MIN_TEXT_PX,
    PIXEL_RATIO,
    figure_png,
    figure_record,
    recording_font_sizes,
    text_px,
    use_book_figures,
    with_figure_record,
)
from tests.figure_outputs import COLUMN_PX, figure_outputs

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EDITIONS = sorted((ROOT / "editions").glob("*/[0-9][0-9]_*.ipynb"))


def _figure(label_pt: float = 9.0, width: float = 4.0) -> Figure:
    fig = Figure(figsize=(width, 2.0), dpi=100)
    ax = fig.add_subplot()
    ax.plot(np.arange(5), np.arange(5) ** 2, label="squares")
    ax.set_xlabel("key", fontsize=label_pt)
    ax.tick_params(labelsize=10)
    return fig


def _png_size(png: bytes) -> tuple[int, int]:
    return struct.unpack(">II", png[16:24])


# ------------------------------------------------------------------ helpers.figures


def test_figure_png_is_twice_as_sharp_and_shown_at_its_natural_width():
    png, metadata = figure_png(_figure())
    width, height = _png_size(png)
    record = figure_record(png)
    assert record["dpi"] == 100 * PIXEL_RATIO and record["font_pt"] == 9.0
    assert record["width_in"] == pytest.approx(width / 200)
    assert metadata == {"width": round(width / 2)}  # no height: the page may narrow it
    assert 3.5 < record["width_in"] < 4.2 and height > 300  # cropped to what is drawn


def test_figure_png_is_byte_deterministic_and_has_no_software_version():
    a, _ = figure_png(_figure())
    b, _ = figure_png(_figure())
    assert a == b
    assert b"Software" not in a and b"Matplotlib" not in a
    assert figure_png(_figure(), base64_text=True)[0] == base64.b64encode(a).decode("ascii")


def test_the_smallest_font_counts_only_text_that_is_drawn():
    fig = _figure(label_pt=12)
    ax = fig.axes[0]
    ax.legend(fontsize=7)
    ax.text(0, 0, "hidden", fontsize=3, visible=False)
    ax.set_title("", fontsize=2)  # empty: nothing drawn
    assert figure_record(figure_png(fig)[0])["font_pt"] == 7.0
    ax.get_legend().remove()
    assert figure_record(figure_png(fig)[0])["font_pt"] == 10.0  # the tick labels
    with recording_font_sizes() as sizes:
        fig.draw_without_rendering()
    assert sorted(set(sizes)) == [10.0, 12.0]


def test_recording_restores_text_drawing_even_after_an_error():
    from matplotlib.text import Text

    original = Text.draw
    with pytest.raises(RuntimeError), recording_font_sizes():
        raise RuntimeError("drawing failed")
    assert Text.draw is original


def test_text_px_is_the_shown_width_per_inch_times_points():
    assert text_px(9, 7.2, 686) == pytest.approx(686 / 7.2 * 9 / 72)
    assert text_px(7.2, 7.2, 720) == pytest.approx(10.0)  # 100 px per inch: 7.2 pt is 10 px
    for bad in (0, -1, float("nan"), "9"):
        with pytest.raises(ValueError, match="font_pt must be a positive number"):
            text_px(bad, 7.2, 686)
    with pytest.raises(ValueError, match="shown_px"):
        text_px(9, 7.2, 0)


def test_bad_input_is_refused_with_the_argument_named():
    with pytest.raises(TypeError, match=r"fig must be a matplotlib\.figure\.Figure, got ndarray"):
        figure_png(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="pixel_ratio must be a positive integer, got 0"):
        figure_png(_figure(), pixel_ratio=0)
    with pytest.raises(ValueError, match="png must be the bytes of a PNG file, got str"):
        with_figure_record("not a png", 9, 200)
    png, _ = figure_png(_figure())
    with pytest.raises(ValueError, match="font_pt must be a positive number, got 0"):
        with_figure_record(png, 0, 200)
    with pytest.raises(ValueError, match="png must be a PNG file"):
        figure_record(b"GIF89a")


def test_the_record_is_a_valid_png_text_chunk_that_pillow_reads():
    png, _ = figure_png(_figure(label_pt=8))
    with Image.open(io.BytesIO(png)) as image:
        image.load()
        assert FIGURE_KEY in image.text
        assert image.size == _png_size(png)


def test_in_a_kernel_every_figure_is_shown_with_figure_png():
    class Shell:
        display_formatter = DisplayFormatter()

    shell = Shell()
    assert use_book_figures(shell)
    data, metadata = shell.display_formatter.format(_figure(label_pt=8))
    png = base64.b64decode(data["image/png"])
    assert figure_record(png)["font_pt"] == 8.0
    assert metadata["image/png"] == {"width": round(_png_size(png)[0] / 2)}
    assert not use_book_figures(object())  # not IPython: nothing to set


# ----------------------------------------------------------------- the notebooks


@pytest.mark.parametrize("path", NOTEBOOKS + EDITIONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_figure_carries_what_the_legibility_check_needs(path):
    """Each PNG output and explorer frame records its smallest font and width in inches,
    is drawn at twice the resolution it is shown at, and is shown at a width the
    book's browser tests can measure; no figure comes in a format they cannot read."""
    nb = nbformat.read(path, as_version=4)
    other = [
        (i, mime)
        for i, cell in enumerate(nb.cells)
        for output in cell.get("outputs", [])
        for mime in output.get("data", {})
        if mime.startswith("image/") and mime != "image/png"
    ]
    assert not other, f"{path.name}: figures the check cannot measure: {other}"
    found = figure_outputs(path)
    assert found, f"{path.name}: no figure found"
    for figure in found:
        where = f"{path.name}, cell {figure.cell}, {figure.kind}"
        assert figure.record is not None, f"{where}: no record of its smallest text"
        assert figure.css_width, f"{where}: no width to show it at"
        pixels = figure.record["width_in"] * figure.record["dpi"]
        assert pixels == pytest.approx(PIXEL_RATIO * figure.css_width, abs=PIXEL_RATIO), where


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_figure_is_legible_in_the_text_column(path):
    """Shown at its natural width, or the 686 px column if that is narrower, every
    figure's smallest text is at least MIN_TEXT_PX tall (the browser tests measure the
    width the page really gives it)."""
    small = [
        (f.cell, f.kind, round(f.text_px_in_column(), 1))
        for f in figure_outputs(path)
        if f.text_px_in_column() < MIN_TEXT_PX
    ]
    assert not small, f"{path.name}: text under {MIN_TEXT_PX} px at {COLUMN_PX} px: {small}"

"""How the book shows a figure: sharp on high-resolution screens, its text measured.

Every chapter draws its figures with matplotlib; this module decides how they reach the
reader (chapter 1 is the first to use it, through ``import helpers``). Inside a Jupyter
kernel, importing :mod:`helpers` makes :func:`figure_png` the PNG formatter of
matplotlib figures (see :func:`use_book_figures`): each figure is rendered at
``PIXEL_RATIO`` (2) device pixels per CSS pixel and shown at its natural size, ``dpi``
CSS pixels per inch, through the ``width`` of the output's metadata (Jupyter, Colab and
the book's HTML build all honour it). On a 2x screen the picture is as sharp as the
screen; elsewhere it looks exactly as a 1x PNG would.

Each PNG also records, in a text chunk named ``FIGURE_KEY``, what a reader's eye needs:
the smallest font size of any text drawn in it (``font_pt``), the picture's width in
inches (``width_in``) and the resolution it was rendered at (``dpi``). Shown ``w`` CSS
pixels wide, its smallest text is ``w / width_in / 72 * font_pt`` CSS pixels tall
(:func:`text_px`), which the book's browser tests keep at ``MIN_TEXT_PX`` or more in
the 686 px text column at 1366 wide. The explorers of :mod:`helpers.widgets` record
the same chunk in each of their frames.

All output is byte-deterministic: no timestamp, no software version in the PNG.

Words in figures follow the language of :mod:`helpers.i18n`: with ``set_language("ko")``
every text a figure draws that the figure catalogue knows (a title, an axis label, a
legend entry, an annotation; exactly, or as a template whose numbers are kept as drawn)
is drawn in Korean (:func:`translated_text`, at draw time: the notebooks' code is
unchanged), in NanumGothic after the figure's own font (the copy that the package
``koreanize-matplotlib`` ships, registered with matplotlib without changing its settings).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import io
import json
import numbers
import re
import struct
import warnings
import zlib
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.text import Text

from helpers.i18n import figure_text, get_language

__all__ = [
    "FIGURE_KEY",
    "MIN_TEXT_PX",
    "PIXEL_RATIO",
    "figure_png",
    "figure_record",
    "korean_font",
    "recording_font_sizes",
    "text_px",
    "translated_text",
    "use_book_figures",
    "with_figure_record",
]

#: Device pixels per CSS pixel of every figure: sharp on a 2x (high-resolution) screen.
PIXEL_RATIO = 2
#: The smallest text height (CSS pixels) a figure may show in the 686 px column.
MIN_TEXT_PX = 9.0
#: The keyword of the PNG text chunk that records a figure's smallest text.
FIGURE_KEY = "attention-book:figure"

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@contextlib.contextmanager
def recording_font_sizes() -> Iterator[list[float]]:
    """Record the font size (points) of every text that matplotlib draws meanwhile.

    Yields a list that fills with one size per text drawn with something in it (tick
    labels, titles, legends, annotations, colour bar labels): exactly the texts a
    reader sees, not those hidden, empty, or on ticks outside the axes' limits.

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(3, 2))
    >>> ax = fig.add_subplot()
    >>> _ = ax.set_title("weights", fontsize=12)
    >>> _ = ax.set_xticks([0, 1], ["a", "b"], fontsize=7)
    >>> with recording_font_sizes() as sizes:
    ...     fig.draw_without_rendering()
    >>> min(sizes), max(sizes)
    (7.0, 12.0)
    """
    sizes: list[float] = []
    original = Text.draw

    @functools.wraps(original)
    def draw(self: Text, renderer: Any) -> Any:
        if self.get_visible() and self.get_text().strip():
            sizes.append(float(self.get_fontsize()))
        with _shown_in_language(self):
            return original(self, renderer)

    Text.draw = draw  # type: ignore[method-assign]
    try:
        yield sizes
    finally:
        Text.draw = original  # type: ignore[method-assign]


_WIDE = re.compile(r"[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")  # Hangul


@functools.cache
def korean_font() -> str | None:
    """The family name of the Korean font figures use, registered with matplotlib
    (NanumGothic, from the package ``koreanize-matplotlib``), or None if it is not
    installed. Registering it changes none of matplotlib's settings."""
    spec = find_spec("koreanize_matplotlib")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "fonts" / "NanumGothic.ttf"
    if not path.is_file():
        return None
    from matplotlib import font_manager

    font_manager.fontManager.addfont(str(path))
    return font_manager.FontProperties(fname=str(path)).get_name()


@functools.cache
def _warn_no_font() -> None:
    warnings.warn(
        "figures stay in English: the Korean font is missing "
        "(pip install koreanize-matplotlib==0.1.1)",
        stacklevel=4,
    )


@contextlib.contextmanager
def _shown_in_language(text: Text) -> Iterator[None]:
    """While it lasts, `text` shows its words in the language set (see the module's notes)."""
    english = text.get_text()
    shown = figure_text(english) if isinstance(english, str) else english
    if shown == english and not (isinstance(shown, str) and _WIDE.search(shown)):
        yield  # English, or a text of the catalogue's language already (the Korean
        return  # notebooks' own code draws Korean): that one still needs the font
    font = korean_font() if _WIDE.search(shown) else ""
    if font is None:
        _warn_no_font()
        yield
        return
    families = text.get_fontfamily()
    text.set_text(shown)
    if font:
        # mathtext draws the words around $...$ in the first family only (no fallback)
        math = text._preprocess_math(shown)[1] is True
        text.set_fontfamily([font, *families] if math else [*families, font])
    try:
        yield
    finally:
        text.set_text(english)
        text.set_fontfamily(families)


@contextlib.contextmanager
def translated_text(fig: Figure) -> Iterator[None]:
    """While it lasts, every text of `fig` shows its words in the language set (English:
    nothing changes), so that a tight crop measures the words drawn."""
    if get_language() == "en":
        yield
        return
    with contextlib.ExitStack() as stack:
        for text in fig.findobj(Text):
            stack.enter_context(_shown_in_language(text))  # type: ignore[arg-type]
        yield


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def with_figure_record(png: bytes, font_pt: float, dpi: float) -> bytes:
    """``png`` with a text chunk ``FIGURE_KEY`` recording its smallest font and width.

    Parameters
    ----------
    png : bytes
        A PNG file.
    font_pt : float
        The smallest font size, in points, of the text drawn in it.
    dpi : float
        The pixels per inch it was rendered at (its width in inches is its pixel
        width divided by this).

    Returns
    -------
    bytes
        The same PNG with the chunk inserted after its header; read it back with
        :func:`figure_record`.

    Examples
    --------
    >>> import io
    >>> from PIL import Image
    >>> out = io.BytesIO()
    >>> Image.new("RGB", (400, 100), "white").save(out, format="PNG")
    >>> figure_record(with_figure_record(out.getvalue(), font_pt=8.0, dpi=200))
    {'font_pt': 8.0, 'width_in': 2.0, 'dpi': 200.0}
    """
    if not isinstance(png, bytes) or not png.startswith(_PNG_SIGNATURE):
        raise ValueError(f"png must be the bytes of a PNG file, got {type(png).__name__}")
    for name, value in (("font_pt", font_pt), ("dpi", dpi)):
        if not isinstance(value, numbers.Real) or not value > 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    width = struct.unpack(">I", png[16:20])[0]  # IHDR: the first chunk, width first
    record = {"font_pt": float(font_pt), "width_in": width / float(dpi), "dpi": float(dpi)}
    text = FIGURE_KEY.encode("latin-1") + b"\0" + json.dumps(record).encode("ascii")
    end_of_header = 8 + 4 + 4 + 13 + 4  # signature, IHDR length, type, data, CRC
    return png[:end_of_header] + _chunk(b"tEXt", text) + png[end_of_header:]


def figure_record(png: bytes | str) -> dict[str, float] | None:
    """The record of :func:`with_figure_record` in ``png`` (bytes or base64), or None.

    Examples
    --------
    >>> import io
    >>> from PIL import Image
    >>> out = io.BytesIO()
    >>> Image.new("RGB", (8, 8)).save(out, format="PNG")
    >>> figure_record(out.getvalue()) is None
    True
    """
    raw = base64.b64decode(png) if isinstance(png, str) else png
    if not isinstance(raw, bytes) or not raw.startswith(_PNG_SIGNATURE):
        raise ValueError("png must be a PNG file's bytes or their base64 text")
    key = FIGURE_KEY.encode("latin-1") + b"\0"
    at = 8
    while at + 8 <= len(raw):
        length, kind = struct.unpack(">I4s", raw[at : at + 8])
        data = raw[at + 8 : at + 8 + length]
        if kind == b"tEXt" and data.startswith(key):
            return json.loads(data[len(key) :])
        if kind == b"IEND":
            break
        at += 12 + length
    return None


def text_px(font_pt: float, width_in: float, shown_px: float) -> float:
    """How tall (CSS pixels) text of ``font_pt`` points is in a figure shown ``shown_px`` wide.

    A figure ``width_in`` inches wide shown ``shown_px`` CSS pixels wide has
    ``shown_px / width_in`` pixels per inch, and a point is 1/72 inch: the text is
    ``shown_px / width_in * font_pt / 72`` pixels (its em size, as a CSS font size).

    Examples
    --------
    >>> round(text_px(7, 7.2, 686), 2)  # 7 pt in a 7.2 in figure in the 686 px column
    9.26
    """
    for name, value in (("font_pt", font_pt), ("width_in", width_in), ("shown_px", shown_px)):
        if not isinstance(value, numbers.Real) or not value > 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    return shown_px / width_in * font_pt / 72


def figure_png(
    fig: Figure, *, pixel_ratio: int = PIXEL_RATIO, base64_text: bool = False
) -> tuple[bytes | str, dict[str, int]]:
    """Render ``fig`` as the book shows it: a PNG at ``pixel_ratio`` x, its width for display.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure; drawn at ``fig.dpi * pixel_ratio`` pixels per inch, cropped to what
        is drawn (``bbox_inches="tight"``, as the inline backend does).
    pixel_ratio : int
        Device pixels per CSS pixel.
    base64_text : bool
        Return the PNG as base64 text (what IPython's formatters return) instead of bytes.

    Returns
    -------
    png : bytes or str
        The PNG, carrying the :func:`figure_record` of its smallest font and its width.
    metadata : dict
        ``{"width": w}``: its natural width in CSS pixels, ``fig.dpi`` per inch. The
        height follows from the picture (a height too would stretch a figure that the
        page narrows).

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(4, 2), dpi=100)
    >>> ax = fig.add_subplot()
    >>> _ = ax.plot([0, 1], [0, 1])
    >>> _ = ax.set_xlabel("key", fontsize=9)
    >>> png, metadata = figure_png(fig)
    >>> record = figure_record(png)
    >>> record["font_pt"], record["dpi"], metadata["width"] * 2 == round(record["width_in"] * 200)
    (9.0, 200.0, True)
    """
    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib.figure.Figure, got {type(fig).__name__}")
    if not isinstance(pixel_ratio, numbers.Integral) or pixel_ratio < 1:
        raise ValueError(f"pixel_ratio must be a positive integer, got {pixel_ratio!r}")
    dpi = fig.dpi * pixel_ratio
    out = io.BytesIO()
    with recording_font_sizes() as sizes, translated_text(fig):
        fig.savefig(
            out,
            format="png",
            dpi=dpi,
            bbox_inches="tight",
            facecolor=fig.get_facecolor(),
            edgecolor=fig.get_edgecolor(),
            metadata={"Software": None},  # no version in the bytes
        )
    png = out.getvalue()
    if sizes:
        png = with_figure_record(png, min(sizes), dpi)
    width = struct.unpack(">I", png[16:20])[0]
    metadata = {"width": round(width / pixel_ratio)}
    if base64_text:
        return base64.b64encode(png).decode("ascii"), metadata
    return png, metadata


def use_book_figures(shell: Any = None) -> bool:
    """Show every matplotlib figure of this IPython session with :func:`figure_png`.

    Called by ``import helpers``; does nothing outside IPython. The inline backend is
    activated first, because activating it later would install its own formatter
    over this one.

    Returns
    -------
    bool
        Whether a shell was found and its PNG formatter set.
    """
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover (IPython comes with every kernel)
            return False
        shell = get_ipython()
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not formatters or "image/png" not in formatters:
        return False
    import matplotlib

    if matplotlib.get_backend() in ("inline", "module://matplotlib_inline.backend_inline"):
        # Importing the inline backend configures its formatters (once per session): do
        # it now, so that it cannot replace this one when the first figure is made.
        import matplotlib_inline.backend_inline  # noqa: F401
    formatters["image/png"].for_type(Figure, functools.partial(figure_png, base64_text=True))
    return True

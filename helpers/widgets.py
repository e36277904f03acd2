"""Explorable figures: one matplotlib figure, live controls, and a static fallback.

Introduced in chapter 1 (a temperature slider over a softmax bar chart) and used
again in chapter 2 (``d_k`` and scaling on or off) and chapter 3 (number of heads).

An :class:`Explorer` wraps a :class:`matplotlib.figure.Figure` and an ``update``
callback that redraws it for given parameter values. Displayed as a cell's output it
carries two views of the same figure:

* live (Jupyter, JupyterLab, Colab): ipywidgets controls above an
  :class:`ipywidgets.Image`; every change calls ``update``, renders the figure with
  the Agg canvas and replaces the image bytes in place (no flicker, no pyplot);
* static (the book's web pages, no kernel): every combination of the discrete
  parameter values is pre-rendered when the notebook runs, stored once per distinct
  picture as a palette PNG, and ``book/_static/explorer.js`` swaps the picture as
  the reader moves an HTML range control. Without JavaScript the reader sees the
  figure at the initial values.

Every frame is rendered at ``PIXEL_RATIO`` (2) device pixels per CSS pixel, sharp on
high-resolution screens, shown at ``dpi`` CSS pixels per inch, and records its smallest
font size and its width in inches (:func:`helpers.figures.figure_record`), from which
the book's browser tests compute how tall its smallest text is as displayed.

All static output is byte-deterministic (fixed dpi, no PNG timestamps, no random
ids), so notebooks stored with outputs re-execute to identical HTML.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import itertools
import json
import keyword
import math
import numbers
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image  # a dependency of matplotlib

from helpers.figures import (
    PIXEL_RATIO,
    recording_font_sizes,
    translated_text,
    with_figure_record,
)
from helpers.i18n import get_language

__all__ = ["Explorer", "Param", "log_values", "without_negative_zeros"]

#: The largest number of static frames (the product of the parameter sizes).
MAX_FRAMES = 400

#: Colours in each static frame's palette (the most a palette PNG holds). Median cut,
#: without dithering: plots of flat colours with anti-aliased lines and text look the
#: same as the true-colour PNG (a mean error of about 0.2 of 255 per channel) at a
#: quarter to a half of its bytes, and a colour bar's gradient stays smooth (with 64
#: colours, a viridis bar showed bands a dozen pixels tall). Pillow's k-means refinement
#: would lower that error to 0.15 but costs five times the median cut (0.17 s against
#: 0.03 s for a 1440 x 640 frame: most of a chapter's execution time went to it), and
#: the fast octree bands the colour bar (42 steps where median cut keeps 200).
PALETTE_COLORS = 256

_WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"

#: The sentence under a static explorer in a notebook that has not run (or was reopened).
RUN_HINT = "Run this cell to make the explorer live: until then its controls do nothing."
# The hint in the other languages of the book (get_language()).
RUN_HINTS = {"ko": "이 셀을 실행하면 탐색기가 살아난다. 그 전에는 조절기가 아무 일도 하지 않는다."}
#: Hides JupyterLab's "model not found" line left by a saved live view (see static_html).
DEAD_WIDGET_CSS = ".jp-OutputArea-output.jupyter-widgets.lm-Panel:not(:has(*)){display:none}"
#: A number that rounded to zero but kept its minus sign ("-0", "-0.00", "-0.0e+00"),
#: not part of a longer number or a word.
# (followed by anything but a digit, a Latin letter, _ or a point: "-0.00까지" is a zero)
_NEGATIVE_ZERO = re.compile(r"(?<![\w.])-(0(?:\.0*)?(?:e[+-]?0+)?)(?![0-9A-Za-z_.])")
_MEDIANCUT = 0  # PIL.Image.Quantize.MEDIANCUT, as an int for Pillow < 9.1
_NO_DITHER = 0  # PIL.Image.Dither.NONE

Control = Literal["slider", "buttons", "menu"]


def without_negative_zeros(text: str) -> str:
    """``text`` with every number that rounded to zero written without its minus sign.

    A caption formatted with ``f"{x:.2f}"`` shows ``-0.00`` for ``x = -0.001``; the
    explorer's captions go through this, so none shows a negative zero.

    Examples
    --------
    >>> without_negative_zeros("lowest -0.00, then -0.01, -0, x-0.0 and -0.001")
    'lowest 0.00, then -0.01, 0, x-0.0 and -0.001'
    """
    return _NEGATIVE_ZERO.sub(r"\1", text)


def _is_number(x: object) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def log_values(start: float, stop: float, per_decade: int = 10, digits: int = 3) -> list[float]:
    """Log-spaced values from `start` to `stop`, rounded so that labels are exact.

    The grid is ``10 ** (k / per_decade)`` for integers ``k``; every point in
    ``[start, stop]`` is kept. Each value is rounded to `digits` significant digits,
    so powers of ten are exact (``1.0`` is in the list whenever the range holds it)
    and a slider's label shows the very value passed to the figure.

    Parameters
    ----------
    start, stop : float
        Positive bounds with ``start < stop``; a bound on the grid is included.
    per_decade : int
        Grid points per factor of ten.
    digits : int
        Significant digits kept.

    Returns
    -------
    list of float
        Increasing values.

    Examples
    --------
    >>> values = log_values(0.01, 100, per_decade=10)
    >>> len(values), values[0], values[-1], 1.0 in values
    (41, 0.01, 100.0, True)
    >>> log_values(1, 10, per_decade=4)
    [1.0, 1.78, 3.16, 5.62, 10.0]
    """
    if not (_is_number(start) and _is_number(stop)) or not 0 < start < stop:
        raise ValueError(f"start and stop must satisfy 0 < start < stop, got {start!r}, {stop!r}")
    if not isinstance(per_decade, numbers.Integral) or per_decade < 1:
        raise ValueError(f"per_decade must be a positive integer, got {per_decade!r}")
    if not isinstance(digits, numbers.Integral) or digits < 1:
        raise ValueError(f"digits must be a positive integer, got {digits!r}")
    eps = 1e-9
    k0 = math.ceil(math.log10(start) * per_decade - eps)
    k1 = math.floor(math.log10(stop) * per_decade + eps)
    return [float(f"{10 ** (k / per_decade):.{digits}g}") for k in range(k0, k1 + 1)]


class Param:
    """One discrete parameter of an :class:`Explorer`.

    Parameters
    ----------
    name : str
        The keyword under which ``update`` receives the value (a Python identifier).
    values : sequence
        The distinct values the reader can choose from, in display order.
    label : str, optional
        Text beside the control (may be Greek or LaTeX-free Unicode); default `name`.
    fmt : str or callable
        How a numeric value is shown: a format string such as ``"{:.3g}"`` or a
        function of the value. Non-numeric values are shown with ``str`` unless `fmt`
        is a function.
    value : optional
        The initial value, one of `values`; default the first.
    labels : sequence of str, optional
        Explicit text for each value (overrides `fmt`), e.g. ``["off", "on"]``.
    control : {"slider", "buttons", "menu"}, optional
        Default: a slider for numbers, buttons for up to four other values, else a
        menu. Live these are an ``ipywidgets.SelectionSlider``, ``ToggleButtons``
        or ``Dropdown``; static, a range input, radio buttons or a ``<select>``.

    Examples
    --------
    >>> p = Param("tau", [0.5, 1.0, 2.0], label="τ", value=1.0)
    >>> p.labels, p.index, p.control
    (('0.5', '1', '2'), 1, 'slider')
    >>> Param("scaled", [True, False], labels=["on", "off"]).control
    'buttons'
    """

    def __init__(
        self,
        name: str,
        values: Iterable[Any],
        *,
        label: str | None = None,
        fmt: str | Callable[[Any], str] = "{:.3g}",
        value: Any = None,
        labels: Sequence[str] | None = None,
        control: Control | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"name must be a Python identifier, got {name!r}")
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise TypeError(f"values of {name!r} must be a sequence, got {type(values).__name__}")
        values = tuple(v.item() if isinstance(v, np.generic) else v for v in values)
        if not values:
            raise ValueError(f"values of {name!r} must not be empty")
        for i, j in itertools.combinations(range(len(values)), 2):
            if values[i] == values[j]:
                raise ValueError(f"values of {name!r} repeat {values[i]!r} (positions {i}, {j})")
        numeric = all(_is_number(v) for v in values)

        if labels is not None:
            labels = tuple(labels)
            if len(labels) != len(values) or not all(isinstance(s, str) for s in labels):
                raise ValueError(
                    f"labels of {name!r} must be {len(values)} strings, one per value, "
                    f"got {labels!r}"
                )
        elif callable(fmt):
            labels = tuple(str(fmt(v)) for v in values)
        elif isinstance(fmt, str):
            labels = tuple(fmt.format(v) if _is_number(v) else str(v) for v in values)
        else:
            raise TypeError(f"fmt of {name!r} must be a format string or callable, got {fmt!r}")
        if len(set(labels)) != len(labels):
            raise ValueError(
                f"labels of {name!r} are not distinct: {labels!r}; pass a finer fmt or labels"
            )

        if value is None:
            index = 0
        else:
            matches = [i for i, v in enumerate(values) if v == value]
            if not matches:
                hint = ""
                if numeric and _is_number(value):
                    nearest = min(values, key=lambda v: abs(v - value))
                    hint = f"; nearest is {nearest!r}"
                raise ValueError(f"value {value!r} of {name!r} is not one of its values{hint}")
            index = matches[0]

        if control is None:
            control = "slider" if numeric else ("buttons" if len(values) <= 4 else "menu")
        elif control not in ("slider", "buttons", "menu"):
            raise ValueError(
                f"control of {name!r} must be 'slider', 'buttons' or 'menu', got {control!r}"
            )

        self.name = name
        self.values = values
        self.label = name if label is None else str(label)
        self.labels: tuple[str, ...] = labels
        self.index = index
        self.control: Control = control

    @property
    def value(self) -> Any:
        """The initial value."""
        return self.values[self.index]

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return f"Param({self.name!r}, {len(self.values)} values, value={self.value!r})"


class Explorer:
    """An explorable figure: live ipywidgets controls, plus pre-rendered static frames.

    Display it as the last expression of a cell. It makes two outputs: first
    ``text/plain`` (a summary) and ``text/html`` (the static explorer, wired by
    ``book/_static/explorer.js`` on the site, with a sentence asking Jupyter and Colab
    readers to run the cell), then the ipywidgets view, which live front-ends show and
    which hides the static copy while it is displayed. A notebook saved and reopened
    without its kernel still shows the static explorer. The book's HTML build is
    configured to prefer ``text/html``.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure, best made with ``Figure(...)`` rather than pyplot so that it is
        never shown a second time (a pyplot figure is closed here for that reason).
        The explorer owns it from now on: its dpi is set to ``dpi * pixel_ratio``
        and its canvas is replaced by an Agg canvas.
    update : callable
        ``update(**values) -> str | None``: mutate the figure's artists for the given
        values (one keyword per parameter and live control) and optionally return a
        one-line description. The description is the picture's alt text and is shown
        under it.
    params : sequence of Param
        Discrete parameters. Static frames are rendered for their Cartesian product.
    live_controls : mapping of str to widget, optional
        Extra ipywidgets (anything with ``.value`` and ``.observe``), e.g. a ``Text``
        for editable logits. Live only: their values when the explorer is made are
        used for every static frame. Their values reach `update` under their keys.
    dpi : float
        CSS pixels per inch of the figure as shown (its natural size).
    pixel_ratio : int
        Device pixels per CSS pixel of every rendered frame: frames are
        ``dpi * pixel_ratio`` pixels per inch, shown ``dpi`` CSS pixels per inch.
    description : str, optional
        What the figure shows, in one line: the explorer's accessible name and the
        alt text of frames for which `update` returns nothing.
    max_frames : int
        Refuse parameter grids with more combinations than this.

    Attributes
    ----------
    widget : ipywidgets.VBox
        The live view (made on first use: ipywidgets 7 needs a running kernel).
    controls : dict of str to widget
        The live controls by parameter name (including `live_controls`).
    image : ipywidgets.Image
        The live picture.

    Notes
    -----
    Live, a control change calls ``update`` with every current value, draws the
    figure with Agg and assigns the PNG to ``image.value``. An exception raised by
    ``update`` (say, a reader typed malformed logits) is shown under the picture
    instead of the description, and the last good picture stays.

    Static frames are PNGs quantised to a palette of ``PALETTE_COLORS`` colours and
    deduplicated by content: the JSON in the ``text/html`` output holds the distinct
    frames as ``data:`` URIs, an ``index`` mapping each combination (C order, last
    parameter fastest) to a frame, and an ``alt`` text per combination.

    Examples
    --------
    >>> import numpy as np
    >>> from matplotlib.figure import Figure
    >>> fig = Figure(figsize=(4, 2))
    >>> ax = fig.add_subplot()
    >>> z = np.array([2.0, 1.0, 0.0])
    >>> bars = ax.bar(range(3), np.ones(3) / 3)
    >>> ax.set_ylim(0, 1)
    (0.0, 1.0)
    >>> def update(tau):
    ...     p = np.exp(z / tau) / np.exp(z / tau).sum()
    ...     for bar, h in zip(bars, p):
    ...         bar.set_height(h)
    ...     return f"τ = {tau:g}: largest weight {p.max():.2f}"
    >>> ex = Explorer(fig, update, [Param("tau", [0.5, 1.0, 2.0], label="τ", value=1.0)])
    >>> print(repr(ex))
    Explorer: τ (3 values); static frames: 3 unique
    >>> ex.render_png(tau=2.0)[:8]
    b'\\x89PNG\\r\\n\\x1a\\n'
    >>> '<input type="range"' in ex.static_html()
    True
    """

    def __init__(
        self,
        fig: Figure,
        update: Callable[..., str | None],
        params: Sequence[Param],
        *,
        live_controls: Mapping[str, Any] | None = None,
        dpi: float = 100,
        pixel_ratio: int = PIXEL_RATIO,
        description: str | None = None,
        max_frames: int = MAX_FRAMES,
    ) -> None:
        if not isinstance(fig, Figure):
            raise TypeError(f"fig must be a matplotlib.figure.Figure, got {type(fig).__name__}")
        if not callable(update):
            raise TypeError(f"update must be callable, got {type(update).__name__}")
        if isinstance(params, Param):
            params = [params]
        params = list(params)
        for p in params:
            if not isinstance(p, Param):
                raise TypeError(f"params must be a list of Param, got an item {p!r}")
        live_controls = dict(live_controls or {})
        for key, w in live_controls.items():
            if not isinstance(key, str) or not key.isidentifier():
                raise ValueError(f"live_controls keys must be identifiers, got {key!r}")
            if not (hasattr(w, "value") and hasattr(w, "observe")):
                raise TypeError(
                    f"live_controls[{key!r}] must be a widget with .value and .observe, "
                    f"got {type(w).__name__}"
                )
        names = [p.name for p in params] + list(live_controls)
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"params and live_controls repeat the names {duplicates}")
        if not _is_number(dpi) or not dpi > 0:
            raise ValueError(f"dpi must be a positive number, got {dpi!r}")
        if (
            not isinstance(pixel_ratio, numbers.Integral)
            or isinstance(pixel_ratio, bool)
            or (pixel_ratio < 1)
        ):
            raise ValueError(f"pixel_ratio must be a positive integer, got {pixel_ratio!r}")
        if description is not None and not isinstance(description, str):
            raise TypeError(f"description must be a string, got {type(description).__name__}")
        n_frames = math.prod(len(p) for p in params)
        if n_frames > max_frames:
            sizes = " × ".join(f"{p.name} ({len(p)})" for p in params)
            raise ValueError(
                f"params give {n_frames} static frames ({sizes}), more than max_frames="
                f"{max_frames}; use fewer values"
            )

        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None and getattr(fig.canvas, "manager", None) is not None:
            pyplot.close(fig)  # a pyplot figure would also be shown by the inline backend
        fig.set_dpi(dpi * pixel_ratio)
        self.fig = fig
        self.update = update
        self.params = params
        self.live_controls = live_controls
        self.dpi = dpi
        self.pixel_ratio = int(pixel_ratio)
        self._font_pt: float | None = None  # the smallest text of the last frame drawn
        self.description = description
        self._canvas = FigureCanvasAgg(fig)
        self._fixed = {k: w.value for k, w in live_controls.items()}  # for static frames
        # the static frames and view, per language (their words are in the language set)
        self._static: dict[str, tuple[list[bytes], list[int], list[str]]] = {}
        self._html: dict[str, str] = {}
        self._widget: Any = None
        self.controls: dict[str, Any] = {}
        self.image: Any = None
        self._caption: Any = None
        # Fail here, not in the middle of a display, if update does not accept the values.
        self._apply(self._initial_values())

    # ----------------------------------------------------------------- rendering

    def _initial_values(self) -> dict[str, Any]:
        return {**{p.name: p.value for p in self.params}, **self._fixed}

    def _apply(self, values: Mapping[str, Any]) -> str | None:
        text = self.update(**values)
        if text is not None and not isinstance(text, str):
            raise TypeError(f"update must return a str or None, got {type(text).__name__}")
        return None if text is None else without_negative_zeros(text)

    def _draw_rgb(self) -> Image.Image:
        with recording_font_sizes() as sizes, translated_text(self.fig):
            self._canvas.draw()
        self._font_pt = min(sizes) if sizes else None
        rgba = Image.fromarray(np.asarray(self._canvas.buffer_rgba()))  # (h, w, 4) uint8
        background = Image.new("RGBA", rgba.size, "white")
        background.alpha_composite(rgba)
        return background.convert("RGB")

    def _recorded(self, png: bytes) -> bytes:
        """``png`` with the record of its smallest text (see helpers.figures)."""
        if self._font_pt is None:
            return png
        return with_figure_record(png, self._font_pt, self.dpi * self.pixel_ratio)

    def _css_size(self) -> tuple[int, int]:
        """The figure's natural size as shown, in CSS pixels (`dpi` per inch)."""
        width, height = self._canvas.get_width_height()
        return round(width / self.pixel_ratio), round(height / self.pixel_ratio)

    def _encode_static(self) -> bytes:
        """The current figure as a palette PNG (deterministic bytes)."""
        return self._palette_png(self._draw_rgb())

    def _palette_png(self, image: Image.Image) -> bytes:
        """`image` (RGB) quantised to the palette, as a PNG with the figure's record."""
        quantised = image.quantize(PALETTE_COLORS, method=_MEDIANCUT, dither=_NO_DITHER)
        out = io.BytesIO()
        quantised.save(out, format="PNG", optimize=True)
        return self._recorded(out.getvalue())

    def _encode_live(self) -> bytes:
        """The current figure as a true-colour PNG, fast to encode."""
        out = io.BytesIO()
        self._draw_rgb().save(out, format="PNG", compress_level=1)
        return self._recorded(out.getvalue())

    def _values_for(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        values = self._initial_values()
        unknown = sorted(set(overrides) - set(values))
        if unknown:
            raise ValueError(f"unknown parameter names {unknown}; expected some of {list(values)}")
        values.update(overrides)
        return values

    def render_png(self, **values: Any) -> bytes:
        """Render the figure as a static frame (palette PNG bytes).

        Parameters not given take their initial values. Values need not be on a
        parameter's grid.
        """
        self._apply(self._values_for(values))
        return self._encode_static()

    def _render_static(self) -> tuple[list[bytes], list[int], list[str]]:
        language = get_language()
        if language not in self._static:
            frames: list[bytes] = []
            where: dict[bytes, int] = {}
            index: list[int] = []
            alts: list[str] = []
            for combo in itertools.product(*(p.values for p in self.params)):
                values = dict(zip((p.name for p in self.params), combo, strict=True))
                text = self._apply({**values, **self._fixed})
                png = self._encode_static()
                if png not in where:
                    where[png] = len(frames)
                    frames.append(png)
                index.append(where[png])
                alts.append(text or "")
            self._static[language] = (frames, index, alts)
        return self._static[language]

    # -------------------------------------------------------------- static view

    def _flat_initial(self) -> int:
        flat = 0
        for p in self.params:
            flat = flat * len(p) + p.index
        return flat

    def static_html(self) -> str:
        """The static explorer: markup, initial frame and frame data (deterministic)."""
        language = get_language()
        if language not in self._html:
            self._html[language] = self._make_static_html()
        return self._html[language]

    def _make_static_html(self) -> str:
        frames, index, alts = self._render_static()
        uris = ["data:image/png;base64," + base64.b64encode(f).decode("ascii") for f in frames]
        data = {
            "version": 1,
            "params": [{"name": p.name, "labels": list(p.labels)} for p in self.params],
            "description": self.description or "",
            "frames": uris,
            "index": index,
            "alt": alts,
        }
        blob = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        # Inside <script>, "</" or "<!--" would end the element early: escape every "<".
        blob = blob.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        # Radio groups need a name; derive it from the content, never from id() or uuid.
        # (explorer.js makes it unique on the page, should one explorer appear twice.)
        uid = "explorer-" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]

        flat = self._flat_initial()
        text = alts[flat]
        alt = text or self.description or "Interactive figure"
        width, height = self._css_size()
        esc = html.escape
        label = f' aria-label="{esc(self.description)}"' if self.description else ""
        # The wrapper's class lets the live view hide this copy (see _build_widget).
        self._static_class = f"{uid}-static"
        parts = [
            f'<div class="{self._static_class}">',
            f'<div class="explorer" role="group"{label}>',
        ]
        if self.params:
            parts.append('<form class="explorer-controls" autocomplete="off">')
            for k, p in enumerate(self.params):
                parts.append(self._control_html(k, p, uid))
            parts.append("</form>")
        parts.append(
            '<figure class="explorer-figure">'
            f'<img class="explorer-image" src="{uris[index[flat]]}" alt="{esc(alt)}" '
            f'width="{width}" height="{height}">'
            f'<figcaption class="explorer-caption" aria-live="polite">{esc(text)}</figcaption>'
            "</figure>"
        )
        # Shown in Jupyter and Colab before the cell runs (and after a saved notebook is
        # reopened); the site hides it (explorer.css), where explorer.js wires the controls.
        parts.append(
            f'<p class="explorer-hint"><em>{esc(RUN_HINTS.get(get_language(), RUN_HINT))}</em></p>'
        )
        # A notebook saved after the cell ran keeps the live view's output; reopened with a
        # new kernel, JupyterLab shows "Error displaying widget: model not found" there (an
        # output panel with text and no element in it). The static view above stands in for
        # it, so that empty panel is hidden. Nothing else matches: the site has no such class.
        parts.append(f"<style>{DEAD_WIDGET_CSS}</style>")
        parts.append(f'<script type="application/json" class="explorer-data">{blob}</script>')
        parts.append("</div>")
        parts.append("</div>")
        return "\n".join(parts)

    @staticmethod
    def _control_html(k: int, p: Param, uid: str) -> str:
        """One control. Disabled until explorer.js wires it, so it never looks broken.

        Every control has an accessible name, the parameter's label: a range input or
        menu carries it as ``aria-label`` (its ``<label>`` also holds the value shown
        beside it), a radio group as the ``<legend>`` of its ``<fieldset>``, and each
        radio button its value's text. Every control is reached with Tab and operated
        with the arrow keys; ``explorer.css`` draws its focus ring.
        """
        esc = html.escape
        attrs = f'data-explorer-param="{k}" disabled'
        if p.control == "slider":
            return (
                f'<label class="explorer-control"><span class="explorer-label">{esc(p.label)}'
                f'</span><input type="range" min="0" max="{len(p) - 1}" step="1" '
                f'value="{p.index}" aria-label="{esc(p.label)}" '
                f'aria-valuetext="{esc(p.labels[p.index])}" {attrs}>'
                f'<output data-explorer-param="{k}">{esc(p.labels[p.index])}</output></label>'
            )
        if p.control == "buttons":
            radios = "".join(
                f'<label><input type="radio" name="{uid}-{k}" value="{i}"'
                f"{' checked' if i == p.index else ''} {attrs}>{esc(s)}</label>"
                for i, s in enumerate(p.labels)
            )
            return (
                f'<fieldset class="explorer-control"><legend class="explorer-label">'
                f"{esc(p.label)}</legend>{radios}</fieldset>"
            )
        options = "".join(
            f'<option value="{i}"{" selected" if i == p.index else ""}>{esc(s)}</option>'
            for i, s in enumerate(p.labels)
        )
        return (
            f'<label class="explorer-control"><span class="explorer-label">{esc(p.label)}'
            f'</span><select aria-label="{esc(p.label)}" {attrs}>{options}</select></label>'
        )

    # ---------------------------------------------------------------- live view

    @property
    def widget(self) -> Any:
        """The live ipywidgets view (built on first access)."""
        if self._widget is None:
            self._widget = self._build_widget()
        return self._widget

    def _build_widget(self) -> Any:
        import ipywidgets as w

        controls: dict[str, Any] = {}
        style = {"description_width": "initial"}
        for p in self.params:
            options = list(zip(p.labels, p.values, strict=True))
            common = {"options": options, "value": p.value, "description": p.label}
            if p.control == "slider":
                control = w.SelectionSlider(
                    **common,
                    continuous_update=True,
                    readout=True,
                    style=style,
                    layout=w.Layout(width="28em", max_width="100%"),
                )
            elif p.control == "buttons":
                control = w.ToggleButtons(**common, style=style)
            else:
                control = w.Dropdown(**common, style=style)
            controls[p.name] = control
        controls.update(self.live_controls)
        self.controls = controls

        values = self._current_values()
        text = self._apply(values)
        width, _ = self._css_size()
        self.image = w.Image(
            value=self._encode_live(),
            format="png",
            # Natural size (a VBox would stretch it and blur the pixels), narrower if need be.
            layout=w.Layout(width=f"{width}px", max_width="100%", height="auto"),
        )
        self._caption = w.Label(value=text or "")
        for control in controls.values():
            control.observe(self._on_change, names="value")
        # While the live view is on the page it hides the static copy displayed beside it
        # (see _ipython_display_); a <style> set as an HTML widget's value applies to the
        # page (JupyterLab) or to the cell's output frame (Colab).
        self.static_html()
        hide = w.HTML(value=f"<style>.{self._static_class} {{ display: none !important; }}</style>")
        return w.VBox([*controls.values(), self.image, self._caption, hide])

    def _current_values(self) -> dict[str, Any]:
        return {name: control.value for name, control in self.controls.items()}

    def _on_change(self, change: Any = None) -> None:
        try:
            text = self._apply(self._current_values())
            png = self._encode_live()
        except Exception as exc:  # shown to the reader, who may have typed bad input
            self._caption.value = f"Cannot draw this: {type(exc).__name__}: {exc}"
            return
        self.image.value = png
        self._caption.value = text or ""

    def benchmark_callback(self, n: int = 50) -> dict[str, float]:
        """Time the live callback: set a control, wait for the new picture.

        Steps the first parameter's control cyclically through its values `n`
        times (each step is a real change: ``update``, Agg draw, PNG, ``Image.value``)
        and restores it. With no parameters, calls the callback directly.

        Returns
        -------
        dict
            ``n`` and the ``median_ms``, ``p10_ms``, ``p90_ms`` and ``max_ms`` of the
            per-change wall time in milliseconds.
        """
        if not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}")
        self.widget  # noqa: B018  (builds the live view)
        times = []
        if self.params and len(self.params[0]) > 1:
            p = self.params[0]
            control = self.controls[p.name]
            start = control.index
            for step in range(n):
                i = (start + 1 + step) % len(p)  # never the current index: a real change
                t0 = time.perf_counter()
                control.index = i
                times.append(time.perf_counter() - t0)
            control.index = start
        else:
            for _ in range(n):
                t0 = time.perf_counter()
                self._on_change()
                times.append(time.perf_counter() - t0)
        ms = np.array(times) * 1e3
        return {
            "n": n,
            "median_ms": float(np.median(ms)),
            "p10_ms": float(np.percentile(ms, 10)),
            "p90_ms": float(np.percentile(ms, 90)),
            "max_ms": float(ms.max()),
        }

    def static_stats(self) -> dict[str, int]:
        """Sizes of the static view: combinations, unique frames, bytes per frame, HTML."""
        frames, index, _ = self._render_static()
        sizes = [len(f) for f in frames]
        return {
            "combinations": len(index),
            "frames": len(frames),
            "frame_bytes_min": min(sizes),
            "frame_bytes_median": int(np.median(sizes)),
            "frame_bytes_max": max(sizes),
            "html_bytes": len(self.static_html().encode("utf-8")),
        }

    # ---------------------------------------------------------------- display

    def __repr__(self) -> str:
        frames, _, _ = self._render_static()
        return f"{self._describe()}; static frames: {len(frames)} unique"

    def _describe(self) -> str:
        parts = [f"{p.label} ({len(p)} values)" for p in self.params] or ["no parameters"]
        live = f"; live only: {', '.join(self.live_controls)}" if self.live_controls else ""
        return f"Explorer: {' × '.join(parts)}{live}"

    @staticmethod
    def _html_displayed() -> bool:
        """Whether this IPython session shows HTML: a session that formats plain text only
        (``display_formatter.active_types``; the grader's kernel does, scripts/grade.py)
        would never show the frames, so they are not rendered."""
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover (IPython comes with every kernel)
            return True
        formatter = getattr(get_ipython(), "display_formatter", None)
        return formatter is None or "text/html" in formatter.active_types

    def _ipython_display_(self) -> None:
        """Display two outputs: the static explorer, then the live widget.

        A saved notebook keeps both. Reopened without its kernel (or opened before the
        cell ever ran, as the book's notebooks are stored), the widget's model is gone:
        JupyterLab then shows an error in place of the widget, so the static explorer,
        with its sentence asking to run the cell, is a separate output that the live view
        hides only while it is displayed. The widget's output also carries an empty
        ``text/html``, which the static site (that never shows widgets) renders as nothing.
        """
        from IPython.display import display

        if not self._html_displayed():  # plain text only: no frames, no live view
            display({"text/plain": self._describe()}, raw=True)
            return
        bundle = self._repr_mimebundle_()
        view = bundle.pop(_WIDGET_VIEW_MIME, None)
        display(bundle, raw=True)
        if view is not None:
            display({_WIDGET_VIEW_MIME: view, "text/html": ""}, raw=True)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        bundle: dict[str, Any] = {"text/plain": repr(self), "text/html": self.static_html()}
        try:
            model_id = self.widget.model_id
        except Exception as exc:  # e.g. ipywidgets 7 with an old ipykernel, outside a kernel
            warnings.warn(f"Explorer: no live view ({exc}); showing the static one", stacklevel=2)
            model_id = None
        if model_id:
            bundle[_WIDGET_VIEW_MIME] = {
                "version_major": 2,
                "version_minor": 0,
                "model_id": model_id,
            }
        return bundle

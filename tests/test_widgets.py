"""Tests of helpers.widgets: the explorable figure's static HTML, live widget and errors."""

from __future__ import annotations

import json
import math
import struct
from html.parser import HTMLParser
from pathlib import Path

import ipywidgets
import numpy as np
import pytest
from IPython.core.formatters import DisplayFormatter
from matplotlib.figure import Figure

from helpers.figures import figure_record
from helpers.widgets import MAX_FRAMES, Explorer, Param, log_values, without_negative_zeros

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
LOGITS = np.array([2.0, 1.0, 0.5, 0.0, -1.0])


def max_weight(tau: float) -> str:
    p = np.exp((LOGITS - LOGITS.max()) / tau)
    return f"{p.max() / p.sum():.3f}"


def softmax_explorer(taus=(0.25, 0.5, 1.0, 2.0, 4.0), *, extra=(), live_controls=None, **kw):
    """A 5-bar softmax over τ; `extra` params reach update but change nothing drawn."""
    fig = Figure(figsize=(3.2, 1.6))
    ax = fig.add_subplot()
    bars = ax.bar(range(len(LOGITS)), np.zeros(len(LOGITS)))
    ax.set_ylim(0, 1)
    seen = []

    def update(tau, **others):
        seen.append({"tau": tau, **others})
        logits = others.get("logits", LOGITS)
        if isinstance(logits, str):  # as a reader types them into a Text widget
            logits = [float(x) for x in logits.strip("[] ").split(",")]
        z = np.asarray(logits, dtype=float)
        p = np.exp((z - z.max()) / tau)
        p /= p.sum()
        for bar, h in zip(bars, p, strict=False):
            bar.set_height(h)
        return f"τ = {tau:g}: max weight {p.max():.3f}"

    params = [Param("tau", list(taus), label="τ", value=taus[len(taus) // 2]), *extra]
    ex = Explorer(fig, update, params, dpi=50, live_controls=live_controls, **kw)
    ex.seen = seen
    return ex


class Tree(HTMLParser):
    """Start tags with their attributes, and the text of each script element."""

    def __init__(self, markup: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data

    def find(self, tag, **attrs):
        return [
            a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items())
        ]


def explorer_data(markup: str) -> dict:
    tree = Tree(markup)
    assert len(tree.find("script", type="application/json", **{"class": "explorer-data"})) == 1
    assert len(tree.scripts) == 1
    return json.loads(tree.scripts[0])


def png_chunks(data: bytes) -> list[str]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, pos = [], 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        chunks.append(data[pos + 4 : pos + 8].decode("ascii"))
        pos += 12 + length
    return chunks


# ------------------------------------------------------------------- the bundle


def test_mimebundle_has_text_html_and_widget_view():
    ex = softmax_explorer()
    bundle = ex._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", WIDGET_MIME}
    assert bundle[WIDGET_MIME] == {
        "version_major": 2,
        "version_minor": 0,
        "model_id": ex.widget.model_id,
    }
    assert isinstance(ex.widget, ipywidgets.VBox)
    assert bundle["text/plain"] == "Explorer: τ (5 values); static frames: 5 unique"


def test_display_shows_the_static_explorer_then_the_live_one():
    """Two outputs: a saved notebook reopened without its kernel (where the widget's
    model is gone) still shows the static explorer and the sentence asking to run it."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()
    ex = softmax_explorer()
    with capture_output() as captured:
        display(ex)
    static, live = (o.data for o in captured.outputs)
    assert static == {"text/plain": repr(ex), "text/html": ex.static_html()}
    assert live == {WIDGET_MIME: ex._repr_mimebundle_()[WIDGET_MIME], "text/html": ""}
    assert DisplayFormatter().format(ex) == ({}, {})  # IPython displays it itself


def test_a_session_that_shows_plain_text_only_gets_no_frames_and_no_widget():
    """The grader's kernel formats plain text only (scripts/grade.py): displayed there, an
    explorer shows one line of text, and renders no frame and builds no widget (a chapter
    with an explorer of 40 frames grades seconds faster)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    ex = softmax_explorer()
    drawn = []
    ex._draw_rgb = lambda: drawn.append(1)  # any frame rendered would be counted
    shell.display_formatter.active_types = ["text/plain"]
    try:
        with capture_output() as captured:
            display(ex)
    finally:
        shell.display_formatter.active_types = shell.display_formatter.format_types
    assert [o.data for o in captured.outputs] == [{"text/plain": "Explorer: τ (5 values)"}]
    assert not drawn and ex._widget is None and not ex._static


def test_static_view_asks_to_run_the_cell_and_the_live_view_hides_it():
    from helpers.widgets import DEAD_WIDGET_CSS, RUN_HINT

    ex = softmax_explorer()
    tree = Tree(ex.static_html())
    wrapper, root = tree.find("div")[:2]
    static_class = wrapper["class"]
    assert static_class.endswith("-static") and root["class"] == "explorer"
    assert RUN_HINT in ex.static_html() and "Run this cell" in RUN_HINT
    assert f"<style>{DEAD_WIDGET_CSS}</style>" in ex.static_html()
    style = ex.widget.children[-1]
    assert isinstance(style, ipywidgets.HTML)
    assert style.value == f"<style>.{static_class} {{ display: none !important; }}</style>"
    css = (Path(__file__).parent.parent / "book" / "_static" / "explorer.css").read_text()
    assert ".explorer-hint {\n  display: none;\n}" in css  # the site has no cell to run


def test_text_plain_names_every_parameter_and_live_control():
    extra = [Param("scaled", [True, False], labels=["on", "off"], label="scaling")]
    ex = softmax_explorer(extra=extra, live_controls={"logits": ipywidgets.Text("1, 2, 3, 4, 5")})
    assert repr(ex) == (
        "Explorer: τ (5 values) × scaling (2 values); live only: logits; static frames: 5 unique"
    )
    assert "0x" not in repr(ex)


# ----------------------------------------------------------------- static HTML


def test_static_html_has_one_image_controls_and_frame_data():
    extra = [Param("scaled", [True, False], labels=["on", "off"], label="scaling")]
    ex = softmax_explorer(extra=extra)
    markup = ex.static_html()
    tree = Tree(markup)
    (img,) = tree.find("img")
    (rng,) = tree.find("input", type="range")
    radios = tree.find("input", type="radio")
    assert (rng["min"], rng["max"], rng["value"]) == ("0", "4", "2")
    assert len(radios) == 2 and ["checked" in r for r in radios] == [True, False]
    assert len(radios[0]["name"]) > 0 and radios[0]["name"] == radios[1]["name"]
    assert len(tree.find("output")) == 1
    assert len(tree.find("div", **{"class": "explorer"})) == 1

    data = explorer_data(markup)
    assert len(data["index"]) == len(data["alt"]) == 5 * 2
    assert len(set(data["frames"])) == len(data["frames"])
    assert all(0 <= i < len(data["frames"]) for i in data["index"])
    assert [p["labels"] for p in data["params"]] == [["0.25", "0.5", "1", "2", "4"], ["on", "off"]]
    # The initial combination (τ = 1, scaling on) is flat index 2 * 2 + 0 in C order.
    assert img["src"] == data["frames"][data["index"][4]]
    assert img["alt"] == data["alt"][4] == f"τ = 1: max weight {max_weight(1.0)}"
    assert img["src"].startswith("data:image/png;base64,")


def test_frames_differ_when_the_figure_differs_and_dedupe_when_identical():
    extra = [Param("unused", ["a", "b", "c"])]  # reaches update, draws nothing
    ex = softmax_explorer(extra=extra)
    data = explorer_data(ex.static_html())
    assert len(data["index"]) == 15
    assert len(data["frames"]) == 5  # one per τ
    index = np.array(data["index"]).reshape(5, 3)
    assert (index == index[:, :1]).all()  # `unused` never changes the frame
    assert len(set(index[:, 0])) == 5  # every τ does
    # The alt text is per combination, not per frame.
    assert data["alt"][0] == data["alt"][1] == f"τ = 0.25: max weight {max_weight(0.25)}"


def test_saturated_temperatures_share_a_frame():
    ex = softmax_explorer(taus=(0.001, 0.002, 0.003, 1.0))
    data = explorer_data(ex.static_html())
    assert data["index"] == [0, 0, 0, 1]
    assert ex.static_stats()["frames"] == 2


def test_html_and_png_are_byte_identical_across_constructions():
    a, b = softmax_explorer(), softmax_explorer()
    assert a.static_html() == b.static_html()
    assert a.render_png(tau=3.0) == b.render_png(tau=3.0)
    assert a.render_png(tau=3.0) != a.render_png(tau=0.3)


def test_frames_are_palette_pngs_at_twice_the_resolution_with_only_their_record():
    ex = softmax_explorer()
    png = ex.render_png(tau=1.0)
    chunks = png_chunks(png)
    assert chunks[0] == "IHDR" and chunks[-1] == "IEND" and "PLTE" in chunks
    assert not {"tIME", "iTXt", "zTXt"} & set(chunks) and chunks.count("tEXt") == 1
    width, height, _bit_depth, colour_type = struct.unpack(">IIBB", png[16:26])
    assert (width, height, colour_type) == (320, 160, 3)  # 3.2 × 1.6 in at 2 × 50 dpi, palette
    # the one text chunk: the smallest font drawn (the default tick labels) and the width
    assert figure_record(png) == {"font_pt": 10.0, "width_in": 3.2, "dpi": 100.0}
    (img,) = Tree(ex.static_html()).find("img")
    assert (img["width"], img["height"]) == ("160", "80")  # shown at 50 CSS px per inch


def test_palette_frames_look_like_the_true_colour_figure_and_keep_a_colour_bar_smooth():
    """A frame of a line plot beside a heat map and its viridis colour bar, quantised to
    the palette, is within a fraction of a level of the true-colour drawing on average,
    and the colour bar keeps at least 150 distinct steps down its 300 pixels (the fast
    octree quantiser keeps about 40: bands a reader sees)."""
    import io

    import numpy as np
    from PIL import Image

    fig = Figure(figsize=(7.2, 3.2), layout="constrained")
    ax_line, ax_map = fig.subplots(1, 2)
    x = np.linspace(0, 10, 400)
    (line,) = ax_line.plot(x, np.sin(x))
    ax_line.set_xlabel("position")
    shown = ax_map.imshow(np.random.default_rng(0).random((32, 32)), cmap="viridis")
    bar = fig.colorbar(shown, ax=ax_map, label="weight")

    def update(f):
        line.set_ydata(np.sin(f * x))

    ex = Explorer(fig, update, [Param("f", [1.0, 2.0])])
    drawn = ex._draw_rgb()  # the true-colour picture, then the same as a static frame
    frame = Image.open(io.BytesIO(ex._palette_png(drawn))).convert("RGB")
    frame, true_colour = np.asarray(frame, dtype=int), np.asarray(drawn, dtype=int)
    assert frame.shape == true_colour.shape
    assert np.abs(frame - true_colour).mean() < 0.5
    # the colour bar's middle column, from its top to its bottom, in device pixels
    box = bar.ax.get_window_extent()
    height = frame.shape[0]
    column = frame[
        round(height - box.y1) + 2 : round(height - box.y0) - 2, round(box.x0 + box.x1) // 2
    ]
    assert len(column) >= 280
    steps = 1 + int((np.abs(np.diff(column, axis=0)).sum(axis=1) > 0).sum())
    assert steps >= 150, f"the colour bar shows {steps} steps down {len(column)} pixels"


def test_every_frame_records_its_own_smallest_text():
    fig = Figure(figsize=(4, 2))
    ax = fig.add_subplot()

    def update(size):
        ax.set_title("weights", fontsize=size)
        ax.tick_params(labelsize=12)
        ax.set_xlabel("" if size > 8 else "key", fontsize=size + 1)  # empty: not drawn

    ex = Explorer(fig, update, [Param("size", [5, 9, 11])], dpi=40, pixel_ratio=3)
    frames = [figure_record(f) for f in ex._render_static()[0]]
    assert [f["font_pt"] for f in frames] == [5.0, 9.0, 11.0]
    assert {(f["width_in"], f["dpi"]) for f in frames} == {(4.0, 120.0)}


def test_a_pixel_ratio_must_be_a_positive_integer():
    for bad in (0, 1.5, True, "2"):
        with pytest.raises(ValueError, match="pixel_ratio must be a positive integer"):
            softmax_explorer(pixel_ratio=bad)


def test_html_escapes_labels_and_descriptions():
    ex = softmax_explorer(description='bars </script><b>"x"</b> & more')
    markup = ex.static_html()
    assert markup.count("</script>") == 1
    assert "<b>" not in markup
    assert explorer_data(markup)["description"] == 'bars </script><b>"x"</b> & more'
    (div,) = Tree(markup).find("div", **{"class": "explorer"})
    assert div["aria-label"] == 'bars </script><b>"x"</b> & more'


def test_menu_control_for_many_non_numeric_values():
    extra = [Param("word", list("abcdef"))]
    markup = softmax_explorer(extra=extra).static_html()
    tree = Tree(markup)
    assert len(tree.find("select")) == 1
    assert [o["value"] for o in tree.find("option")] == [str(i) for i in range(6)]


def test_live_controls_initial_value_is_used_for_static_frames():
    text = ipywidgets.Text(value="0, 0, 0, 0, 0")
    ex = softmax_explorer(live_controls={"logits": text}, extra=())
    ex.widget  # noqa: B018
    text.value = "9, 0, 0, 0, 0"  # a reader's edit before the static view is made
    ex.seen.clear()
    ex.static_html()
    assert all(s["logits"] == "0, 0, 0, 0, 0" for s in ex.seen)
    assert ex.static_stats()["frames"] == 1  # equal logits: uniform at every τ


# --------------------------------------------------------------------- live view


def test_moving_the_slider_redraws_the_image_in_place():
    ex = softmax_explorer()
    box = ex.widget
    slider, image = ex.controls["tau"], ex.image
    assert isinstance(slider, ipywidgets.SelectionSlider)
    assert image in box.children and image.format == "png"
    assert (image.layout.width, image.layout.max_width) == ("160px", "100%")  # not stretched
    before, caption = image.value, ex._caption.value
    slider.value = 4.0
    assert image.value != before and image.value[:4] == b"\x89PNG"
    assert ex._caption.value == f"τ = 4: max weight {max_weight(4.0)}" != caption
    after = image.value
    slider.index = 0
    assert image.value not in (before, after)
    assert ex.seen[-1] == {"tau": 0.25}


def test_live_controls_reach_update_and_errors_show_in_the_caption():
    text = ipywidgets.Text(value="1, 0, 0, 0, 0")
    ex = softmax_explorer(live_controls={"logits": text})
    ex.widget  # noqa: B018
    assert ex.controls["logits"] is text and text in ex.widget.children
    before = ex.image.value
    text.value = "[5.0, 0, 0, 0, 0]"
    assert ex.seen[-1]["logits"] == "[5.0, 0, 0, 0, 0]" and ex.seen[-1]["tau"] == 1.0
    assert ex.image.value != before
    good = ex.image.value
    text.value = "not numbers"
    assert ex._caption.value.startswith("Cannot draw this: ValueError")
    assert ex.image.value == good  # the last good picture stays


def test_categorical_parameters_are_toggle_buttons_live():
    extra = [Param("scaled", [True, False], labels=["on", "off"])]
    ex = softmax_explorer(extra=extra)
    ex.widget  # noqa: B018
    buttons = ex.controls["scaled"]
    assert isinstance(buttons, ipywidgets.ToggleButtons)
    buttons.value = False
    assert ex.seen[-1] == {"tau": 1.0, "scaled": False}


def test_benchmark_callback_reports_and_restores():
    ex = softmax_explorer()
    result = ex.benchmark_callback(n=6)
    assert set(result) == {"n", "median_ms", "p10_ms", "p90_ms", "max_ms"}
    assert result["n"] == 6 and 0 < result["p10_ms"] <= result["median_ms"] <= result["max_ms"]
    assert ex.controls["tau"].value == 1.0
    assert len({s["tau"] for s in ex.seen[-7:]}) == 5  # every step was a real change


def test_pyplot_figures_are_closed_so_they_are_not_shown_twice():
    plt = pytest.importorskip("matplotlib.pyplot")
    fig = plt.figure()
    Explorer(fig, lambda tau: None, [Param("tau", [1, 2])])
    assert fig.number not in plt.get_fignums()


# ------------------------------------------------------------------ parameters


def test_log_values_has_exact_powers_and_rounded_labels():
    values = log_values(0.01, 100, per_decade=10)
    assert len(values) == 41
    assert {0.01, 0.1, 1.0, 10.0, 100.0} <= set(values)
    assert values == sorted(values)
    assert all(f"{v:.3g}" == f"{v:g}" for v in values)
    assert log_values(2, 1000, per_decade=1) == [10.0, 100.0, 1000.0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"start": 0, "stop": 1}, "start and stop"),
        ({"start": 2, "stop": 1}, "start and stop"),
        ({"start": 1, "stop": 10, "per_decade": 0}, "per_decade"),
    ],
)
def test_log_values_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        log_values(**kwargs)


def test_param_labels_index_and_control():
    p = Param("d_k", [2**k for k in range(1, 11)], fmt="{:d}", value=64)
    assert p.labels[0] == "2" and p.labels[-1] == "1024" and p.value == 64 and p.index == 5
    assert p.control == "slider" and len(p) == 10
    assert Param("h", [1, 2, 4, 8], control="buttons").control == "buttons"
    assert Param("x", np.array([0.5, 1.5])).values == (0.5, 1.5)  # plain Python floats
    assert type(Param("x", np.array([0.5, 1.5])).values[0]) is float


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("tau", []), {}, ValueError, "values of 'tau' must not be empty"),
        (("tau", [1, 2]), {"value": 3}, ValueError, "value 3 of 'tau'.*nearest is 2"),
        (("tau", [1, 2, 1]), {}, ValueError, "repeat"),
        (("tau", "abc"), {}, TypeError, "values of 'tau' must be a sequence"),
        (("tau", 3), {}, TypeError, "values of 'tau' must be a sequence"),
        (("2x", [1]), {}, ValueError, "name must be a Python identifier"),
        (("tau", [1.001, 1.002]), {}, ValueError, "labels of 'tau' are not distinct"),
        (("tau", [1, 2]), {"labels": ["a"]}, ValueError, "labels of 'tau' must be 2"),
        (("tau", [1, 2]), {"control": "knob"}, ValueError, "control of 'tau'"),
        (("tau", [1, 2]), {"fmt": 3}, TypeError, "fmt of 'tau'"),
    ],
)
def test_param_errors_name_the_argument(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        Param(*args, **kwargs)


def _fig():
    return Figure(figsize=(2, 1))


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: Explorer("fig", lambda a: None, [Param("a", [1])]), TypeError, "fig must be"),
        (lambda: Explorer(_fig(), None, [Param("a", [1])]), TypeError, "update must be callable"),
        (
            lambda: Explorer(_fig(), lambda a: None, [Param("a", [1]), Param("a", [2])]),
            ValueError,
            r"repeat the names \['a'\]",
        ),
        (
            lambda: Explorer(
                _fig(), lambda a: None, [Param("a", [1])], live_controls={"a": ipywidgets.Text()}
            ),
            ValueError,
            r"repeat the names \['a'\]",
        ),
        (
            lambda: Explorer(_fig(), lambda a, b: None, [Param("a", [1])], live_controls={"b": 3}),
            TypeError,
            r"live_controls\['b'\]",
        ),
        (lambda: Explorer(_fig(), lambda a: None, ["a"]), TypeError, "params must be a list"),
        (lambda: Explorer(_fig(), lambda a: None, [Param("a", [1])], dpi=0), ValueError, "dpi"),
        (lambda: Explorer(_fig(), lambda a: 3, [Param("a", [1])]), TypeError, "return a str"),
        (
            lambda: Explorer(
                _fig(),
                lambda a, b: None,
                [Param("a", range(MAX_FRAMES)), Param("b", [1, 2])],
            ),
            ValueError,
            f"{2 * MAX_FRAMES} static frames .* more than max_frames={MAX_FRAMES}",
        ),
    ],
)
def test_explorer_errors_name_the_argument(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_render_png_rejects_unknown_names():
    ex = softmax_explorer()
    with pytest.raises(ValueError, match=r"unknown parameter names \['beta'\]"):
        ex.render_png(beta=1)


def test_frame_limit_counts_the_product():
    assert math.prod([20, 20]) == MAX_FRAMES
    ex = Explorer(_fig(), lambda a, b: None, [Param("a", range(20)), Param("b", range(20))])
    assert len(explorer_data(ex.static_html())["index"]) == MAX_FRAMES


# ---------------------------------------------------------------- accessibility


def test_every_static_control_has_an_accessible_name():
    """The range and the menu carry the parameter's label as aria-label; a radio group is
    named by its legend and each radio by its text (checked in a browser by
    tests/site/test_site.py, with axe-core and the keyboard)."""
    extra = [
        Param("scaled", [True, False], labels=["on", "off"], label="scaling"),
        Param("word", list("abcdef"), label="word"),
    ]
    markup = softmax_explorer(extra=extra).static_html()
    tree = Tree(markup)
    (rng,) = tree.find("input", type="range")
    (menu,) = tree.find("select")
    assert rng["aria-label"] == "τ" and menu["aria-label"] == "word"
    assert rng["aria-valuetext"] == "1"
    assert '<legend class="explorer-label">scaling</legend>' in markup
    assert ">on</label>" in markup and ">off</label>" in markup
    (root,) = tree.find("div", **{"class": "explorer"})
    assert root["role"] == "group"


def test_every_live_control_is_labelled():
    """Live, each control shows its parameter's label (ipywidgets' description); a
    reader's own live control keeps the description it was given."""
    extra = [
        Param("scaled", [True, False], labels=["on", "off"], label="scaling"),
        Param("word", list("abcdef"), label="word"),
    ]
    logits = ipywidgets.Text(value="2, 1, 0.5, 0, -1", description="logits")
    ex = softmax_explorer(extra=extra, live_controls={"logits": logits})
    ex.widget  # noqa: B018  (builds the live view)
    descriptions = {name: control.description for name, control in ex.controls.items()}
    assert descriptions == {"tau": "τ", "scaled": "scaling", "word": "word", "logits": "logits"}


@pytest.mark.parametrize(
    "text, shown",
    [
        ("lowest -0.00 at its lowest", "lowest 0.00 at its lowest"),
        ("-0 and -0.0e+00", "0 and 0.0e+00"),
        ("(-0.000)", "(0.000)"),
        ("-0.01, -0.001, -10.00, x-0.0, v-0", "-0.01, -0.001, -10.00, x-0.0, v-0"),
    ],
)
def test_without_negative_zeros(text, shown):
    assert without_negative_zeros(text) == shown


def test_captions_never_show_a_negative_zero():
    fig = Figure(figsize=(2, 1))
    fig.add_subplot()

    def update(x):
        return f"the score falls to {x:.2f} at its lowest"  # -0.001 formats as -0.00

    ex = Explorer(fig, update, [Param("x", [-0.001, -0.5, 0.002])], dpi=30)
    alts = explorer_data(ex.static_html())["alt"]
    assert "the score falls to 0.00 at its lowest" in alts
    assert "the score falls to -0.50 at its lowest" in alts
    assert not any("-0.00" in a for a in alts)
    ex.widget  # noqa: B018
    ex.controls["x"].index = 0
    assert ex._caption.value == "the score falls to 0.00 at its lowest"


def test_the_run_hint_is_in_the_language_set():
    from helpers import i18n
    from helpers.widgets import RUN_HINT, RUN_HINTS

    ex = softmax_explorer()
    try:
        i18n.set_language("ko")
        korean = ex.static_html()
    finally:
        i18n.set_language("en")
    assert RUN_HINTS["ko"] in korean and RUN_HINT not in korean
    assert RUN_HINT in softmax_explorer().static_html()

"""scripts/execute_notebooks.py: a figure that strict nbval calls the same keeps its stored
bytes, and every changed output is described in words (no PNG base64 to read)."""

from __future__ import annotations

import base64
import copy
import importlib.util
import io

import nbformat
import numpy as np
from PIL import Image

from tests.conftest import ROOT

_spec = importlib.util.spec_from_file_location(
    "execute_notebooks", ROOT / "scripts" / "execute_notebooks.py"
)
execute_notebooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(execute_notebooks)


def _png(pixels: np.ndarray, **save) -> str:
    out = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8)).save(out, format="PNG", **save)
    return base64.b64encode(out.getvalue()).decode("ascii")


def _notebook(png: str, text: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    figure = nbformat.v4.new_code_cell("plt.show()", id="fig")
    figure.outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": png}, metadata={"width": 40})
    ]
    printed = nbformat.v4.new_code_cell("print(x)", id="txt")
    printed.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    nb.cells = [figure, printed]
    return nb


PICTURE = np.random.default_rng(0).integers(0, 200, size=(20, 30, 3))


def test_the_same_picture_in_other_bytes_keeps_the_stored_bytes():
    stored = _notebook(_png(PICTURE), "0.25\n")
    shaded = PICTURE.copy()
    shaded[3, 4, 0] += 1  # an edge pixel one level lighter: a last-bit change
    for png in (_png(PICTURE, compress_level=1), _png(shaded)):
        new = _notebook(png, "0.25\n")
        assert (
            new.cells[0].outputs[0].data["image/png"]
            != stored.cells[0].outputs[0].data["image/png"]
        )
        assert execute_notebooks.keep_same_pictures(stored, new) == 1
        assert new == stored
        assert execute_notebooks.describe_changes(stored, new) == []


def test_a_changed_picture_and_a_changed_text_are_described():
    stored = _notebook(_png(PICTURE), "mean 0.25\nmax 0.5\n")
    moved = PICTURE.copy()
    moved[0:2, 0:5] += 50  # ten pixels changed as a reader would see
    new = _notebook(_png(moved), "mean 0.26\nmax 0.5\n")
    before = copy.deepcopy(new)
    assert execute_notebooks.keep_same_pictures(stored, new) == 0
    assert new == before
    assert execute_notebooks.describe_changes(stored, new) == [
        "cell fig, output 1: figure changed: 10 of 600 pixels, 10 by more than 8 levels "
        "(largest 50 of 255)",
        "cell txt, output 1 (stream) changed:",
        "    -mean 0.25",
        "    +mean 0.26",
    ]

"""Re-execute chapter notebooks in place and store their outputs.

Usage: python scripts/execute_notebooks.py [notebooks/NN_topic.ipynb ...]
(no arguments: every notebook under notebooks/).

Each notebook runs in an empty temporary directory, as on Colab, so nothing can
depend on the working directory. Widget state is not stored: the static site
uses each explorer's own pre-rendered frames, never a saved widget state, and
loading the widget-state scripts would need the network. Execution timestamps
are dropped so that a re-run that changes nothing leaves the file unchanged.

A figure whose new picture strict nbval would call the same as the stored one (no pixel
off by more than 8 of 255 levels, tests/png_compare.py: a last-bit change of a plotted
value on another processor or BLAS kernel) keeps its stored bytes, so the diff shows only
figures that changed. After each notebook, every output that changed is listed by cell
id: a text's lines before and after, a figure's size and how many pixels moved by how
much (`describe_changes`), which a PNG's base64 in `git diff` cannot show.

The Korean notebooks are executed by the same `run` (scripts/ko_edition.py --execute,
which `make execute` runs after this), in Korean (ATTENTION_BOOK_LANGUAGE=ko).
"""

from __future__ import annotations

import base64
import copy
import difflib
import io
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import numpy as np
from nbclient import NotebookClient
from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.png_compare import LEVELS, same_picture  # noqa: E402 (what nbval calls the same)

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def coalesce_streams(outputs: list) -> list:
    """Merge consecutive outputs of the same stream (how they split depends on timing)."""
    merged: list = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (
            output.output_type == "stream"
            and previous is not None
            and previous.output_type == "stream"
            and previous.name == output.name
        ):
            previous.text += output.text
        else:
            merged.append(output)
    return merged


def clean(nb: nbformat.NotebookNode) -> None:
    """Drop what changes from run to run but carries no content.

    A live widget's view names a kernel-side model (a random id) that is gone once the
    kernel stops, so it is not stored: an explorer's widget output keeps only its empty
    text/html, and the static explorer output beside it is what a reader sees before
    running the cell, in Jupyter, Colab and on the site. Re-executing an unchanged
    notebook leaves the file unchanged.
    """
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = coalesce_streams(cell.get("outputs", []))
            for output in cell.outputs:
                output.get("metadata", {}).pop("execution", None)
                output.get("data", {}).pop(WIDGET_VIEW, None)


PNG = "image/png"


def _pairs(old: nbformat.NotebookNode, new: nbformat.NotebookNode):
    """(cell id, index, stored output or None, new output or None) of every code cell of
    ``new`` whose id the stored notebook has, output by output."""
    stored = {c.get("id"): c for c in old.cells if c.cell_type == "code"}
    for cell in new.cells:
        if cell.cell_type != "code" or cell.get("id") not in stored:
            continue
        before, after = stored[cell.id].get("outputs", []), cell.get("outputs", [])
        for i in range(max(len(before), len(after))):
            yield (
                cell.id,
                i,
                before[i] if i < len(before) else None,
                after[i] if i < len(after) else None,
            )


def keep_same_pictures(old: nbformat.NotebookNode, new: nbformat.NotebookNode) -> int:
    """Give each new figure that shows the same picture as the stored one (as strict nbval
    compares them) the stored bytes; return how many were kept."""
    kept = 0
    for _, _, before, after in _pairs(old, new):
        if before is None or after is None:
            continue
        a, b = before.get("data", {}).get(PNG), after.get("data", {}).get(PNG)
        if a is None or b is None or a == b:
            continue
        if same_picture(a, b) and before.get("metadata") == after.get("metadata"):
            after.data[PNG] = a
            kept += 1
    return kept


def _picture(png: str) -> np.ndarray | None:
    try:
        with Image.open(io.BytesIO(base64.b64decode(png))) as image:
            return np.asarray(image.convert("RGBA"), dtype=np.int16)
    except (OSError, ValueError):
        return None


def _text(output: nbformat.NotebookNode) -> str:
    if output.output_type == "stream":
        return output.text
    data = output.get("data", {})
    plain = [v for k, v in data.items() if k.endswith("text/plain")]  # glue's record too
    text = plain[0] if plain else data.get("text/html") or output.get("evalue", "")
    return text if isinstance(text, str) else "".join(text)


def describe_changes(old: nbformat.NotebookNode, new: nbformat.NotebookNode) -> list[str]:
    """Every output that differs from the stored one, in words a person can read."""
    lines = []
    for cell_id, i, before, after in _pairs(old, new):
        where = f"cell {cell_id}, output {i + 1}"
        if before is None or after is None:
            lines.append(f"{where}: {'added' if before is None else 'removed'}")
            continue
        if before == after:
            continue
        a, b = before.get("data", {}).get(PNG), after.get("data", {}).get(PNG)
        if a is not None and b is not None:
            pa, pb = _picture(a), _picture(b)
            if pa is None or pb is None or pa.shape != pb.shape:
                shapes = [None if p is None else p.shape[1::-1] for p in (pa, pb)]
                lines.append(f"{where}: figure changed size {shapes[0]} -> {shapes[1]}")
            else:
                moved = np.abs(pa - pb).max(axis=-1)
                lines.append(
                    f"{where}: figure changed: {int((moved > 0).sum())} of {moved.size} pixels, "
                    f"{int((moved > LEVELS).sum())} by more than {LEVELS} levels "
                    f"(largest {int(moved.max())} of 255)"
                )
            continue
        diff = difflib.unified_diff(
            _text(before).splitlines(), _text(after).splitlines(), lineterm="", n=0
        )
        shown = [d for d in diff if not d.startswith(("---", "+++", "@@"))]
        lines.append(f"{where} ({after.output_type}) changed:")
        lines += [f"    {d[:160]}" for d in shown[:12]] or [
            "    (its data or metadata, not its text)"
        ]
        if len(shown) > 12:
            lines.append(f"    ... and {len(shown) - 12} more lines")
    return lines


def run(nb: nbformat.NotebookNode, env: dict[str, str] | None = None) -> float:
    """Execute `nb` in place, from the top, in an empty temporary directory, and `clean` it;
    `env`: variables set for its kernel (the Korean notebooks, scripts/ko_edition.py:
    ATTENTION_BOOK_LANGUAGE=ko). Returns the seconds it took."""
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as cwd:
            NotebookClient(
                nb,
                timeout=600,
                kernel_name="python3",
                store_widget_state=False,
                record_timing=False,
                resources={"metadata": {"path": cwd}},
            ).execute()
        elapsed = time.perf_counter() - start
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    clean(nb)
    return elapsed


def execute(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    stored = copy.deepcopy(nb)
    elapsed = run(nb)
    kept = keep_same_pictures(stored, nb)
    nbformat.write(nb, path)
    changes = describe_changes(stored, nb)
    if kept:
        print(f"{path}: {kept} figure(s) kept as stored (the same picture within {LEVELS} levels)")
    n = sum(line.startswith("cell ") for line in changes)
    print(f"{path}: {n or 'no'} output(s) changed" + (":" if n else ""))
    for line in changes:
        print(f"  {line}")
    return elapsed


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        print(f"{path}: executed in {execute(path):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

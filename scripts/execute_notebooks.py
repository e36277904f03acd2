"""Re-execute chapter notebooks in place and store their outputs.

Usage: python scripts/execute_notebooks.py [notebooks/NN_topic.ipynb ...]
(no arguments: every notebook under notebooks/).

Each notebook runs in an empty temporary directory, as on Colab, so nothing can
depend on the working directory. Widget state is not stored: the static site
uses each explorer's own pre-rendered frames, never a saved widget state, and
loading the widget-state scripts would need the network. Execution timestamps
are dropped so that a re-run that changes nothing leaves the file unchanged.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


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


def execute(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
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
    clean(nb)
    nbformat.write(nb, path)
    return elapsed


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        print(f"{path}: executed in {execute(path):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

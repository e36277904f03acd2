"""Every figure a notebook shows, with what the legibility check needs of it.

A figure reaches the reader in one of two ways: a PNG output (a matplotlib figure, shown
by ``helpers.figures.figure_png``) or a frame of an explorer (``helpers.widgets``,
inside the ``text/html`` output, every frame in its JSON). Each must carry the record
of ``helpers.figures.figure_record``: its smallest font size and its width in inches.
``tests/test_figures.py`` checks that every one does; the browser tests
(``tests/site``) measure how wide each is shown and compute its smallest text from the
record.

Run as a script, it prints each figure's smallest text at the width the 686 px text
column gives it at 1366 wide (the browser tests measure the real width).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from helpers.figures import figure_record, text_px

ROOT = Path(__file__).resolve().parent.parent
COLUMN_PX = 686  # the text column at 1366 wide
_EXPLORER_DATA = re.compile(
    r'<script type="application/json" class="explorer-data">(.*?)</script>', re.S
)
_IMG_WIDTH = re.compile(r'<img class="explorer-image"[^>]* width="(\d+)"')


@dataclass
class FigureOutput:
    cell: int  # the code cell's index among the notebook's cells
    kind: str  # "png" or "explorer frame k"
    record: dict | None  # helpers.figures.figure_record, None when missing
    css_width: float | None  # natural width in CSS pixels (output metadata / img width)

    def text_px_in_column(self) -> float | None:
        if self.record is None or not self.css_width:
            return None
        shown = min(self.css_width, COLUMN_PX)
        return text_px(self.record["font_pt"], self.record["width_in"], shown)


def figure_outputs(path: Path) -> list[FigureOutput]:
    """Every PNG output and every explorer frame of the notebook at `path`."""
    nb = nbformat.read(path, as_version=4)
    found: list[FigureOutput] = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data:
                width = output.get("metadata", {}).get("image/png", {}).get("width")
                found.append(FigureOutput(i, "png", figure_record(data["image/png"]), width))
            markup = data.get("text/html", "")
            markup = "".join(markup) if isinstance(markup, list) else markup
            for blob in _EXPLORER_DATA.findall(markup):
                frames = json.loads(blob)["frames"]
                width = float(_IMG_WIDTH.search(markup).group(1))
                for k, uri in enumerate(frames):
                    png = uri.split(",", 1)[1]
                    found.append(FigureOutput(i, f"explorer frame {k}", figure_record(png), width))
    return found


def main(paths: list[str]) -> None:
    paths = paths or sorted(str(p) for p in (ROOT / "notebooks").glob("*.ipynb"))
    small, smallest = 0, None
    total = 0
    for path in paths:
        by_figure: dict[tuple[int, str], list[FigureOutput]] = {}
        for f in figure_outputs(Path(path)):
            by_figure.setdefault((f.cell, f.kind.split(" ")[0]), []).append(f)
        for (cell, kind), outs in by_figure.items():
            px = [o.text_px_in_column() for o in outs]
            worst = min((p for p in px if p is not None), default=None)
            rec = outs[0].record or {}
            total += 1
            if worst is None or worst < 9:
                small += 1
            if worst is not None:
                smallest = worst if smallest is None else min(smallest, worst)
            print(
                f"{Path(path).name[:2]} cell {cell:3d} {kind:8s} frames {len(outs):3d} "
                f"width {outs[0].css_width} px, {rec.get('width_in', 0):.2f} in, "
                f"smallest font {min((o.record or {}).get('font_pt', 0) for o in outs):g} pt: "
                f"{'missing' if worst is None else f'{worst:.1f} px'}"
            )
    print(f"{total} figures, {small} with text under 9 px; smallest {smallest:.1f} px")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Benchmark the explorable figure of chapter 1: a 5-bar softmax over temperature τ.

Prints the live callback time (control change -> update -> Agg draw -> PNG ->
Image.value; median and spread over many redraws) and the size of the static
view (unique frames, bytes per frame, bytes of HTML). Timings vary from machine
to machine, so they live here and never in a test or a notebook's compared output.

Usage: python bench/bench_explorer.py [--redraws N] [--html PATH]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from helpers.widgets import Explorer, Param, log_values

LOGITS = np.array([2.0, 1.0, 0.5, 0.0, -1.0])


def softmax_explorer(logits: np.ndarray = LOGITS, dpi: float = 100) -> Explorer:
    """The chapter-1 figure: softmax(z / τ) as bars, τ on a log slider."""
    fig = Figure(figsize=(6.4, 3.2), layout="constrained")
    ax = fig.add_subplot()
    positions = np.arange(len(logits))
    bars = ax.bar(positions, np.full(len(logits), 1 / len(logits)), color="C0")
    texts = [ax.text(x, 0, "", ha="center", va="bottom", fontsize=9) for x in positions]
    ax.set_xticks(positions, [f"$z_{i + 1} = {z:g}$" for i, z in enumerate(logits)])
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("softmax weight")
    ax.spines[["top", "right"]].set_visible(False)

    def update(tau: float) -> str:
        w = np.exp((logits - logits.max()) / tau)
        p = w / w.sum()
        for bar, text, h in zip(bars, texts, p, strict=True):
            bar.set_height(h)
            text.set_position((bar.get_x() + bar.get_width() / 2, h + 0.01))
            text.set_text(f"{h:.2f}")
        return f"τ = {tau:g}: weights " + ", ".join(f"{h:.2f}" for h in p)

    tau = Param("tau", log_values(0.01, 100, per_decade=10), label="τ", value=1.0)
    return Explorer(
        fig, update, [tau], dpi=dpi, description="Softmax weights of five logits at temperature τ"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redraws", type=int, default=200, help="live redraws to time")
    parser.add_argument("--html", type=Path, help="also write the static HTML here")
    args = parser.parse_args()

    t0 = time.perf_counter()
    explorer = softmax_explorer()
    stats = explorer.static_stats()
    build_s = time.perf_counter() - t0
    timing = explorer.benchmark_callback(n=args.redraws)

    print(f"explorer: {explorer!r}")
    print(f"static view built in {build_s:.2f} s")
    print(
        f"frames: {stats['frames']} unique of {stats['combinations']} combinations; "
        f"bytes per frame: median {stats['frame_bytes_median']}, "
        f"min {stats['frame_bytes_min']}, max {stats['frame_bytes_max']}; "
        f"text/html: {stats['html_bytes']} bytes"
    )
    print(
        f"live callback over {timing['n']} redraws: median {timing['median_ms']:.1f} ms "
        f"(p10 {timing['p10_ms']:.1f}, p90 {timing['p90_ms']:.1f}, max {timing['max_ms']:.1f})"
    )
    if args.html:
        args.html.write_text(explorer.static_html(), encoding="utf-8")
        print(f"wrote {args.html}")


if __name__ == "__main__":
    main()

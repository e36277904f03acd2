"""What the benchmark scripts share: timing and the description of the machine.

Benchmarks print times and ratios measured in one run; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable

import numpy as np
import torch


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Best wall-clock time of ``fn()`` in seconds over ``repeat`` runs (after a warm-up)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def parse_args(doc: str, default_repeat: int) -> argparse.Namespace:
    """The options every benchmark takes (`--repeat`, `--torch-threads`), applied to torch."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument(
        "--repeat", type=int, default=default_repeat, help="runs per row (best is kept)"
    )
    parser.add_argument("--torch-threads", type=int, default=None, help="torch.set_num_threads")
    args = parser.parse_args()
    if args.torch_threads is not None:
        torch.set_num_threads(args.torch_threads)
    return args


def environment(repeat: int) -> str:
    """One line naming the versions, threads and machine the numbers come from."""
    return (
        f"numpy {np.__version__}, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), Python {platform.python_version()}, "
        f"{platform.machine()}; best of {repeat}"
    )

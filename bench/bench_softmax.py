"""Benchmark: helpers.softmax functions against their PyTorch equivalents on CPU.

Run from the repository root::

    python bench/bench_softmax.py            # best of 20 runs per row
    python bench/bench_softmax.py --repeat 50 --torch-threads 1

Each row times one call on the same input (PyTorch gets a zero-copy view of the
NumPy array), keeps the best of ``--repeat`` runs after one warm-up call, and
prints the ratio helpers/torch measured in this run (> 1 means helpers is slower).
A benchmark, not a test: nothing here asserts on time. NumPy's ufuncs run on one
thread; PyTorch uses ``torch.get_num_threads()`` threads unless told otherwise.
"""

from __future__ import annotations

import numpy as np
import torch
from _common import best_of, environment, parse_args

from helpers.softmax import log_softmax, logsumexp, softmax, softmax_jacobian


def torch_jacobian_autograd(t: torch.Tensor) -> torch.Tensor:
    """Batched Jacobian by autograd: vmap over rows of jacrev(softmax)."""
    return torch.func.vmap(torch.func.jacrev(lambda row: torch.softmax(row, -1)))(t)


def torch_jacobian_formula(t: torch.Tensor) -> torch.Tensor:
    """Batched Jacobian by the closed form diag(p) - p pᵀ."""
    p = torch.softmax(t, -1)  # (b, n)
    return torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)  # (b, n, n)


def rows(
    repeat: int,
) -> list[tuple[str, tuple[int, ...], str, float, float]]:
    rng = np.random.default_rng(0)
    out = []

    def add(name, x, ours, theirs):
        t = torch.from_numpy(x)
        out.append(
            (
                name,
                x.shape,
                str(x.dtype),
                best_of(lambda: ours(x), repeat),
                best_of(lambda: theirs(t), repeat),
            )
        )

    for dtype in (np.float32, np.float64, np.float16):
        x = rng.normal(scale=3.0, size=(4096, 1024)).astype(dtype)
        add("softmax", x, softmax, lambda t: torch.softmax(t, -1))
        add(
            "softmax, τ = 0.5",
            x,
            lambda a: softmax(a, temperature=0.5),
            lambda t: torch.softmax(t / 0.5, -1),
        )
        add("log_softmax", x, log_softmax, lambda t: torch.log_softmax(t, -1))
        add("logsumexp", x, logsumexp, lambda t: torch.logsumexp(t, -1))
    for dtype in (np.float32, np.float64):
        x = rng.normal(scale=3.0, size=(256, 128)).astype(dtype)
        add("softmax_jacobian vs autograd", x, softmax_jacobian, torch_jacobian_autograd)
        add("softmax_jacobian vs formula", x, softmax_jacobian, torch_jacobian_formula)
    return out


def main() -> None:
    args = parse_args(__doc__, default_repeat=20)
    print(environment(args.repeat))
    print("ratio = helpers / torch (> 1: helpers is slower)")
    header = (
        f"{'function':<30} {'shape':<13} {'dtype':<8} {'helpers':>10} {'torch':>10} {'ratio':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, shape, dtype, ours, theirs in rows(args.repeat):
        shape_text = "x".join(map(str, shape))
        print(
            f"{name:<30} {shape_text:<13} {dtype:<8} {ours * 1e3:>8.2f}ms "
            f"{theirs * 1e3:>8.2f}ms {ours / theirs:>7.2f}"
        )


if __name__ == "__main__":
    main()

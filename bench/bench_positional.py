"""Benchmark: helpers.positional (RoPE, sinusoidal encoding, ALiBi bias) on the CPU.

Run from the repository root::

    python bench/bench_positional.py            # best of 10 runs per row
    python bench/bench_positional.py --repeat 20 --torch-threads 1

Each row times one helper against two references, measured in the same run:

* PyTorch doing the same work the way model code does it (RoPE: Hugging Face's
  ``x * cos + rotate_half(x) * sin`` with the cosines and sines built from the
  positions in the call, as ``helpers.rope`` builds them; ALiBi: slopes times
  ``-|i - j|`` by broadcasting; the encoding: ``sin`` and ``cos`` of the angles);
* the NumPy floor: the least NumPy work that produces the same array (RoPE: the two
  multiply-adds with cosines and sines computed beforehand, outside the timing, so it is
  a floor that ``helpers.rope``, which computes them, cannot reach).

Ratios > 1 mean helpers is slower. A benchmark, not a test: nothing here asserts on time.
"""

from __future__ import annotations

import numpy as np
import torch
from _common import best_of, environment, parse_args

from helpers.positional import alibi_bias, alibi_slopes, rope, sinusoidal_encoding

# RoPE on queries of shape (batch, heads, n, d_head)
ROPE_SIZES = [(4, 8, 512, 64), (1, 32, 2048, 128)]


def torch_rope_half(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Hugging Face Llama's rotation, cosines and sines built in the call."""
    d = x.shape[-1]
    inv_freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    angles = positions[:, None].to(x.dtype) * inv_freq  # (n, d/2)
    emb = torch.cat([angles, angles], dim=-1)
    half = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], dim=-1)
    return x * emb.cos() + half * emb.sin()


def numpy_floor_half(x: np.ndarray, c: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The rotation alone, with cosines and sines (n, d/2) given."""
    d = x.shape[-1]
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)


def time_rope(x: np.ndarray, repeat: int) -> tuple[float, float, float, float]:
    """``(helpers half, helpers interleaved, torch half, NumPy floor)`` seconds for ``x``."""
    n, d = x.shape[-2:]
    positions = np.arange(n)
    angles = positions[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)
    c, s = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)
    xt, pt = torch.from_numpy(x), torch.from_numpy(positions)
    ours = rope(x, positions, layout="half")
    assert np.allclose(ours, torch_rope_half(xt, pt).numpy(), atol=2e-3)  # float32 angles
    assert np.allclose(ours, numpy_floor_half(x, c, s), atol=1e-5)
    with torch.no_grad():
        t_torch = best_of(lambda: torch_rope_half(xt, pt), repeat)
    return (
        best_of(lambda: rope(x, positions, layout="half"), repeat),
        best_of(lambda: rope(x, positions), repeat),
        t_torch,
        best_of(lambda: numpy_floor_half(x, c, s), repeat),
    )


def rope_rows(repeat: int) -> list[tuple[str, str, str, float, float, float]]:
    rng = np.random.default_rng(0)
    out = []
    for dtype in (np.float32, np.float64):
        for shape in ROPE_SIZES:
            x = rng.standard_normal(shape).astype(dtype)
            t_half, t_inter, t_torch, t_floor = time_rope(x, repeat)
            name = np.dtype(dtype).name
            out.append(("rope, half", f"{shape}", name, t_half, t_torch, t_floor))
            out.append(("rope, interleaved", f"{shape}", name, t_inter, t_torch, t_floor))
    return out


def other_rows(repeat: int) -> list[tuple[str, str, str, float, float, float]]:
    out = []
    n, d = 8192, 512
    angles = np.arange(n)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)
    angles_t = torch.from_numpy(angles)

    def floor_pe() -> np.ndarray:
        pe = np.empty((n, d))
        pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
        return pe

    def torch_pe() -> torch.Tensor:
        return torch.stack([angles_t.sin(), angles_t.cos()], dim=-1).reshape(n, d)

    assert np.allclose(sinusoidal_encoding(n, d), torch_pe().numpy())
    out.append(
        (
            "sinusoidal_encoding",
            f"({n}, {d})",
            "float64",
            best_of(lambda: sinusoidal_encoding(n, d), repeat),
            best_of(torch_pe, repeat),
            best_of(floor_pe, repeat),
        )
    )
    h, n_a = 16, 2048
    slopes = alibi_slopes(h)
    slopes_t = torch.from_numpy(slopes)
    pos = np.arange(n_a)
    pos_t = torch.arange(n_a)

    def torch_alibi() -> torch.Tensor:
        return slopes_t[:, None, None] * -(pos_t[:, None] - pos_t[None, :]).abs()

    def floor_alibi() -> np.ndarray:
        return slopes[:, None, None] * -np.abs(pos[:, None] - pos[None, :])

    assert np.array_equal(alibi_bias(h, n_a), torch_alibi().numpy())
    out.append(
        (
            "alibi_bias",
            f"({h}, {n_a}, {n_a})",
            "float64",
            best_of(lambda: alibi_bias(h, n_a), repeat),
            best_of(torch_alibi, repeat),
            best_of(floor_alibi, repeat),
        )
    )
    return out


def main() -> None:
    args = parse_args(__doc__, default_repeat=10)
    print(environment(args.repeat))
    header = f"{'helper':22s} {'size':22s} {'dtype':8s} {'helpers':>9s} {'torch':>9s} {'floor':>9s}"
    print(header + f" {'/torch':>7s} {'/floor':>7s}")
    for what, size, dtype, t_ours, t_torch, t_floor in rope_rows(args.repeat) + other_rows(
        args.repeat
    ):
        print(
            f"{what:22s} {size:22s} {dtype:8s} {t_ours * 1e3:7.2f}ms {t_torch * 1e3:7.2f}ms "
            f"{t_floor * 1e3:7.2f}ms {t_ours / t_torch:7.2f} {t_ours / t_floor:7.2f}"
        )


if __name__ == "__main__":
    main()

"""Benchmark: the cost of attention (chapter 5), every figure from one run.

Run from the repository root::

    python bench/bench_cost.py                 # best of 7 runs per row
    python bench/bench_cost.py --repeat 15 --torch-threads 2

Rows:

* ``exact attention, n = 4096, d = 64, float64`` (self-attention, no mask):
  ``helpers.flash_attention`` against PyTorch's ``scaled_dot_product_attention`` with
  inputs of shape (1, 1, n, d), which selects its fused (flash) CPU kernel, against
  PyTorch's math backend (``sdpa_kernel(SDPBackend.MATH)``, which forms the weights),
  against ``flash_attention`` restricted to one thread (its default shares the query
  blocks between two), against chapter 2's ``helpers.scaled_dot_product_attention``
  (which returns the weights), and against the *plain NumPy* exact form
  (``S = Q Kᵀ/√d``, a max-shifted softmax, ``A V``, five lines). Ratios are
  other / flash: > 1 means flash is faster.
* ``memory``: tracemalloc's peak while ``flash_attention`` runs at n = 16384, d = 64,
  float64 (everything it allocates, the output included), against the 2 GiB that the
  weights alone would take.
* ``linear attention``: ``linear_attention`` (elu + 1) against exact attention
  (``flash_attention``, the fastest exact form here, and the only one that does not
  need the 2 GiB of weights) at n = 16384, d = 64, float64, without and with a causal
  mask.
* ``KV cache``: generating 1000 tokens through a small attention-only decoder
  (``helpers.attention_decoder``: 2 layers, d_model = 64, 4 heads), one token at a
  time, with a ``KVCache`` per layer against recomputing the whole prefix at every step
  (the output for the last token is the same; the test suite checks that).

Each row keeps the best of ``--repeat`` runs after one warm-up call (the recomputing
decoder, which takes seconds, runs twice). A benchmark, not a test: nothing here
asserts on time. Timings taken while other programs run are noisy.
"""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import torch
import torch.nn.functional as F
from _common import best_of, environment, parse_args
from torch.nn.attention import SDPBackend, sdpa_kernel

import helpers.flash
from helpers import (
    KVCache,
    attention_decoder,
    flash_attention,
    init_attention_decoder,
    linear_attention,
    scaled_dot_product_attention,
)

N, D = 4096, 64
N_LONG = 16384
DECODE = dict(num_layers=2, d_model=64, num_heads=4, tokens=1000)


def plain_numpy_attention(Q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Exact attention as the formula reads: the full weights, a max-shifted softmax."""
    S = Q @ K.T / np.sqrt(Q.shape[-1])
    S -= S.max(axis=-1, keepdims=True)
    A = np.exp(S)
    A /= A.sum(axis=-1, keepdims=True)
    return A @ V


def pause() -> None:
    """Let the idle threads of the previous library stop spinning (OpenMP, OpenBLAS)."""
    time.sleep(1.0)


def exact_rows(repeat: int) -> None:
    rng = np.random.default_rng(0)
    Q, K, V = (rng.normal(size=(N, D)) for _ in range(3))
    # Interleave NumPy and PyTorch in the same run; the best of each is kept.
    ours = best_of(lambda: flash_attention(Q, K, V), repeat)
    threads, helpers.flash._MAX_THREADS = helpers.flash._MAX_THREADS, 1
    one_thread = best_of(lambda: flash_attention(Q, K, V), repeat)
    helpers.flash._MAX_THREADS = threads
    chapter2 = best_of(lambda: scaled_dot_product_attention(Q, K, V), repeat)
    plain = best_of(lambda: plain_numpy_attention(Q, K, V), repeat)
    pause()
    q, k, v = (torch.from_numpy(x)[None, None] for x in (Q, K, V))  # (1, 1, n, d)
    fused = best_of(lambda: F.scaled_dot_product_attention(q, k, v), repeat)

    def math_backend() -> torch.Tensor:
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v)

    math = best_of(math_backend, repeat)
    pause()
    ours = min(ours, best_of(lambda: flash_attention(Q, K, V), repeat))  # after torch too
    out, _ = flash_attention(Q, K, V)
    err = np.abs(out - F.scaled_dot_product_attention(q, k, v)[0, 0].numpy()).max()

    print(f"\nexact attention, n = {N}, d = {D}, float64 (ratio = other / flash_attention)")
    rows = [
        ("helpers.flash_attention", ours),
        ("helpers.flash_attention, one thread", one_thread),
        ("torch SDPA, default (fused)", fused),
        ("torch SDPA, math backend", math),
        ("helpers.scaled_dot_product_attention", chapter2),
        ("plain NumPy (full weights)", plain),
    ]
    for name, t in rows:
        print(f"  {name:38s} {t * 1e3:8.1f} ms   ratio {t / ours:5.2f}")
    print(f"  max |flash - torch| = {err:.1e}")


def memory_row() -> None:
    rng = np.random.default_rng(1)
    Q, K, V = (rng.normal(size=(N_LONG, D)) for _ in range(3))
    tracemalloc.start()
    try:
        flash_attention(Q, K, V)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    weights = N_LONG * N_LONG * 8
    print(f"\nmemory, n = {N_LONG}, d = {D}, float64")
    print(f"  flash_attention tracemalloc peak      {peak / 2**20:8.1f} MiB")
    print(f"  the weights alone (n² float64)        {weights / 2**20:8.1f} MiB")
    print(f"  ratio                                 {weights / peak:8.0f}")


def linear_rows(repeat: int) -> None:
    rng = np.random.default_rng(2)
    Q, K, V = (rng.normal(size=(N_LONG, D)) for _ in range(3))
    print(f"\nlinear against exact attention, n = {N_LONG}, d = {D}, float64")
    for causal in (False, True):
        lin = best_of(lambda c=causal: linear_attention(Q, K, V, causal=c), repeat)
        exact = best_of(lambda c=causal: flash_attention(Q, K, V, causal=c), max(1, repeat // 3))
        label = "causal" if causal else "full"
        print(
            f"  {label:6s} linear_attention {lin * 1e3:8.1f} ms, flash_attention "
            f"{exact * 1e3:8.1f} ms, ratio {exact / lin:6.1f}"
        )


def decoding_row() -> None:
    L, d_model, h, T = (DECODE[k] for k in ("num_layers", "d_model", "num_heads", "tokens"))
    rng = np.random.default_rng(3)
    layers = init_attention_decoder(L, d_model, h, rng=rng)
    X = rng.normal(size=(T, d_model))

    def cached() -> np.ndarray:
        caches = [KVCache(capacity=T) for _ in layers]
        return np.concatenate(
            [attention_decoder(layers, X[t : t + 1], h, caches=caches) for t in range(T)]
        )

    def recompute() -> np.ndarray:
        return np.concatenate([attention_decoder(layers, X[: t + 1], h)[-1:] for t in range(T)])

    with_cache = best_of(cached, 3)
    start = time.perf_counter()
    slow = recompute()
    without = time.perf_counter() - start
    err = np.abs(slow - cached()).max()
    print(f"\nKV cache: {T} tokens, {L} layers, d_model = {d_model}, {h} heads, float64")
    print(f"  with a KVCache per layer              {with_cache * 1e3:8.1f} ms")
    print(f"  recomputing the prefix at every step  {without * 1e3:8.1f} ms (one run)")
    print(f"  ratio                                 {without / with_cache:8.1f}")
    print(f"  max |cached - recomputed| = {err:.1e}")


def main() -> None:
    args = parse_args(__doc__, default_repeat=7)
    print(environment(args.repeat))
    exact_rows(args.repeat)
    memory_row()
    linear_rows(args.repeat)
    decoding_row()


if __name__ == "__main__":
    main()

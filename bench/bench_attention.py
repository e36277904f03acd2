"""Benchmark: helpers.scaled_dot_product_attention against PyTorch's SDPA on the CPU.

Run from the repository root::

    python bench/bench_attention.py              # n = 256 ... 4096, d = 64
    python bench/bench_attention.py --repeat 20 --sizes 1024 4096

Self-attention without a mask: random Q, K, V of shape (n, d) with d = 64, in
float64 and float32. Every timing is the best of ``--repeat`` calls after one warm-up,
all measured in this one run, and so is the reference throughput: a plain
2048 x 2048 NumPy matrix product ``A @ B`` (2 · 2048³ flops) in each dtype.

PyTorch is timed twice, because its SDPA picks a different algorithm by input shape:

* ``torch fused``: inputs of shape (1, 1, n, d) select the fused (flash) CPU kernel,
  which never forms the n x n weights and returns only the output;
* ``torch math``: the math backend (``sdpa_kernel(SDPBackend.MATH)``), which forms
  the weights as helpers does. ``helpers`` always returns the full (n, n) weights too,
  so this is the like-for-like comparison.

Ratios are torch_time / helpers_time: > 1 means helpers is faster. Effective
throughput counts the 4 n² d flops of the two matrix products (Q Kᵀ and A V).
A benchmark, not a test: nothing here asserts on time. NumPy's BLAS threads are
reported as found and never changed (nor are OPENBLAS_* variables); PyTorch is set to
use one thread per available core.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import torch
import torch.nn.functional as F
from _common import best_of
from torch.nn.attention import SDPBackend, sdpa_kernel

from helpers.attention import scaled_dot_product_attention

D = 64
SIZES = (256, 512, 1024, 2048, 4096)
MATMUL_N = 2048


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def numpy_blas_summary() -> str:
    """Which BLAS NumPy uses and with how many threads, without changing anything."""
    try:
        from threadpoolctl import threadpool_info  # optional

        pools = [
            f"{p.get('internal_api')} {p.get('version')} ({p.get('num_threads')} threads, "
            f"{p.get('threading_layer', '?')} threading, {p.get('architecture', '?')})"
            for p in threadpool_info()
            if p.get("user_api") == "blas"
        ]
        if pools:
            return "; ".join(pools) + " [threadpoolctl]"
    except ImportError:
        pass
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        config = " ".join(str(blas.get("openblas configuration", "")).split())
        text = f"{blas.get('name')} {blas.get('version')} {config}".strip()
    except Exception as err:  # the config layout differs between NumPy versions
        text = f"unknown ({type(err).__name__})"
    return text + " [numpy.show_config; threadpoolctl not installed, thread count not known]"


def threading_environment() -> str:
    names = (
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OPENBLAS_CORETYPE",
        "OPENBLAS_L2_SIZE",
    )
    found = [f"{k}={os.environ[k]}" for k in names if k in os.environ]
    return ", ".join(found) if found else "none of " + ", ".join(names) + " set"


def matmul_gflops(dtype: type, repeat: int) -> float:
    rng = np.random.default_rng(0)
    A, B = (rng.normal(size=(MATMUL_N, MATMUL_N)).astype(dtype) for _ in range(2))
    return 2 * MATMUL_N**3 / best_of(lambda: A @ B, repeat) / 1e9


def inputs(n: int, dtype: type) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    Q, K, V = (rng.normal(size=(n, D)).astype(dtype) for _ in range(3))
    return Q, K, V


def time_helpers(n: int, dtype: type, repeat: int) -> float:
    Q, K, V = inputs(n, dtype)
    return best_of(lambda: scaled_dot_product_attention(Q, K, V), repeat)


def time_torch(n: int, dtype: type, repeat: int) -> tuple[float, float]:
    """Seconds for (torch fused, torch math) on the same inputs as :func:`time_helpers`."""
    q, k, v = (torch.from_numpy(a)[None, None] for a in inputs(n, dtype))  # (1, 1, n, D)
    fused = best_of(lambda: F.scaled_dot_product_attention(q, k, v), repeat)

    def math_backend() -> torch.Tensor:
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v)

    return fused, best_of(math_backend, repeat)


def pause() -> None:
    """Let the idle threads of the previous library stop spinning (OpenMP, OpenBLAS)."""
    time.sleep(1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="runs per timing (best is kept)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="values of n")
    args = parser.parse_args()
    cores = available_cores()
    torch.set_num_threads(cores)

    print(
        f"numpy {np.__version__}, torch {torch.__version__}, Python "
        f"{platform.python_version()}, {platform.machine()}, {cores} cores available"
    )
    print(f"numpy BLAS: {numpy_blas_summary()}")
    print(f"torch: {torch.get_num_threads()} intra-op threads; numpy's own ufuncs: 1 thread")
    print(f"threading variables (read, not changed): {threading_environment()}")
    print(f"self-attention, no mask, d = {D}; best of {args.repeat}; ratio = torch / helpers")

    # NumPy (OpenBLAS) first, then PyTorch (OpenMP): on a machine with few cores,
    # interleaving them lets one library's spinning idle threads slow the other down.
    dtypes = (np.float64, np.float32)
    peak = {dt: matmul_gflops(dt, args.repeat) for dt in dtypes}
    ours = {(dt, n): time_helpers(n, dt, args.repeat) for dt in dtypes for n in args.sizes}
    pause()
    theirs = {(dt, n): time_torch(n, dt, args.repeat) for dt in dtypes for n in args.sizes}

    for dtype in dtypes:
        print()
        print(
            f"{np.dtype(dtype).name}: numpy {MATMUL_N}x{MATMUL_N} matmul {peak[dtype]:.1f} GFLOP/s"
        )
        header = (
            f"{'n':>5} {'helpers':>10} {'torch fused':>12} {'torch math':>11} "
            f"{'fused/ours':>10} {'math/ours':>10} {'GFLOP/s':>8} {'of matmul':>9}"
        )
        print(header)
        print("-" * len(header))
        for n in args.sizes:
            t, (fused, math) = ours[dtype, n], theirs[dtype, n]
            gflops = 4 * n * n * D / t / 1e9
            print(
                f"{n:>5} {t * 1e3:>8.2f}ms {fused * 1e3:>10.2f}ms {math * 1e3:>9.2f}ms "
                f"{fused / t:>10.2f} {math / t:>10.2f} {gflops:>8.1f} "
                f"{gflops / peak[dtype]:>8.0%}"
            )


if __name__ == "__main__":
    main()

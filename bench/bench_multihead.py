"""Benchmark: helpers.multi_head_attention against torch.nn.MultiheadAttention on CPU.

Run from the repository root::

    python bench/bench_multihead.py            # best of 10 runs per row
    python bench/bench_multihead.py --repeat 20 --torch-threads 1

Both sides compute self-attention with the same weights (``torch.nn.MultiheadAttention``
in eval mode under ``torch.no_grad()``, ``batch_first=True``, biases on). Each row
keeps the best of ``--repeat`` runs after one warm-up call and prints the ratio
helpers/torch measured in this run (> 1 means helpers is slower). PyTorch is timed
twice: returning the per-head weights as helpers does (``need_weights=True,
average_attn_weights=False``), and without weights (``need_weights=False``), which lets
it use its fused kernels. The last rows time the backward pass: helpers'
``multi_head_attention_backward`` (which recomputes the forward pass) against a
forward and backward pass through PyTorch's autograd.

A benchmark, not a test: nothing here asserts on time. NumPy's matrix products use
the threads of its BLAS; PyTorch uses ``torch.get_num_threads()`` threads.
"""

from __future__ import annotations

import numpy as np
import torch
from _common import best_of, environment, parse_args

from helpers.multihead import (
    init_mha_params,
    multi_head_attention,
    multi_head_attention_backward,
)

# (batch, n, d_model, num_heads)
SIZES = [(4, 512, 512, 8), (1, 2048, 512, 8), (16, 128, 768, 12)]


def torch_module(params: dict[str, np.ndarray], num_heads: int) -> torch.nn.MultiheadAttention:
    """The same layer in PyTorch; its weights act as ``x @ W.T``, so each is transposed."""
    d_model = params["W_Q"].shape[0]
    dtype = torch.from_numpy(params["W_Q"]).dtype
    module = torch.nn.MultiheadAttention(d_model, num_heads, batch_first=True, dtype=dtype)
    with torch.no_grad():
        packed = np.concatenate([params[k].T for k in ("W_Q", "W_K", "W_V")])
        module.in_proj_weight.copy_(torch.from_numpy(packed))
        module.in_proj_bias.copy_(
            torch.from_numpy(np.concatenate([params[k] for k in ("b_Q", "b_K", "b_V")]))
        )
        module.out_proj.weight.copy_(torch.from_numpy(params["W_O"].T))
        module.out_proj.bias.copy_(torch.from_numpy(params["b_O"]))
    return module.eval()


def rows(repeat: int) -> list[tuple[str, str, str, float, float, float]]:
    """``(what, size, dtype, helpers s, torch with weights s, torch without weights s)``."""
    rng = np.random.default_rng(0)
    out = []
    for dtype in (np.float32, np.float64):
        for batch, n, d_model, h in SIZES:
            params = init_mha_params(d_model, rng=rng, dtype=dtype)
            for name in ("b_Q", "b_K", "b_V", "b_O"):
                params[name] = rng.normal(scale=0.1, size=d_model).astype(dtype)
            X = rng.normal(size=(batch, n, d_model)).astype(dtype)
            module = torch_module(params, h)
            t = torch.from_numpy(X)
            size = f"{batch}x{n}x{d_model}, h={h}"

            def ours(X=X, params=params, h=h):
                return multi_head_attention(X, X, num_heads=h, **params)

            def theirs(need_weights, t=t, module=module):
                with torch.no_grad():
                    return module(t, t, t, need_weights=need_weights, average_attn_weights=False)

            out.append(
                (
                    "forward",
                    size,
                    np.dtype(dtype).name,
                    best_of(ours, repeat),
                    best_of(lambda theirs=theirs: theirs(True), repeat),
                    best_of(lambda theirs=theirs: theirs(False), repeat),
                )
            )
        batch, n, d_model, h = SIZES[0]
        params = init_mha_params(d_model, rng=rng, dtype=dtype)
        X = rng.normal(size=(batch, n, d_model)).astype(dtype)
        G = rng.normal(size=X.shape).astype(dtype)
        module = torch_module(params, h)

        def ours_backward(X=X, G=G, params=params, h=h):
            return multi_head_attention_backward(X, X, num_heads=h, grad_output=G, **params)

        def theirs_backward(need_weights, X=X, G=G, module=module):
            t = torch.from_numpy(X).requires_grad_()
            module.zero_grad(set_to_none=True)
            y, _ = module(t, t, t, need_weights=need_weights, average_attn_weights=False)
            y.backward(torch.from_numpy(G))

        out.append(
            (
                "backward (torch: fwd+bwd)",
                f"{batch}x{n}x{d_model}, h={h}",
                np.dtype(dtype).name,
                best_of(ours_backward, repeat),
                best_of(lambda f=theirs_backward: f(True), repeat),
                best_of(lambda f=theirs_backward: f(False), repeat),
            )
        )
    return out


def main() -> None:
    args = parse_args(__doc__, default_repeat=10)
    print(environment(args.repeat))
    print("ratio = helpers / torch; torch 'weights' returns per-head weights as helpers does")
    header = (
        f"{'pass':<26} {'batch x n x d_model':<22} {'dtype':<8} {'helpers':>10} "
        f"{'torch, weights':>15} {'ratio':>6} {'torch, none':>12} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    for what, size, dtype, ours, with_w, without_w in rows(args.repeat):
        print(
            f"{what:<26} {size:<22} {dtype:<8} {ours * 1e3:>8.1f}ms {with_w * 1e3:>13.1f}ms "
            f"{ours / with_w:>6.2f} {without_w * 1e3:>10.1f}ms {ours / without_w:>6.2f}"
        )


if __name__ == "__main__":
    main()

"""Benchmark: one training step of chapter 8's attention-only model, NumPy against PyTorch.

Run from the repository root::

    python bench/bench_circuits.py            # best of 20 runs per row
    python bench/bench_circuits.py --repeat 50 --torch-threads 1

One step at the chapter's size (vocabulary 48, d_model 24, 3 heads, 2 layers, 24
positions, batch 32, float64): ``helpers.attention_only_forward``, the next-token
cross-entropy, ``helpers.attention_only_backward`` and ``helpers.Adam``, against the same
model written in PyTorch (autograd, ``torch.optim.Adam``). Prints the times and their
ratio measured in this run (> 1 means helpers is slower). A benchmark, not a test:
nothing here asserts on time. Timings taken while other programs run are noisy.
"""

from __future__ import annotations

import numpy as np
import torch
from _common import best_of, parse_args

import helpers

V, D, H, L, N, B = 48, 24, 3, 2, 24, 32


def numpy_step(params, opt, tokens):
    logits, cache = helpers.attention_only_forward(tokens, params, num_heads=H)
    _, grad = helpers.cross_entropy(logits[:, :-1].reshape(-1, V), tokens[:, 1:].ravel())
    grad_logits = np.zeros_like(logits)
    grad_logits[:, :-1] = grad.reshape(B, -1, V)
    opt.step(helpers.attention_only_backward(grad_logits, cache))


def torch_step(T, opt, tokens):
    t = torch.as_tensor(tokens)
    X = T["W_E"][t] + T["W_pos"][:N]
    mask = torch.ones(N, N, dtype=torch.bool).tril()
    for layer in range(L):
        Q, K, Vv = (
            (X @ T[f"{k}{layer}"]).view(B, N, H, D // H).transpose(1, 2)
            for k in ("W_Q", "W_K", "W_V")
        )
        Z = torch.nn.functional.scaled_dot_product_attention(Q, K, Vv, attn_mask=mask)
        X = X + Z.transpose(1, 2).reshape(B, N, D) @ T[f"W_O{layer}"]
    logits = X @ T["W_U"]
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V), t[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()


def main() -> None:
    args = parse_args(__doc__, default_repeat=20)
    params = helpers.init_attention_only_params(V, D, H, L, N, rng=np.random.default_rng(0))
    T = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    tokens, _ = helpers.repeated_token_batch(
        B, N, V, rng=np.random.default_rng(1), min_period=3, max_period=11
    )
    opt_np = helpers.Adam(params, lr=1e-2)
    opt_t = torch.optim.Adam(list(T.values()), lr=1e-2)
    t_np = best_of(lambda: numpy_step(params, opt_np, tokens), args.repeat)
    t_torch = best_of(lambda: torch_step(T, opt_t, tokens), args.repeat)
    print(f"training step (batch {B}, length {N}, d_model {D}, {H} heads, {L} layers, float64)")
    print(
        f"  helpers: {1e3 * t_np:8.2f} ms   PyTorch: {1e3 * t_torch:8.2f} ms   "
        f"ratio {t_np / t_torch:.2f}"
    )


if __name__ == "__main__":
    main()

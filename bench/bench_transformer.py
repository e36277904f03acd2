"""Benchmark: helpers.transformer against PyTorch on CPU, and against the NumPy floor.

Run from the repository root::

    python bench/bench_transformer.py            # best of 10 runs per row
    python bench/bench_transformer.py --repeat 20 --torch-threads 1

Rows:

* ``block forward``: ``helpers.encoder_block`` (post-LN, ReLU) against
  ``torch.nn.TransformerEncoderLayer`` with the same weights (dropout 0, eval mode,
  ``torch.no_grad()``, so PyTorch may take its fused fast path), and against the *NumPy
  floor*: the block's matrix products alone (projections, scores, weighted values,
  output projection, the two feed-forward layers), with nothing else.
* ``block fwd+bwd``: ``encoder_block`` then ``encoder_block_backward`` against a forward
  and backward pass through PyTorch's autograd.
* ``layer_norm``, ``gelu``: the helpers against ``torch.nn.functional``; and GELU with
  Python's ``math.erfc`` applied to each entry (``np.frompyfunc``), the simplest exact
  alternative to ``helpers.gelu``'s vectorised erfc, whose last column is then
  ``helpers.gelu`` itself.
* ``training step``: one step of chapter 6's model (embedding, one block, mean pooling,
  a linear classifier, cross-entropy, Adam) at its size, against the same model in
  PyTorch with ``torch.optim.Adam``.

Each row keeps the best of ``--repeat`` runs after one warm-up call and prints the ratios
measured in this run (> 1 means helpers is slower). A benchmark, not a test: nothing here
asserts on time. NumPy's matrix products use the threads of its BLAS; PyTorch uses
``torch.get_num_threads()`` threads. Timings taken while other programs run are noisy.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from _common import best_of, environment, parse_args

from helpers.transformer import (
    Adam,
    cross_entropy,
    encoder_block,
    encoder_block_backward,
    gelu,
    init_block_params,
    layer_norm,
)

# (batch, n, d_model, h, d_ff)
SIZES = [(64, 12, 32, 2, 64), (8, 128, 256, 4, 1024), (2, 512, 512, 8, 2048)]


def torch_layer(params: dict[str, np.ndarray], h: int) -> torch.nn.TransformerEncoderLayer:
    """The same block in PyTorch; its linear layers compute x @ W.T, so weights are transposed."""
    t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in params.items()}
    d, f = params["W_1"].shape
    layer = torch.nn.TransformerEncoderLayer(
        d, h, f, dropout=0.0, batch_first=True, dtype=t["W_Q"].dtype
    )
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.cat([t["W_Q"].T, t["W_K"].T, t["W_V"].T]))
        layer.self_attn.in_proj_bias.copy_(torch.cat([t["b_Q"], t["b_K"], t["b_V"]]))
        layer.self_attn.out_proj.weight.copy_(t["W_O"].T)
        layer.self_attn.out_proj.bias.copy_(t["b_O"])
        layer.linear1.weight.copy_(t["W_1"].T)
        layer.linear1.bias.copy_(t["b_1"])
        layer.linear2.weight.copy_(t["W_2"].T)
        layer.linear2.bias.copy_(t["b_2"])
    return layer.eval()


def matmul_floor(X: np.ndarray, params: dict[str, np.ndarray], h: int):
    """The block's matrix products and nothing else (no softmax, norms, biases or checks)."""
    b, n, d = X.shape
    W_qkv = np.concatenate([params[k] for k in ("W_Q", "W_K", "W_V")], axis=1)  # (d, 3d)
    W_O, W_1, W_2 = params["W_O"], params["W_1"], params["W_2"]

    def run():
        qkv = X @ W_qkv  # (b, n, 3d)
        heads = qkv.reshape(b, n, 3, h, d // h).transpose(2, 0, 3, 1, 4)  # (3, b, h, n, d_k)
        S = heads[0] @ heads[1].transpose(0, 1, 3, 2)  # (b, h, n, n)
        weighted = S @ heads[2]  # (b, h, n, d_k)
        Z = weighted.transpose(0, 2, 1, 3).reshape(b, n, d) @ W_O
        return (Z @ W_1) @ W_2

    return run


def block_rows(repeat: int) -> list[tuple]:
    rng = np.random.default_rng(0)
    out = []
    for dtype in (np.float32, np.float64):
        for b, n, d, h, f in SIZES:
            params = {k: v.astype(dtype) for k, v in init_block_params(d, h, f, rng=rng).items()}
            X = rng.normal(size=(b, n, d)).astype(dtype)
            G = rng.normal(size=X.shape).astype(dtype)
            layer = torch_layer(params, h)
            size = f"{b}x{n}x{d}, h={h}, d_ff={f}"
            name = np.dtype(dtype).name

            def ours(X=X, params=params, h=h):
                return encoder_block(X, params, h)

            def theirs(X=X, layer=layer):
                with torch.no_grad():
                    return layer(torch.from_numpy(X))

            floor = matmul_floor(X, params, h)
            out.append(
                (
                    "block forward",
                    size,
                    name,
                    best_of(ours, repeat),
                    best_of(theirs, repeat),
                    best_of(floor, repeat),
                )
            )

            def ours_both(X=X, G=G, params=params, h=h):
                _, cache = encoder_block(X, params, h)
                return encoder_block_backward(G, cache)

            def theirs_both(X=X, G=G, layer=layer):
                layer.zero_grad(set_to_none=True)
                t = torch.from_numpy(X).requires_grad_()
                layer(t).backward(torch.from_numpy(G))

            out.append(
                (
                    "block fwd+bwd",
                    size,
                    name,
                    best_of(ours_both, repeat),
                    best_of(theirs_both, repeat),
                    float("nan"),
                )
            )
    return out


def elementwise_rows(repeat: int) -> list[tuple]:
    rng = np.random.default_rng(1)
    out = []
    for dtype in (np.float32, np.float64):
        x = rng.normal(size=(64, 128, 768)).astype(dtype)
        gamma, beta = np.ones(768, dtype), np.zeros(768, dtype)
        t, tg, tb = (torch.from_numpy(a) for a in (x, gamma, beta))
        name = np.dtype(dtype).name
        out.append(
            (
                "layer_norm",
                "64x128x768",
                name,
                best_of(lambda x=x, gamma=gamma, beta=beta: layer_norm(x, gamma, beta), repeat),
                best_of(lambda t=t, tg=tg, tb=tb: F.layer_norm(t, (768,), tg, tb), repeat),
                float("nan"),
            )
        )
        out.append(
            (
                "gelu (erf)",
                "64x128x768",
                name,
                best_of(lambda x=x: gelu(x), repeat),
                best_of(lambda t=t: F.gelu(t), repeat),
                best_of(lambda x=x: np.maximum(x, 0), repeat),  # floor: one pass over x
            )
        )
    # The alternative to helpers.gelu's vectorised erfc: Python's math.erfc on each entry.
    erfc_each = np.frompyfunc(math.erfc, 1, 1)
    x = rng.normal(size=(64, 128, 768))
    t = torch.from_numpy(x)
    out.append(
        (
            "gelu math.erfc",
            "64x128x768",
            "float64",
            best_of(lambda x=x: 0.5 * x * erfc_each(-x / math.sqrt(2)).astype(float), repeat),
            best_of(lambda t=t: F.gelu(t), repeat),
            best_of(lambda x=x: gelu(x), repeat),  # here the last column is helpers.gelu
        )
    )
    return out


def training_rows(repeat: int) -> list[tuple]:
    """One training step of chapter 6's model, float64, batch 64 of 12 tokens."""
    vocab, n, d, h, f, batch = 8, 12, 32, 2, 64, 64
    rng = np.random.default_rng(2)
    p = {"E": rng.normal(size=(vocab, d)), "P": rng.normal(size=(n, d))}
    block = init_block_params(d, h, f, rng=rng)
    p |= {"W_c": rng.normal(size=(d, 2)) / np.sqrt(d), "b_c": np.zeros(2)}
    tokens = rng.integers(0, vocab, size=(batch, n))
    labels = rng.integers(0, 2, size=batch)
    params = {**p, **{"block." + k: v for k, v in block.items()}}
    opt = Adam(params, lr=1e-3)

    def ours():
        X = params["E"][tokens] + params["P"]
        Y, cache = encoder_block(X, {k[6:]: v for k, v in params.items() if k[:6] == "block."}, h)
        pooled = Y.mean(axis=1)
        _, d_logits = cross_entropy(pooled @ params["W_c"] + params["b_c"], labels)
        grads = {"W_c": pooled.T @ d_logits, "b_c": d_logits.sum(axis=0)}
        dY = np.broadcast_to((d_logits @ params["W_c"].T)[:, None, :] / n, Y.shape)
        dX, g_block = encoder_block_backward(dY, cache)
        grads |= {"block." + k: v for k, v in g_block.items()}
        grads["P"] = dX.sum(axis=0)
        grads["E"] = np.eye(vocab)[tokens.reshape(-1)].T @ dX.reshape(-1, d)
        opt.step(grads)

    torch.manual_seed(0)
    model = torch.nn.ModuleDict(
        {
            "E": torch.nn.Embedding(vocab, d, dtype=torch.float64),
            "block": torch_layer(block, h).train(),
            "head": torch.nn.Linear(d, 2, dtype=torch.float64),
        }
    )
    P = torch.nn.Parameter(torch.from_numpy(p["P"].copy()))
    t_opt = torch.optim.Adam([*model.parameters(), P], lr=1e-3)
    t_tokens, t_labels = torch.from_numpy(tokens), torch.from_numpy(labels)

    def theirs():
        t_opt.zero_grad(set_to_none=True)
        Y = model["block"](model["E"](t_tokens) + P)
        F.cross_entropy(model["head"](Y.mean(dim=1)), t_labels).backward()
        t_opt.step()

    return [
        (
            "training step",
            f"{batch}x{n}x{d}, h={h}",
            "float64",
            best_of(ours, repeat),
            best_of(theirs, repeat),
            float("nan"),
        )
    ]


def main() -> None:
    args = parse_args(__doc__, default_repeat=10)
    print(environment(args.repeat))
    print("ratio = helpers / torch and helpers / NumPy floor (the same matrix products alone)")
    header = (
        f"{'what':<14} {'size':<28} {'dtype':<8} {'helpers':>10} {'torch':>10} {'ratio':>6} "
        f"{'floor':>10} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    for what, size, dtype, ours, theirs, floor in (
        block_rows(args.repeat) + elementwise_rows(args.repeat) + training_rows(args.repeat)
    ):
        floor_text = (
            f"{floor * 1e3:>8.2f}ms {ours / floor:>6.2f}" if np.isfinite(floor) else f"{'':>17}"
        )
        print(
            f"{what:<14} {size:<28} {dtype:<8} {ours * 1e3:>8.2f}ms {theirs * 1e3:>8.2f}ms "
            f"{ours / theirs:>6.2f} {floor_text}"
        )


if __name__ == "__main__":
    main()

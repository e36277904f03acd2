"""Chapter 7's models in NumPy against Hugging Face's on the CPU: MoE layer, GPT-2, generation.

Prints times and ratios measured in one run (nothing is asserted):

* ``helpers.moe_layer`` against Hugging Face's ``MixtralSparseMoeBlock`` (eager experts)
  and against the NumPy floor of the same work: the expert products of the routed tokens
  alone, without routing, gathering or scattering;
* ``helpers.gpt2_forward`` against Hugging Face's ``GPT2LMHeadModel`` (eager attention);
* generation of new tokens with and without ``helpers.KVCache``.

All in float32, on random weights. Run: ``.venv/bin/python bench/bench_models.py``.
"""

from __future__ import annotations

import numpy as np
import torch
from _common import best_of, environment, parse_args
from transformers import GPT2Config, GPT2LMHeadModel, MixtralConfig
from transformers.models.mixtral import modeling_mixtral

import helpers


def bench_moe(repeat: int) -> None:
    print("\nMoE layer (T tokens, d_model 512, d_ff 1024, N = 8 experts, top-2), float32")
    head = ["T", "numpy ms", "HF ms", "floor ms", "HF / numpy", "numpy / floor"]
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, (6, 9, 8, 9, 11, 14), strict=True)))
    d, d_ff, N, k = 512, 1024, 8, 2
    config = MixtralConfig(
        hidden_size=d, intermediate_size=d_ff, num_local_experts=N, num_experts_per_tok=k
    )
    torch.manual_seed(0)
    block = modeling_mixtral.MixtralSparseMoeBlock(config).eval()
    with torch.no_grad():
        for p in block.parameters():
            p.normal_(0.0, 0.05)
    gate_up = block.experts.gate_up_proj.detach().numpy()
    experts = {
        "W_1": np.ascontiguousarray(gate_up[:, :d_ff].transpose(0, 2, 1)),
        "W_3": np.ascontiguousarray(gate_up[:, d_ff:].transpose(0, 2, 1)),
        "W_2": np.ascontiguousarray(block.experts.down_proj.detach().numpy().transpose(0, 2, 1)),
    }
    W_g = np.ascontiguousarray(block.gate.weight.detach().numpy().T)
    rng = np.random.default_rng(0)
    for T in (256, 1024, 4096):
        X = rng.standard_normal((1, T, d)).astype(np.float32)
        Xt = torch.from_numpy(X)
        _, info = helpers.moe_layer(X, W_g, experts, k)
        rows = [np.nonzero((info["indices"][0] == e).any(-1))[0] for e in range(N)]
        parts = [(X[0, r], e) for e, r in enumerate(rows)]

        def floor(parts=parts):
            for x, e in parts:
                h = x @ experts["W_1"][e]
                (h * (x @ experts["W_3"][e])) @ experts["W_2"][e]

        t_np = best_of(lambda X=X: helpers.moe_layer(X, W_g, experts, k), repeat)
        with torch.no_grad():
            t_hf = best_of(lambda Xt=Xt: block(Xt), repeat)
        t_floor = best_of(floor, repeat)
        print(
            f"{T:6d} {1e3 * t_np:9.2f} {1e3 * t_hf:8.2f} {1e3 * t_floor:9.2f} "
            f"{t_hf / t_np:11.2f} {t_np / t_floor:14.2f}"
        )


def tiny_gpt2_pair(d=256, layers=4, heads=4, vocab=5000, positions=1024):
    config = GPT2Config(
        vocab_size=vocab,
        n_embd=d,
        n_layer=layers,
        n_head=heads,
        n_positions=positions,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval()
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    return model, helpers.gpt2_params_from_hf(state, num_heads=heads)


def bench_gpt2(repeat: int) -> None:
    print("\nGPT-2 forward (d_model 256, 4 layers, vocabulary 5000), float32, logits of n tokens")
    print(f"{'n':>6} {'numpy ms':>9} {'HF ms':>8} {'HF / numpy':>11}")
    model, params = tiny_gpt2_pair()
    rng = np.random.default_rng(1)
    for n in (64, 256, 1024):
        ids = rng.integers(0, 5000, size=(1, n))
        t_np = best_of(lambda ids=ids: helpers.gpt2_forward(ids, params), repeat)
        with torch.no_grad():
            t_hf = best_of(lambda ids=ids: model(torch.from_numpy(ids)).logits, repeat)
        print(f"{n:6d} {1e3 * t_np:9.2f} {1e3 * t_hf:8.2f} {t_hf / t_np:11.2f}")

    print("\nGeneration after a prompt of 16 tokens, greedy (top_k = 1)")
    print(f"{'new':>6} {'cache ms':>9} {'no cache ms':>12} {'speed-up':>9}")
    prompt = rng.integers(0, 5000, size=(1, 16))
    for new in (16, 64, 256):

        def gen(use_cache, new=new):
            helpers.gpt2_generate(
                prompt, params, new, rng=np.random.default_rng(0), top_k=1, use_cache=use_cache
            )

        t_c = best_of(lambda: gen(True), max(1, repeat // 2))
        t_n = best_of(lambda: gen(False), max(1, repeat // 2))
        print(f"{new:6d} {1e3 * t_c:9.1f} {1e3 * t_n:12.1f} {t_n / t_c:9.1f}")


def main() -> None:
    args = parse_args(__doc__, default_repeat=5)
    print(environment(args.repeat))
    bench_moe(args.repeat)
    bench_gpt2(args.repeat)


if __name__ == "__main__":
    main()

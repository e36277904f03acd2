"""Tests of helpers.moe: gating, the balancing and z-losses, capacity, the MoE layer.

Oracles: Hugging Face ``transformers`` (Mixtral's sparse MoE block, its router and
its load-balancing loss, built from tiny random configurations, never downloaded)
and PyTorch; the formulas of the papers; properties checked with hypothesis.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from helpers import softmax
from helpers.moe import (
    expert_capacity,
    load_balancing_loss,
    moe_layer,
    moe_parameter_count,
    router_z_loss,
    top_k_gating,
)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from transformers import MixtralConfig  # noqa: E402
from transformers.models.mixtral import modeling_mixtral  # noqa: E402

# ---------------------------------------------------------------------------
# top_k_gating
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", [0, 1])
def test_top_k_gating_equals_renormalised_softmax_and_softmax_of_top_k(k, seed):
    rng = np.random.default_rng(seed)
    h = rng.normal(scale=2.0, size=(3, 7, 5))
    gates, idx = top_k_gating(h, k)
    assert gates.shape == h.shape and idx.shape == (3, 7, k)
    p = softmax(h)
    # the selected experts are the k largest logits, largest first
    ref_idx = np.argsort(-h, axis=-1)[..., :k]
    assert np.array_equal(idx, ref_idx)
    # Shazeer: softmax of KeepTopK (-inf outside the top k)
    keep = np.full_like(h, -np.inf)
    np.put_along_axis(keep, idx, np.take_along_axis(h, idx, -1), -1)
    assert np.allclose(gates, softmax(keep), rtol=0, atol=1e-15)
    # renormalised full softmax
    top_p = np.take_along_axis(p, idx, -1)
    renorm = np.zeros_like(p)
    np.put_along_axis(renorm, idx, top_p / top_p.sum(-1, keepdims=True), -1)
    assert np.allclose(gates, renorm, rtol=0, atol=1e-15)
    assert np.allclose(gates.sum(-1), 1) and ((gates > 0).sum(-1) == k).all()


def test_top_k_gating_k_equals_e_is_softmax_and_k1_is_one_hot():
    h = np.array([[0.3, -1.0, 2.0, 0.1]])
    assert np.allclose(top_k_gating(h, 4)[0], softmax(h), atol=1e-16)
    gates, idx = top_k_gating(h, 1)
    assert np.array_equal(gates, [[0, 0, 1, 0]]) and idx.tolist() == [[2]]


def test_top_k_gating_matches_torch_topk_and_softmax():
    rng = np.random.default_rng(3)
    h = rng.normal(size=(50, 8))
    gates, idx = top_k_gating(h, 2)
    values, t_idx = torch.topk(torch.from_numpy(h), 2, dim=-1)
    t_gates = torch.softmax(values, dim=-1).numpy()
    assert np.array_equal(idx, t_idx.numpy())
    assert np.allclose(np.take_along_axis(gates, idx, -1), t_gates, rtol=0, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_top_k_gating_extreme_logits_are_finite(dtype):
    big = 6e4 if dtype == np.float16 else 1e4
    h = np.array([[big, -big, big - 1, 0.0]], dtype=dtype)
    gates, idx = top_k_gating(h, 2)
    assert gates.dtype == dtype and np.isfinite(gates).all()
    assert idx.tolist() == [[0, 2]] or dtype == np.float16  # big - 1 rounds in float16
    assert abs(float(gates.astype(np.float64).sum()) - 1) < 1e-3


def test_top_k_gating_ties_take_the_lower_index():
    gates, idx = top_k_gating(np.array([1.0, 2.0, 2.0, 2.0]), 2)
    assert idx.tolist() == [1, 2] and np.allclose(gates, [0, 0.5, 0.5, 0])


@given(
    arrays(
        np.float64,
        st.tuples(st.integers(1, 5), st.integers(1, 6)),
        elements=st.integers(-400, 400).map(lambda v: v / 8),  # a shift by 8 stays exact
    ),
    st.data(),
)
@settings(max_examples=60, deadline=None)
def test_top_k_gating_properties(h, data):
    k = data.draw(st.integers(1, h.shape[-1]))
    gates, idx = top_k_gating(h, k)
    assert np.allclose(gates.sum(-1), 1)
    assert (gates >= 0).all()
    # shift invariance per row
    shifted, idx2 = top_k_gating(h + 8.0, k)
    assert np.array_equal(idx, idx2) and np.allclose(shifted, gates, atol=1e-12)
    # every selected logit is >= every unselected one
    sel = np.zeros(h.shape, bool)
    np.put_along_axis(sel, idx, True, -1)
    for row, s in zip(h, sel, strict=True):
        if (~s).any():
            assert row[s].min() >= row[~s].max()


@pytest.mark.parametrize(
    ("k", "exc", "match"),
    [(0, ValueError, "between 1 and"), (5, ValueError, "E = 4"), (1.5, TypeError, "integer")],
)
def test_top_k_gating_bad_k(k, exc, match):
    with pytest.raises(exc, match=match):
        top_k_gating(np.zeros((2, 4)), k)


def test_top_k_gating_bad_logits():
    with pytest.raises(ValueError, match="finite"):
        top_k_gating(np.array([0.0, np.nan]), 1)
    with pytest.raises(TypeError, match="bool"):
        top_k_gating(np.array([True, False]), 1)
    with pytest.raises(ValueError, match="shape"):
        top_k_gating(np.float64(1.0), 1)


# ---------------------------------------------------------------------------
# load_balancing_loss
# ---------------------------------------------------------------------------


def test_load_balancing_loss_against_the_formula():
    rng = np.random.default_rng(0)
    T, E, k = 40, 6, 2
    p = softmax(rng.normal(size=(T, E)))
    idx = np.argsort(-p, axis=-1)[:, :k]
    f = np.array([(idx == i).sum() for i in range(E)]) / (k * T)
    P = p.mean(0)
    assert math.isclose(load_balancing_loss(p, idx, E), E * float(f @ P), rel_tol=1e-14)
    assert math.isclose(f.sum(), 1.0)


def test_load_balancing_loss_uniform_is_one_and_collapse_is_n():
    E, T = 4, 8
    p = np.full((T, E), 1 / E)
    idx = (np.arange(T) % E)[:, None]
    assert load_balancing_loss(p, idx, E) == pytest.approx(1.0, abs=1e-15)
    collapsed = np.tile(np.eye(E)[0], (T, 1))  # every token certain of expert 0
    assert load_balancing_loss(collapsed, np.zeros((T, 1), int), E) == pytest.approx(E)


@given(
    arrays(np.float64, st.integers(2, 8), elements=st.floats(0.01, 1.0)),
)
@settings(max_examples=60, deadline=None)
def test_load_balancing_loss_calibrated_minimum_is_uniform(w):
    """With f = P the loss is N Σ P_i² >= 1 (Cauchy-Schwarz), = 1 iff P is uniform."""
    E = w.size
    P = w / w.sum()
    # T tokens whose routing fractions are P exactly: token counts proportional to P
    counts = np.round(P * 1000).astype(int)
    idx = np.repeat(np.arange(E), counts)[:, None]
    f = counts / counts.sum()
    probs = np.tile(f, (idx.shape[0], 1))  # every token's router output is f: P = f
    loss = load_balancing_loss(probs, idx, E)
    assert loss == pytest.approx(E * float(f @ f), rel=1e-12)
    assert loss >= 1 - 1e-12
    assert (loss < 1 + 1e-9) == bool(np.allclose(f, 1 / E))


def test_load_balancing_loss_uniform_f_or_uniform_p_gives_one_and_can_go_below():
    E = 2
    rng = np.random.default_rng(0)
    p = softmax(rng.normal(size=(6, E)))
    idx = (np.arange(6) % E)[:, None]  # f uniform
    assert load_balancing_loss(p, idx, E) == pytest.approx(1.0)
    # f and P both skewed, in opposite directions: below 1 although the routing follows
    # the router (each token goes to its most probable expert)
    p = np.array([[1.0, 0.0], [0.49, 0.51], [0.49, 0.51]])
    idx = p.argmax(-1)[:, None]
    expected = 2 * (1 / 3 * 1.98 / 3 + 2 / 3 * 1.02 / 3)  # f = (1/3, 2/3), P = (0.66, 0.34)
    assert load_balancing_loss(p, idx, E) == pytest.approx(expected)
    assert load_balancing_loss(p, idx, E) < 1


def test_load_balancing_loss_is_k_times_smaller_than_hugging_face_mixtral():
    rng = np.random.default_rng(1)
    for k in (1, 2, 3):
        logits = rng.normal(size=(2, 30, 6))
        p = softmax(logits)
        idx = np.argsort(-p, axis=-1, kind="stable")[..., :k]
        ours = load_balancing_loss(p, idx, 6)
        hf = modeling_mixtral.load_balancing_loss_func(
            (torch.from_numpy(logits.reshape(-1, 6)),), num_experts=6, top_k=k
        )
        assert float(hf) == pytest.approx(k * ours, rel=1e-6)  # HF accumulates in float32


def test_load_balancing_loss_bad_input():
    p = np.full((3, 2), 0.5)
    with pytest.raises(ValueError, match="sum to 1"):
        load_balancing_loss(np.zeros((3, 2)), np.zeros((3, 1), int), 2)
    with pytest.raises(ValueError, match=r"0, \.\.\., 1"):
        load_balancing_loss(p, np.full((3, 1), 2), 2)
    with pytest.raises(TypeError, match="integers"):
        load_balancing_loss(p, np.zeros((3, 1)), 2)
    with pytest.raises(ValueError, match="leading axes"):
        load_balancing_loss(p, np.zeros((4, 1), int), 2)
    with pytest.raises(ValueError, match="one column per expert"):
        load_balancing_loss(p, np.zeros((3, 1), int), 3)


# ---------------------------------------------------------------------------
# router_z_loss and expert_capacity
# ---------------------------------------------------------------------------


def test_router_z_loss_against_torch():
    rng = np.random.default_rng(2)
    h = rng.normal(scale=5, size=(3, 9, 8))
    expected = torch.logsumexp(torch.from_numpy(h), dim=-1).square().mean().item()
    assert router_z_loss(h) == pytest.approx(expected, rel=1e-14)
    assert np.isfinite(router_z_loss(np.array([[1e4, -1e4]])))


def test_router_z_loss_sees_the_level_that_softmax_ignores():
    h = np.array([[0.5, -1.0, 2.0]])
    assert np.allclose(softmax(h + 10), softmax(h))
    assert router_z_loss(h + 10) > router_z_loss(h)


@pytest.mark.parametrize(
    ("args", "expected"),
    [((64, 8, 1.0), 8), ((64, 8, 1.25), 10), ((64, 8, 1.0, 2), 16), ((10, 4, 1.0), 3)],
)
def test_expert_capacity(args, expected):
    assert expert_capacity(*args) == expected


def test_expert_capacity_bad_input():
    with pytest.raises(ValueError, match="positive"):
        expert_capacity(8, 2, 0.0)
    with pytest.raises(ValueError, match="between 1 and"):
        expert_capacity(8, 2, 1.0, k=3)


# ---------------------------------------------------------------------------
# moe_layer against Hugging Face's Mixtral sparse MoE block
# ---------------------------------------------------------------------------


def _tiny_mixtral(seed, *, E=6, k=2, d=16, d_ff=24):
    torch.manual_seed(seed)
    config = MixtralConfig(
        hidden_size=d,
        intermediate_size=d_ff,
        num_local_experts=E,
        num_experts_per_tok=k,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=32,
        router_jitter_noise=0.0,
    )
    block = modeling_mixtral.MixtralSparseMoeBlock(config).double().eval()
    with torch.no_grad():
        for p in block.parameters():
            p.normal_(0.0, 0.3)
    return block


def _experts_from_hf(block):
    """Hugging Face's stacked (out, in) weights to the book's (E, in, out) layout."""
    gate_up = block.experts.gate_up_proj.detach().numpy()  # (E, 2 d_ff, d)
    d_ff = gate_up.shape[1] // 2
    return {
        "W_1": gate_up[:, :d_ff].transpose(0, 2, 1),  # gate, (E, d, d_ff)
        "W_3": gate_up[:, d_ff:].transpose(0, 2, 1),  # up, (E, d, d_ff)
        "W_2": block.experts.down_proj.detach().numpy().transpose(0, 2, 1),  # (E, d_ff, d)
    }


@pytest.mark.parametrize(("seed", "E", "k"), [(0, 6, 2), (1, 8, 2), (2, 4, 1), (3, 5, 3)])
def test_moe_layer_equals_hugging_face_mixtral_block(seed, E, k):
    block = _tiny_mixtral(seed, E=E, k=k)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(2, 7, 16))
    W_g = block.gate.weight.detach().numpy().T  # (d, E)
    experts = _experts_from_hf(block)
    with torch.no_grad():
        hf_out = block(torch.from_numpy(X)).numpy()
        hf_logits, hf_scores, hf_idx = block.gate(torch.from_numpy(X))

    # 1. The router: the same logits (float64), the same experts chosen; the gates agree
    #    to float32 rounding, because HF's router softmax runs in float32.
    ours, info = moe_layer(X, W_g, experts, k)
    assert np.allclose(info["router_logits"].reshape(-1, E), hf_logits.numpy(), rtol=0, atol=1e-13)
    assert np.array_equal(info["indices"].reshape(-1, k), hf_idx.numpy())
    assert hf_scores.dtype == torch.float32
    ours_top = np.take_along_axis(info["gates"].reshape(-1, E), hf_idx.numpy(), -1)
    assert np.abs(ours_top - hf_scores.numpy()).max() < 1e-6

    # 2. The whole block: equal up to that float32 rounding of the gates.
    scale = np.abs(hf_out).max()
    assert np.abs(ours - hf_out).max() < 1e-6 * scale
    # router_dtype=float32 rounds the gates to float32 too (not to the same bits)
    ours32, info32 = moe_layer(X, W_g, experts, k, router_dtype=np.float32)
    assert np.array_equal(info32["indices"], info["indices"])
    assert np.abs(ours32 - hf_out).max() < 1e-6 * scale

    # 3. The experts given the same gates: equal to 1e-12 (float64 throughout).
    gates64 = torch.from_numpy(ours_top)
    with torch.no_grad():
        hf_experts = block.experts(torch.from_numpy(X.reshape(-1, 16)), hf_idx, gates64).numpy()
    assert np.allclose(ours.reshape(-1, 16), hf_experts, rtol=0, atol=1e-12)


def test_moe_layer_matches_a_per_token_loop_with_plain_experts_and_biases():
    rng = np.random.default_rng(4)
    E, d, d_ff, k = 5, 6, 10, 2
    experts = {
        "W_1": rng.normal(size=(E, d, d_ff)),
        "b_1": rng.normal(size=(E, d_ff)),
        "W_2": rng.normal(size=(E, d_ff, d)),
        "b_2": rng.normal(size=(E, d)),
    }
    X, W_g = rng.normal(size=(3, 4, d)), rng.normal(size=(d, E))
    Y, info = moe_layer(X, W_g, experts, k)
    for b in range(3):
        for t in range(4):
            x = X[b, t]
            g, idx = top_k_gating(x @ W_g, k)
            y = sum(
                g[i]
                * (
                    np.maximum(x @ experts["W_1"][i] + experts["b_1"][i], 0) @ experts["W_2"][i]
                    + experts["b_2"][i]
                )
                for i in idx
            )
            assert np.allclose(Y[b, t], y, atol=1e-12)
    assert info["tokens_per_expert"].sum() == 3 * 4 * k
    assert info["capacity"] is None and info["kept"].all()


def test_moe_layer_capacity_drops_the_overflow_in_order():
    E, d = 2, 3
    experts = {"W_1": np.stack([np.eye(d)] * E), "W_2": np.stack([np.eye(d)] * E)}
    W_g = np.array([[5.0, 0.0], [0.0, 0.0], [0.0, 0.0]])  # positive x_0 prefers expert 0
    X = np.array([[1.0, 0.2, 0.3]] * 6)  # all six tokens want expert 0
    Y, info = moe_layer(X, W_g, experts, k=1, capacity_factor=1.0)
    assert info["capacity"] == 3
    assert info["kept"][:, 0].tolist() == [True] * 3 + [False] * 3  # first come, first served
    assert info["tokens_per_expert"].tolist() == [3, 0]
    assert np.all(Y[3:] == 0) and np.all(Y[:3] != 0)
    # with top-2 every token's first choice is served before any second choice
    _, info2 = moe_layer(X, W_g, experts, k=2, capacity_factor=0.75)
    assert info2["capacity"] == 5  # ceil(0.75 * 2 * 6 / 2)
    assert info2["kept"][:, 0].tolist() == [True] * 5 + [False]
    assert info2["kept"][:, 1].tolist() == [True] * 5 + [False]  # expert 1: second choices
    assert info2["tokens_per_expert"].tolist() == [5, 5]


def test_moe_layer_keeps_the_dtype_and_batch_shape():
    rng = np.random.default_rng(5)
    experts = {"W_1": rng.normal(size=(3, 4, 5)), "W_2": rng.normal(size=(3, 5, 4))}
    X = rng.normal(size=(2, 3, 6, 4)).astype(np.float32)
    Y, info = moe_layer(X, rng.normal(size=(4, 3)).astype(np.float32), experts, 2)
    assert Y.dtype == np.float32 and Y.shape == X.shape
    assert info["router_probs"].shape == (2, 3, 6, 3) and info["indices"].shape == (2, 3, 6, 2)


def test_moe_layer_bad_input_names_the_argument():
    rng = np.random.default_rng(6)
    experts = {"W_1": rng.normal(size=(3, 4, 5)), "W_2": rng.normal(size=(3, 5, 4))}
    X, W_g = rng.normal(size=(6, 4)), rng.normal(size=(4, 3))
    with pytest.raises(ValueError, match=r"W_g must have shape \(d_model, E\)"):
        moe_layer(X, rng.normal(size=(5, 3)), experts, 1)
    with pytest.raises(ValueError, match="between 1 and"):
        moe_layer(X, W_g, experts, 4)
    with pytest.raises(ValueError, match="missing 'W_2'"):
        moe_layer(X, W_g, {"W_1": experts["W_1"]}, 1)
    with pytest.raises(ValueError, match=r"experts\['W_2'\] must have shape \(3, 5, 4\)"):
        moe_layer(X, W_g, {**experts, "W_2": rng.normal(size=(3, 4, 4))}, 1)
    with pytest.raises(ValueError, match=r"experts\['W_1'\] must have shape"):
        moe_layer(X, W_g, {**experts, "W_1": rng.normal(size=(2, 4, 5))}, 1)
    with pytest.raises(ValueError, match="unknown keys"):
        moe_layer(X, W_g, {**experts, "W_4": experts["W_1"]}, 1)
    with pytest.raises(ValueError, match="activation"):
        moe_layer(X, W_g, experts, 1, activation="tanh")
    with pytest.raises(TypeError, match="dict"):
        moe_layer(X, W_g, [experts["W_1"], experts["W_2"]], 1)


# ---------------------------------------------------------------------------
# Counting Mixtral 8x7B
# ---------------------------------------------------------------------------


def _count_from_config(config):
    return moe_parameter_count(
        vocab_size=config.vocab_size,
        d_model=config.hidden_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        num_kv_heads=config.num_key_value_heads,
        d_ff=config.intermediate_size,
        num_experts=config.num_local_experts,
        k=config.num_experts_per_tok,
        head_dim=config.head_dim,
        tie_embeddings=config.tie_word_embeddings,
    )


@pytest.mark.parametrize(
    "config_kwargs",
    [
        {},  # the library's defaults: Mixtral 8x7B's published sizes
        {
            "hidden_size": 32,
            "intermediate_size": 48,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "vocab_size": 50,
            "num_local_experts": 4,
            "num_experts_per_tok": 1,
        },
    ],
)
def test_moe_parameter_count_equals_the_hugging_face_model(config_kwargs):
    config = MixtralConfig(**config_kwargs)
    with torch.device("meta"):  # no memory is allocated for the 46.7 billion parameters
        model = modeling_mixtral.MixtralForCausalLM(config)
    total = sum(p.numel() for p in model.parameters())
    counts = _count_from_config(config)
    assert counts["total"] == total
    experts = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    E, k = config.num_local_experts, config.num_experts_per_tok
    assert counts["active"] == total - experts + experts * k // E


def test_mixtral_defaults_are_the_published_sizes():
    c = MixtralConfig()
    published = (32000, 4096, 32, 32, 8, 14336, 8, 2, False)
    got = (
        c.vocab_size,
        c.hidden_size,
        c.num_hidden_layers,
        c.num_attention_heads,
        c.num_key_value_heads,
        c.intermediate_size,
        c.num_local_experts,
        c.num_experts_per_tok,
        c.tie_word_embeddings,
    )
    assert got == published
    counts = _count_from_config(c)
    assert round(counts["total"] / 1e9) == 47 and round(counts["active"] / 1e9) == 13

"""Tests of helpers.models: BERT, GPT-2 and the decoder layer against their references.

Oracles: Hugging Face ``transformers`` (``BertModel``, ``GPT2LMHeadModel``) built from
tiny random configurations in float64 with eager attention (never downloaded), and
``torch.nn.TransformerDecoderLayer`` with dropout 0. Tolerance 1e-10 throughout.
"""

from __future__ import annotations

import numpy as np
import pytest

from helpers import KVCache, causal_mask
from helpers.models import (
    beam_search,
    bert_forward,
    bert_params_from_hf,
    decoder_layer,
    gpt2_forward,
    gpt2_generate,
    gpt2_params_from_hf,
    init_decoder_layer_params,
    mlm_corrupt,
    next_token_distribution,
    sample_next_token,
)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from transformers import BertConfig, BertModel, GPT2Config, GPT2LMHeadModel  # noqa: E402

TOL = 1e-10


def _randomise(model, seed, scale=0.3):
    """Random weights everywhere (LayerNorm gains and biases too), so nothing is trivial."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, scale)
    return model


def _numpy_state(model):
    return {k: v.detach().numpy() for k, v in model.state_dict().items()}


def tiny_bert(seed=0, layers=2, d=16, heads=4, vocab=40):
    config = BertConfig(
        vocab_size=vocab,
        hidden_size=d,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=2 * d,
        max_position_embeddings=24,
        type_vocab_size=2,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        attn_implementation="eager",
    )
    model = BertModel(config, add_pooling_layer=False).double().eval()
    return _randomise(model, seed), config


def tiny_gpt2(seed=0, layers=2, d=16, heads=4, vocab=40, *, eos=0, scale=0.3):
    config = GPT2Config(
        vocab_size=vocab,
        n_embd=d,
        n_layer=layers,
        n_head=heads,
        n_positions=32,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=eos,
        attn_implementation="eager",
    )
    model = GPT2LMHeadModel(config).double().eval()
    return _randomise(model, seed, scale), config


# ---------------------------------------------------------------------------
# BERT
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("seed", "layers", "heads"), [(0, 2, 4), (1, 1, 2), (2, 3, 1)])
def test_bert_forward_equals_hugging_face(seed, layers, heads):
    model, config = tiny_bert(seed, layers=layers, heads=heads)
    params = bert_params_from_hf(_numpy_state(model), num_heads=heads, eps=config.layer_norm_eps)
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 40, size=(3, 9))
    types = (np.arange(9) >= 5).astype(int) * np.ones((3, 1), int)  # sentence A then B
    keep = np.ones((3, 9), int)
    keep[1, 6:] = 0  # padding at the end of sequence 2
    keep[2, 4:] = 0
    ours = bert_forward(ids, params, token_type_ids=types, attention_mask=keep)
    with torch.no_grad():
        theirs = model(
            input_ids=torch.from_numpy(ids),
            token_type_ids=torch.from_numpy(types),
            attention_mask=torch.from_numpy(keep),
        ).last_hidden_state.numpy()
    real = keep.astype(bool)
    assert np.abs(ours[real] - theirs[real]).max() < TOL  # every non-padding position
    # and without any mask or segments
    ours2 = bert_forward(ids, params)
    with torch.no_grad():
        theirs2 = model(input_ids=torch.from_numpy(ids)).last_hidden_state.numpy()
    assert np.abs(ours2 - theirs2).max() < TOL


def test_bert_padding_does_not_change_the_real_tokens():
    model, _config = tiny_bert(3)
    params = bert_params_from_hf(_numpy_state(model), num_heads=4)
    ids = np.array([[5, 6, 7, 8]])
    short = bert_forward(ids[:, :3], params)
    padded = bert_forward(np.array([[5, 6, 7, 0]]), params, attention_mask=np.array([[1, 1, 1, 0]]))
    assert np.abs(short[0] - padded[0, :3]).max() < 1e-12
    # without the padding mask, the padding token changes every hidden state
    unmasked = bert_forward(np.array([[5, 6, 7, 0]]), params)
    assert np.abs(short[0] - unmasked[0, :3]).max() > 1e-3


def test_bert_params_accept_the_masked_lm_prefix():
    model, _ = tiny_bert(4)
    state = {"bert." + k: v for k, v in _numpy_state(model).items()}
    state["cls.predictions.bias"] = np.zeros(40)
    params = bert_params_from_hf(state, num_heads=4)
    assert len(params["layers"]) == 2


def test_bert_params_missing_or_wrong_weight_is_named():
    model, _ = tiny_bert(5)
    state = _numpy_state(model)
    del state["encoder.layer.1.output.dense.bias"]
    with pytest.raises(ValueError, match=r"'encoder\.layer\.1\.output\.dense\.bias'"):
        bert_params_from_hf(state, num_heads=4)
    state = _numpy_state(model)
    state["encoder.layer.0.attention.self.key.weight"] = np.zeros((16, 8))
    with pytest.raises(ValueError, match=r"key\.weight'\] must have shape \(16, 16\)"):
        bert_params_from_hf(state, num_heads=4)
    with pytest.raises(ValueError, match="must divide d_model = 16"):
        bert_params_from_hf(_numpy_state(model), num_heads=3)
    with pytest.raises(ValueError, match="is it a BERT state dict"):
        bert_params_from_hf({"wte.weight": np.zeros((4, 4))}, num_heads=2)


def test_bert_forward_bad_input():
    model, _ = tiny_bert(6)
    params = bert_params_from_hf(_numpy_state(model), num_heads=4)
    with pytest.raises(ValueError, match=r"0, \.\.\., 39"):
        bert_forward(np.array([[1, 40]]), params)
    with pytest.raises(TypeError, match="integer"):
        bert_forward(np.array([[1.0, 2.0]]), params)
    with pytest.raises(ValueError, match="more than the 24 positions"):
        bert_forward(np.zeros((1, 25), int), params)
    with pytest.raises(ValueError, match="attention_mask must have the shape"):
        bert_forward(np.zeros((1, 4), int), params, attention_mask=np.ones((1, 3), int))


def test_mlm_corrupt_proportions():
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 1000, size=(200, 500))
    corrupted, labels = mlm_corrupt(ids, rng=rng, mask_token_id=3, vocab_size=1000)
    selected = labels != -100
    assert np.array_equal(labels[selected], ids[selected])
    assert np.array_equal(corrupted[~selected], ids[~selected])  # unselected: unchanged
    n = ids.size
    frac_sel = selected.sum() / n
    frac_mask = (corrupted == 3).sum() / n
    kept = (selected & (corrupted == ids)).sum() / n
    assert abs(frac_sel - 0.15) < 0.003
    assert abs(frac_mask - 0.12) < 0.003
    assert abs(kept - 0.015) < 0.002  # 10% kept (plus the rare random token equal to it)


def test_mlm_corrupt_never_selects_special_tokens():
    rng = np.random.default_rng(1)
    ids = np.tile(np.arange(20), (50, 1))
    special = np.zeros_like(ids, bool)
    special[:, [0, -1]] = True
    corrupted, labels = mlm_corrupt(
        ids, rng=rng, mask_token_id=99, vocab_size=100, special_mask=special
    )
    assert (labels[special] == -100).all() and np.array_equal(corrupted[special], ids[special])


# ---------------------------------------------------------------------------
# GPT-2
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("seed", "layers", "heads"), [(0, 2, 4), (1, 1, 2), (2, 3, 8)])
def test_gpt2_forward_equals_hugging_face(seed, layers, heads):
    model, config = tiny_gpt2(seed, layers=layers, heads=heads)
    params = gpt2_params_from_hf(
        _numpy_state(model), num_heads=heads, eps=config.layer_norm_epsilon
    )
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 40, size=(2, 11))
    ours = gpt2_forward(ids, params)
    with torch.no_grad():
        theirs = model(input_ids=torch.from_numpy(ids)).logits.numpy()
    assert ours.shape == (2, 11, 40)
    assert np.abs(ours - theirs).max() < TOL


def test_gpt2_cached_forward_equals_hugging_face_incremental():
    model, _ = tiny_gpt2(3)
    params = gpt2_params_from_hf(_numpy_state(model), num_heads=4)
    ids = np.random.default_rng(3).integers(0, 40, size=(2, 10))
    cache = [KVCache() for _ in params["layers"]]
    pieces = [gpt2_forward(ids[:, :4], params, cache=cache)]
    for t in range(4, 10):
        pieces.append(gpt2_forward(ids[:, t : t + 1], params, cache=cache))
    ours = np.concatenate(pieces, axis=1)
    with torch.no_grad():
        theirs = model(input_ids=torch.from_numpy(ids)).logits.numpy()
    assert np.abs(ours - theirs).max() < TOL
    assert len(cache[0]) == 10


def test_gpt2_embeddings_are_tied():
    model, _ = tiny_gpt2(4)
    state = _numpy_state(model)
    assert np.array_equal(state["lm_head.weight"], state["transformer.wte.weight"])
    state["lm_head.weight"] = state["lm_head.weight"] + 1.0
    with pytest.raises(ValueError, match="ties them"):
        gpt2_params_from_hf(state, num_heads=4)


def test_gpt2_params_missing_weight_is_named():
    model, _ = tiny_gpt2(5)
    state = _numpy_state(model)
    del state["transformer.h.1.attn.c_attn.bias"]
    with pytest.raises(ValueError, match=r"'transformer\.h\.1\.attn\.c_attn\.bias'"):
        gpt2_params_from_hf(state, num_heads=4)


@pytest.mark.parametrize(("temperature", "top_k"), [(1.0, None), (0.7, 5), (1.5, 1)])
def test_generation_with_and_without_cache_is_identical(temperature, top_k):
    model, _ = tiny_gpt2(6)
    params = gpt2_params_from_hf(_numpy_state(model), num_heads=4)
    prompt = np.array([[1, 2, 3], [7, 8, 9]])
    tok_c, log_c = gpt2_generate(
        prompt, params, 12, rng=np.random.default_rng(0), temperature=temperature, top_k=top_k
    )
    tok_n, log_n = gpt2_generate(
        prompt,
        params,
        12,
        rng=np.random.default_rng(0),
        temperature=temperature,
        top_k=top_k,
        use_cache=False,
    )
    assert np.array_equal(tok_c, tok_n) and tok_c.shape == (2, 15)
    assert np.abs(log_c - log_n).max() < 1e-12
    # and the logits are Hugging Face's for the generated sequence
    with torch.no_grad():
        theirs = model(input_ids=torch.from_numpy(tok_c)).logits.numpy()[:, 2:-1]
    assert np.abs(log_c - theirs).max() < TOL


def test_greedy_generation_equals_hugging_face_generate():
    model, _ = tiny_gpt2(7)
    params = gpt2_params_from_hf(_numpy_state(model), num_heads=4)
    prompt = np.array([[4, 5, 6]])
    ours, _ = gpt2_generate(prompt, params, 8, rng=np.random.default_rng(0), top_k=1)
    with torch.no_grad():
        theirs = model.generate(
            torch.from_numpy(prompt), max_new_tokens=8, do_sample=False, pad_token_id=0
        ).numpy()
    assert np.array_equal(ours, theirs)


def test_next_token_distribution_matches_torch():
    rng = np.random.default_rng(8)
    z = rng.normal(size=(4, 30))
    for tau, k in [(1.0, None), (0.5, 3), (2.0, 10)]:
        p = next_token_distribution(z, temperature=tau, top_k=k)
        t = torch.from_numpy(z) / tau
        if k is not None:
            kth = torch.topk(t, k, dim=-1).values[..., -1:]
            t = t.masked_fill(t < kth, float("-inf"))
        assert np.allclose(p, torch.softmax(t, dim=-1).numpy(), atol=1e-15)
        assert ((p > 0).sum(-1) == (k or 30)).all()


def _hf_warped(z, temperature, top_k, top_p):
    """Hugging Face's warpers, composed in the order ``generate`` applies them."""
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    scores = torch.from_numpy(z)
    ids = torch.zeros((z.shape[0], 1), dtype=torch.long)
    scores = TemperatureLogitsWarper(temperature)(ids, scores)
    if top_k is not None:
        scores = TopKLogitsWarper(top_k)(ids, scores)
    if top_p is not None:
        scores = TopPLogitsWarper(top_p)(ids, scores)
    return torch.softmax(scores, dim=-1).numpy()


@pytest.mark.parametrize(
    ("temperature", "top_k", "top_p"),
    [
        (1.0, None, 0.9),
        (0.7, None, 0.5),
        (1.3, 20, 0.8),
        (0.5, 5, 0.95),
        (2.0, 10, 0.3),
        (1.0, None, 1.0),
        (0.9, None, 1e-6),  # only the most likely token
    ],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_top_k_top_p_equal_hugging_face_warpers(temperature, top_k, top_p, seed):
    z = np.random.default_rng(seed).normal(scale=3.0, size=(6, 40))
    ours = next_token_distribution(z, temperature=temperature, top_k=top_k, top_p=top_p)
    theirs = _hf_warped(z, temperature, top_k, top_p)
    assert np.array_equal(ours > 0, theirs > 0)  # the same tokens kept
    assert np.allclose(ours, theirs, rtol=0, atol=1e-15)


def test_top_p_keeps_the_smallest_prefix_reaching_p():
    p = np.array([0.4, 0.3, 0.2, 0.1])
    z = np.log(p)
    for top_p, kept in [(0.3, 1), (0.4, 1), (0.41, 2), (0.7, 2), (0.71, 3), (0.95, 4), (1.0, 4)]:
        q = next_token_distribution(z, top_p=top_p)
        assert (q > 0).sum() == kept, top_p
        assert np.allclose(q[:kept], p[:kept] / p[:kept].sum())


def _kept(q, top_p):
    return np.flatnonzero(next_token_distribution(np.log(np.asarray(q)), top_p=top_p)).tolist()


def _hf_kept(q, top_p, dtype=None):
    """The tokens Hugging Face's TopPLogitsWarper keeps, alone (float64 unless told)."""
    from transformers import TopPLogitsWarper

    scores = torch.tensor(np.log(np.asarray(q))[None, :], dtype=dtype or torch.float64)
    out = TopPLogitsWarper(top_p)(torch.zeros((1, 1), dtype=torch.long), scores)
    return np.flatnonzero(torch.isfinite(out[0]).numpy()).tolist()


@pytest.mark.parametrize(
    ("q", "top_p", "kept"),
    [
        ((0.25, 0.25, 0.25, 0.25), 0.5, [2, 3]),  # the later of tied tokens ranks higher
        ((0.25, 0.25, 0.25, 0.25), 0.6, [1, 2, 3]),
        ((0.4, 0.3, 0.3), 0.5, [0, 2]),
        ((0.3, 0.4, 0.3), 0.75, [1, 2, 0]),
        ((0.1, 0.3, 0.1, 0.3, 0.2), 0.5, [1, 3]),
        ((0.1, 0.3, 0.1, 0.3, 0.2), 0.65, [1, 3, 4]),
        ((0.1, 0.3, 0.1, 0.3, 0.2), 0.85, [1, 2, 3, 4]),
    ],
)
def test_top_p_breaks_ties_as_hugging_face_does(q, top_p, kept):
    # Ties rank the later token higher: the kept set is a prefix of that ranking, and it is
    # the warper's (rows of at most 16 tokens, where PyTorch's CPU sort keeps ties in order).
    assert _kept(q, top_p) == sorted(kept)
    assert _hf_kept(q, top_p) == sorted(kept)


@pytest.mark.parametrize("seed", range(20))
def test_top_p_with_many_ties_equals_hugging_face(seed):
    rng = np.random.default_rng(seed)
    V = int(rng.integers(3, 17))  # PyTorch's CPU sort keeps ties in index order up to 16
    q = rng.choice([1.0, 2.0, 3.0], size=V)
    q = q / q.sum()
    top_p = float(rng.uniform(0.05, 0.95))
    assert _kept(q, top_p) == _hf_kept(q, top_p), (q, top_p)


@pytest.mark.parametrize(
    ("q", "top_p", "kept"),
    [
        ((0.5, 0.3, 0.2), 0.8, [0, 1]),  # 0.5 + 0.3 is exactly 0.8: the third goes
        ((0.5, 0.25, 0.125, 0.125), 0.75, [0, 1]),
        ((0.25, 0.25, 0.25, 0.25), 0.5, [2, 3]),
        ((0.2, 0.2, 0.2, 0.2, 0.2), 0.6, [2, 3, 4]),
        ((0.4, 0.3, 0.2, 0.1), 0.7, [0, 1]),
        ((0.4, 0.3, 0.2, 0.1), 0.9, [0, 1, 2]),
    ],
)
def test_top_p_at_an_exact_boundary_is_decided_as_in_exact_arithmetic(q, top_p, kept):
    # A set whose mass is exactly p reaches p. Hugging Face's warper agrees on either side
    # of the boundary (p -+ 1e-6); at p itself its answer rests on rounding.
    assert _kept(q, top_p) == kept
    assert _hf_kept(q, top_p - 1e-6) == kept == _kept(q, top_p - 1e-6)
    assert _hf_kept(q, top_p + 1e-6) == _kept(q, top_p + 1e-6)
    assert len(_kept(q, top_p + 1e-6)) == len(kept) + 1


def test_top_p_boundary_rounding_of_hugging_face_is_what_the_docstring_says():
    # (0.5, 0.3, 0.2), p = 0.8: the warper compares 0.2 with 1 - 0.8 = 0.19999999999999996
    # and keeps the third token in float64; in float32 it drops it.
    assert 1 - 0.8 < 0.2
    assert _hf_kept((0.5, 0.3, 0.2), 0.8) == [0, 1, 2]
    assert _hf_kept((0.5, 0.3, 0.2), 0.8, torch.float32) == [0, 1]
    assert _kept((0.5, 0.3, 0.2), 0.8) == [0, 1]


def test_top_p_extreme_inputs_stay_finite():
    z = np.array([[1e4, 1e4 - 1.0, -1e4, 0.0]])
    q = next_token_distribution(z, temperature=1e-3, top_p=0.9)
    assert np.isfinite(q).all() and q[0, 0] == 1.0
    q16 = next_token_distribution(z.astype(np.float16) / 1e3, top_p=0.5)
    assert np.isfinite(q16).all() and np.isclose(q16.sum(), 1, atol=1e-3)


@pytest.mark.parametrize("bad", [0, 0.0, -0.1, 1.5, float("nan"), True, "0.9"])
def test_top_p_outside_the_unit_interval_is_named(bad):
    with pytest.raises(ValueError, match=r"top_p must be a number in \(0, 1\]"):
        next_token_distribution(np.zeros(4), top_p=bad)


def test_sample_next_token_frequencies():
    rng = np.random.default_rng(9)
    logits = np.log(np.array([0.5, 0.25, 0.125, 0.125]))
    draws = sample_next_token(np.tile(logits, (40_000, 1)), rng=rng, top_k=2)
    freq = np.bincount(draws, minlength=4) / draws.size
    assert np.allclose(freq, [2 / 3, 1 / 3, 0, 0], atol=0.01)
    with pytest.raises(ValueError, match="temperature"):
        sample_next_token(logits, rng=rng, temperature=0.0)


# ---------------------------------------------------------------------------
# The decoder layer against torch.nn.TransformerDecoderLayer
# ---------------------------------------------------------------------------


def _torch_decoder_from(params, d, h, d_ff, norm_first, activation):
    layer = torch.nn.TransformerDecoderLayer(
        d,
        h,
        d_ff,
        dropout=0.0,
        activation=activation,
        batch_first=True,
        norm_first=norm_first,
        dtype=torch.float64,
    ).eval()
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    with torch.no_grad():
        for attn, sfx in ((layer.self_attn, ""), (layer.multihead_attn, "_cross")):
            W = np.concatenate([params[f"W_{x}{sfx}"] for x in "QKV"], axis=1).T
            b = np.concatenate([params[f"b_{x}{sfx}"] for x in "QKV"])
            attn.in_proj_weight.copy_(t(W))
            attn.in_proj_bias.copy_(t(b))
            attn.out_proj.weight.copy_(t(params[f"W_O{sfx}"].T))
            attn.out_proj.bias.copy_(t(params[f"b_O{sfx}"]))
        layer.linear1.weight.copy_(t(params["W_1"].T))
        layer.linear1.bias.copy_(t(params["b_1"]))
        layer.linear2.weight.copy_(t(params["W_2"].T))
        layer.linear2.bias.copy_(t(params["b_2"]))
        for i in (1, 2, 3):
            norm = getattr(layer, f"norm{i}")
            norm.weight.copy_(t(params[f"ln{i}_gamma"]))
            norm.bias.copy_(t(params[f"ln{i}_beta"]))
    return layer


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_decoder_layer_equals_torch(norm_first, activation):
    rng = np.random.default_rng(10)
    d, h, d_ff, n, m = 12, 3, 20, 5, 7
    params = init_decoder_layer_params(d, h, d_ff, rng=rng)
    for key in params:  # random norms and biases too
        if key.startswith(("ln", "b_")):
            params[key] = params[key] + rng.normal(scale=0.5, size=params[key].shape)
    Y = rng.normal(size=(2, n, d))
    memory = rng.normal(size=(2, m, d))
    memory_keep = np.ones((2, m), bool)
    memory_keep[1, 5:] = False  # the second source sentence is padded
    ours, weights = decoder_layer(
        Y,
        memory,
        params,
        h,
        self_mask=causal_mask(n),
        memory_mask=memory_keep[:, None, None, :],
        norm_first=norm_first,
        activation=activation,
    )
    layer = _torch_decoder_from(params, d, h, d_ff, norm_first, activation)
    with torch.no_grad():
        theirs = layer(
            torch.from_numpy(Y),
            torch.from_numpy(memory),
            tgt_mask=torch.from_numpy(~causal_mask(n)),  # torch: True = may NOT attend
            memory_key_padding_mask=torch.from_numpy(~memory_keep),
        ).numpy()
    assert np.abs(ours - theirs).max() < TOL
    assert weights["self"].shape == (2, h, n, n) and weights["cross"].shape == (2, h, n, m)
    assert (weights["cross"][1, :, :, 5:] == 0).all()


def test_decoder_layer_bad_input():
    rng = np.random.default_rng(11)
    params = init_decoder_layer_params(8, 2, 16, rng=rng)
    with pytest.raises(ValueError, match="same d_model"):
        decoder_layer(np.zeros((3, 8)), np.zeros((4, 6)), params, 2)
    del params["W_K_cross"]
    with pytest.raises(ValueError, match="W_K_cross"):
        decoder_layer(np.zeros((3, 8)), np.zeros((4, 8)), params, 2)


# ---------------------------------------------------------------------------
# The parameter counts quoted in the chapter
# ---------------------------------------------------------------------------


def test_bert_base_and_gpt2_small_parameter_counts():
    """The chapter counts BERT-base (with its pooler) and GPT-2 small from their sizes."""
    with torch.device("meta"):  # nothing is allocated
        bert = BertModel(BertConfig())
        gpt2 = GPT2LMHeadModel(GPT2Config())
    assert sum(p.numel() for p in bert.parameters()) == 109_482_240
    # parameters() lists the tied output matrix once
    assert sum(p.numel() for p in gpt2.parameters()) == 124_439_808
    assert gpt2.lm_head.weight is gpt2.transformer.wte.weight


# ---------------------------------------------------------------------------
# Beam search against exhaustive search and greedy decoding
# ---------------------------------------------------------------------------


def _table_model(seed, V, context=2):
    """Next-token log-probabilities that depend on the last ``context`` tokens."""
    table = np.random.default_rng(seed).normal(scale=2.0, size=(V,) * context + (V,))
    logp = table - np.log(np.exp(table).sum(-1, keepdims=True))

    def next_log_probs(tokens):
        return logp[tuple(tokens[:, -context:].T)]

    return next_log_probs


def _exhaustive(next_log_probs, prompt, T, V):
    seqs = np.array(list(np.ndindex(*(V,) * T)))  # (V**T, T)
    tokens = np.concatenate([np.tile(prompt, (len(seqs), 1)), seqs], axis=1)
    n0 = len(prompt)
    scores = sum(
        next_log_probs(tokens[:, : n0 + t])[np.arange(len(seqs)), seqs[:, t]] for t in range(T)
    )
    return tokens, scores


@pytest.mark.parametrize("seed", range(6))
def test_beam_search_wide_enough_is_exhaustive_search(seed):
    V, T = 3, 4
    f = _table_model(seed, V)
    prompt = np.array([0, 1])
    tokens_all, scores_all = _exhaustive(f, prompt, T, V)
    tokens, scores = beam_search(f, prompt, T, beam_width=V ** (T - 1))
    assert tokens.shape == (V ** (T - 1), len(prompt) + T)
    assert np.array_equal(tokens[0], tokens_all[scores_all.argmax()])
    assert np.isclose(scores[0], scores_all.max(), rtol=0, atol=1e-12)
    # every returned score is the exact log-probability of its sequence, best first
    assert np.all(np.diff(scores) <= 0)
    lookup = {tuple(t): s for t, s in zip(tokens_all, scores_all, strict=True)}
    assert np.allclose(scores, [lookup[tuple(t)] for t in tokens], atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_beam_search_of_width_one_is_greedy(seed):
    V, T = 5, 6
    f = _table_model(seed, V)
    tokens, scores = beam_search(f, np.array([2, 3]), T, beam_width=1)
    greedy = np.array([[2, 3]])
    total = 0.0
    for _ in range(T):
        logp = f(greedy)[0]
        total += logp.max()
        greedy = np.concatenate([greedy, [[logp.argmax()]]], axis=1)
    assert np.array_equal(tokens, greedy) and np.isclose(scores[0], total, atol=1e-12)


def test_beam_search_finds_what_greedy_misses():
    table = np.log(np.array([[0.6, 0.4], [0.05, 0.95]]))

    def f(tokens):
        return table[tokens[:, -1]]

    greedy, g_score = beam_search(f, [0], 2, beam_width=1)
    beam, b_score = beam_search(f, [0], 2, beam_width=2)
    assert greedy[0].tolist() == [0, 0, 0] and beam[0].tolist() == [0, 1, 1]
    assert np.isclose(np.exp(b_score[0]), 0.38) and np.isclose(np.exp(g_score[0]), 0.36)


def test_beam_search_of_width_one_on_gpt2_is_hugging_face_greedy():
    from helpers.softmax import log_softmax

    model, _ = tiny_gpt2(8)
    params = gpt2_params_from_hf(_numpy_state(model), num_heads=4)

    def f(tokens):
        return log_softmax(gpt2_forward(tokens, params)[:, -1, :])

    tokens, _ = beam_search(f, np.array([4, 5, 6]), 6, beam_width=1)
    with torch.no_grad():
        theirs = model.generate(
            torch.tensor([[4, 5, 6]]), max_new_tokens=6, do_sample=False, pad_token_id=0
        ).numpy()
    assert np.array_equal(tokens, theirs)
    wide, scores = beam_search(f, np.array([4, 5, 6]), 3, beam_width=4)
    assert wide.shape == (4, 6) and np.all(np.diff(scores) <= 0)


def test_beam_search_bad_input():
    def f(tokens):
        return np.zeros((len(tokens), 3))

    with pytest.raises(ValueError, match="beam_width must be positive"):
        beam_search(f, [0], 2, beam_width=0)
    with pytest.raises(TypeError, match="prompt_ids must be integer"):
        beam_search(f, [0.5], 2, beam_width=2)
    with pytest.raises(ValueError, match=r"prompt_ids must have shape \(n0,\)"):
        beam_search(f, [[0]], 2, beam_width=2)
    with pytest.raises(TypeError, match="next_log_probs must be callable"):
        beam_search(np.zeros(3), [0], 2, beam_width=2)
    with pytest.raises(ValueError, match=r"must return shape \(1, V\)"):
        beam_search(lambda t: np.zeros(3), [0], 2, beam_width=2)


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_beam_search_bad_end_token_or_length_penalty(bad):
    def f(tokens):
        return np.zeros((len(tokens), 3))

    with pytest.raises((ValueError, TypeError), match="eos_id"):
        beam_search(f, [0], 2, beam_width=2, eos_id=bad)
    with pytest.raises(ValueError, match=r"eos_id must be a token id below V = 3, got 3"):
        beam_search(f, [0], 2, beam_width=2, eos_id=3)
    for penalty in (float("nan"), float("inf"), True, "1"):
        with pytest.raises(ValueError, match="length_penalty must be a finite number"):
            beam_search(f, [0], 2, beam_width=2, eos_id=1, length_penalty=penalty)


# ---------------------------------------------------------------------------
# Beam search with an end token and length normalisation
# ---------------------------------------------------------------------------


def _old_beam_search(next_log_probs, prompt, T, w):
    """The call without an end token, as it was before eos_id existed: its results stay."""
    beams, scores = np.asarray(prompt)[None, :], np.zeros(1)
    for _ in range(T):
        total = (scores[:, None] + next_log_probs(beams)).ravel()
        best = np.argsort(-total, kind="stable")[:w]
        beam, token = np.divmod(best, len(total) // len(beams))
        beams, scores = np.concatenate([beams[beam], token[:, None]], axis=1), total[best]
    return beams, scores


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("V", "T", "w"), [(3, 4, 2), (5, 3, 4), (4, 5, 1), (3, 3, 20)])
def test_beam_search_without_an_end_token_keeps_its_old_results(seed, V, T, w):
    f = _table_model(seed, V)
    old_tokens, old_scores = _old_beam_search(f, [1, 2], T, w)
    for penalty in (1.0, 0.0, 2.5):  # no end token: the length penalty changes nothing
        tokens, scores = beam_search(f, [1, 2], T, beam_width=w, length_penalty=penalty)
        assert np.array_equal(tokens, old_tokens) and np.array_equal(scores, old_scores)


def _hypotheses(next_log_probs, prompt, T, V, eos):
    """Every hypothesis of at most T added tokens (ended by eos, or T long without one),
    with its summed log-probability and its number L of added tokens."""
    tokens, _ = _exhaustive(next_log_probs, prompt, T, V)
    n0 = len(prompt)
    added = tokens[:, n0:]
    ended = added == eos
    L = np.where(ended.any(1), ended.argmax(1) + 1, T)
    logp = np.stack(
        [
            next_log_probs(tokens[:, : n0 + t])[np.arange(len(tokens)), added[:, t]]
            for t in range(T)
        ],
        axis=1,
    )
    sums = np.where(np.arange(T) < L[:, None], logp, 0.0).sum(1)
    return added, L, sums


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("penalty", [0.0, 1.0, 2.0, -0.5])
def test_beam_search_wide_enough_finds_the_best_normalised_hypothesis(seed, penalty):
    # Nothing is pruned when the beam holds every hypothesis, and early stopping never
    # triggers: the best score is the maximum over all hypotheses of sum / L**penalty,
    # where L counts the added tokens, the end token included.
    V, T, eos, prompt = 3, 4, 2, np.array([0, 1])
    f = _table_model(seed, V)
    added, L, sums = _hypotheses(f, prompt, T, V, eos)
    normalised = sums / L**penalty
    tokens, scores = beam_search(f, prompt, T, beam_width=V**T, eos_id=eos, length_penalty=penalty)
    assert np.isclose(scores[0], normalised.max(), rtol=0, atol=1e-12)
    best = added[normalised.argmax()][: L[normalised.argmax()]]
    assert tokens[0, 2 : 2 + len(best)].tolist() == best.tolist()
    assert np.all(tokens[0, 2 + len(best) :] == eos)  # padded with the end token
    assert np.all(np.diff(scores) <= 0)
    # every returned score is its hypothesis's normalised score
    for row, score in zip(tokens, scores, strict=True):
        ended = row[2:] == eos
        n = int(ended.argmax()) + 1 if ended.any() else T
        key = np.flatnonzero((L == n) & (added[:, :n] == row[2 : 2 + n]).all(1))[0]
        assert np.isclose(score, normalised[key], rtol=0, atol=1e-12)


def test_beam_search_stops_when_beam_width_hypotheses_have_ended():
    # Token 2 ends. Step 1: of the 2 best extensions, "2" (0.5) ends and "0" (0.3) runs;
    # the beam is refilled with "1" (0.2). Step 2: the best extension, "0 2" (0.15), ends:
    # two hypotheses have ended, and the search stops (early_stopping=True) although 8
    # more steps were allowed.
    table = np.log(np.array([[0.3, 0.2, 0.5], [0.1, 0.6, 0.3], [1 / 3, 1 / 3, 1 / 3]]))
    calls = []

    def f(tokens):
        calls.append(tokens.tolist())
        return table[tokens[:, -1]]

    tokens, scores = beam_search(f, [0], 10, beam_width=2, eos_id=2, length_penalty=1.0)
    assert calls == [[[0]], [[0, 0], [0, 1]]]
    assert tokens.tolist() == [[0, 2, 2], [0, 0, 2]]  # the first is padded with the end token
    assert np.allclose(scores, [np.log(0.5), np.log(0.3 * 0.5) / 2])
    # without the normalisation the order is the same here, the scores the sums
    _, sums = beam_search(f, [0], 10, beam_width=2, eos_id=2, length_penalty=0.0)
    assert np.allclose(sums, [np.log(0.5), np.log(0.3 * 0.5)])


def eos_gpt2(seed, scale, eos=3):
    """A tiny GPT-2 (vocabulary 10) whose token ``eos`` ends a sequence, random weights."""
    return tiny_gpt2(seed, heads=2, vocab=10, eos=eos, scale=scale)[0]


def _log_probs_as_hugging_face(model):
    """next_log_probs as Hugging Face's beam search computes them: float32 log-softmax."""

    def next_log_probs(tokens):
        with torch.no_grad():
            logits = model(torch.from_numpy(tokens)).logits[:, -1].float()
        return torch.log_softmax(logits, dim=-1).double().numpy()

    return next_log_probs


def _hf_beam_search(model, prompt, T, w, eos, penalty):
    with torch.no_grad():
        out = model.generate(
            torch.from_numpy(prompt[None, :]),
            max_new_tokens=T,
            num_beams=w,
            num_return_sequences=w,
            eos_token_id=eos,
            pad_token_id=0 if eos is None else eos,
            length_penalty=penalty,
            early_stopping=True,
            do_sample=False,
            output_scores=True,
            return_dict_in_generate=True,
        )
    return out.sequences.numpy(), out.sequences_scores.numpy()


# (weight scale, seed) of tiny GPT-2s whose beams end at many different lengths
EOS_MODELS = [
    (0.5, 13),
    (0.5, 23),
    (0.5, 25),
    (0.5, 34),
    (0.5, 35),
    (0.8, 12),
    (0.8, 18),
    (0.8, 24),
]
EOS_SEARCHES = [(2, 1.0), (3, 0.0), (3, 2.0), (4, -0.5), (2, 0.5)]  # (beam width, penalty)


@pytest.mark.parametrize(("scale", "seed"), EOS_MODELS)
def test_beam_search_with_an_end_token_equals_hugging_face(scale, seed):
    # generate(num_beams=w, num_return_sequences=w, eos_token_id, length_penalty,
    # early_stopping=True): the same w hypotheses in the same order, padded with the end
    # token, and the same scores to float32 rounding (Hugging Face sums in float32).
    model = eos_gpt2(seed, scale)
    f = _log_probs_as_hugging_face(model)
    prompt, T = np.array([1, 2]), 6
    for w, penalty in EOS_SEARCHES:
        ours, scores = beam_search(f, prompt, T, beam_width=w, eos_id=3, length_penalty=penalty)
        theirs, their_scores = _hf_beam_search(model, prompt, T, w, 3, penalty)
        assert np.array_equal(ours, theirs), (w, penalty, ours, theirs)
        assert np.allclose(scores, their_scores, rtol=0, atol=1e-5), (w, penalty)


def test_the_hugging_face_cases_end_at_many_lengths_and_the_penalty_matters():
    # The parity test above is only as strong as its cases: hypotheses end early, at
    # several lengths, and the penalty changes the best hypothesis.
    lengths, changed = set(), 0
    for scale, seed in EOS_MODELS:
        f = _log_probs_as_hugging_face(eos_gpt2(seed, scale))
        bests = set()
        for w, penalty in EOS_SEARCHES:
            tokens, _ = beam_search(
                f, np.array([1, 2]), 6, beam_width=w, eos_id=3, length_penalty=penalty
            )
            ended = tokens[:, 2:] == 3
            lengths |= set(np.where(ended.any(1), ended.argmax(1) + 1, 6).tolist())
            bests.add(tuple(tokens[0]))
        changed += len(bests) > 1
    assert lengths == {1, 2, 3, 4, 5, 6}
    assert changed >= 6


@pytest.mark.parametrize(("scale", "seed"), EOS_MODELS[:3])
def test_beam_search_without_an_end_token_equals_hugging_face(scale, seed):
    # No end token: every hypothesis adds T tokens; Hugging Face divides every score by
    # T**length_penalty, which changes no ranking; the helper returns the sums.
    model = eos_gpt2(seed, scale, eos=None)
    f = _log_probs_as_hugging_face(model)
    prompt, T, w, penalty = np.array([1, 2]), 5, 3, 1.5
    ours, scores = beam_search(f, prompt, T, beam_width=w, length_penalty=penalty)
    theirs, their_scores = _hf_beam_search(model, prompt, T, w, None, penalty)
    assert np.array_equal(ours, theirs)
    assert np.allclose(scores / T**penalty, their_scores, rtol=0, atol=1e-5)

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


def tiny_gpt2(seed=0, layers=2, d=16, heads=4, vocab=40):
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
        eos_token_id=0,
        attn_implementation="eager",
    )
    model = GPT2LMHeadModel(config).double().eval()
    return _randomise(model, seed), config


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

"""Tests of helpers.positional: Hugging Face and PyTorch parity, shift properties, errors.

Hugging Face ``transformers`` is a test-only oracle here, built from tiny configurations
(no download): its Llama rotary embedding and ``apply_rotary_pos_emb`` (the "half"
layout), GPT-J's rotate-every-two (the interleaved layout), the conversion of Meta's
Llama weights to its layout, its RoPE scaling functions, BLOOM's ALiBi, and the
sinusoidal encodings of DistilBERT, Marian, M2M100 and GPT-J.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import helpers
from helpers.attention import scaled_dot_product_attention
from helpers.masks import causal_mask
from helpers.positional import (
    alibi_bias,
    alibi_slopes,
    rope,
    rope_frequencies,
    rotate_pairs,
    sinusoidal_encoding,
    sinusoidal_shift,
    t5_relative_position_bucket,
)

PROPERTY = settings(max_examples=60, deadline=None)

# Tolerances.
# * Float64 against an independent float64 computation: a few roundings of O(1) numbers
#   (sin, cos of the same float64 angle, two products and a sum): ~1e-15; 1e-12 leaves room.
ATOL_64 = 1e-12
# * Against code that computes its angles in float32 (Hugging Face builds inv_freq and
#   position * inv_freq in float32): an angle p·θ carries a relative error ~6e-8, so an
#   absolute error ~6e-8·p, ~4e-6 at p = 64; cos and sin inherit it.
ATOL_F32_ANGLES = 2e-5
# * Scores of rotated vectors at positions up to ~1e6: float64 angles of size 1e6 carry
#   absolute errors ~1e6 · 1.1e-16 ~ 1e-10 rad, times |q| |k| ~ d for the score.
RTOL_FAR, ATOL_FAR = 1e-8, 1e-7


def half_to_interleaved_columns(d: int) -> np.ndarray:
    """Column order that turns pairs (2i, 2i+1) into pairs (i, i + d/2): evens, then odds."""
    return np.r_[0:d:2, 1:d:2]


# ---------------------------------------------------------------------------
# Sinusoidal encoding
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "d", "base"), [(1, 2, 10000.0), (7, 6, 10000.0), (50, 64, 100.0)])
def test_sinusoidal_encoding_is_the_formula_entry_by_entry(n, d, base):
    PE = sinusoidal_encoding(n, d, base=base)
    assert PE.shape == (n, d) and PE.dtype == np.float64
    for p in range(n):
        for i in range(d // 2):
            w = base ** (-2 * i / d)
            assert PE[p, 2 * i] == pytest.approx(math.sin(p * w), abs=ATOL_64)
            assert PE[p, 2 * i + 1] == pytest.approx(math.cos(p * w), abs=ATOL_64)


@pytest.mark.parametrize(("n", "d"), [(16, 8), (40, 32)])
def test_sinusoidal_encoding_matches_distilbert_interleaved(n, d):
    from transformers.models.distilbert.modeling_distilbert import (
        _create_sinusoidal_embeddings,
    )

    theirs = _create_sinusoidal_embeddings(n, d, torch.empty(n, d)).numpy()  # float32
    np.testing.assert_allclose(sinusoidal_encoding(n, d), theirs, atol=1e-6)


@pytest.mark.parametrize(("n", "d"), [(16, 8), (40, 32)])
def test_marian_and_gptj_concatenate_the_same_sines_and_cosines(n, d):
    from transformers.models.gptj.modeling_gptj import create_sinusoidal_positions
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    ours = sinusoidal_encoding(n, d)
    cols = half_to_interleaved_columns(d)  # all sines, then all cosines
    marian = MarianSinusoidalPositionalEmbedding(n, d).create_weight().numpy()
    gptj = create_sinusoidal_positions(n, d).numpy()
    assert not np.allclose(marian, ours)  # a different layout ...
    np.testing.assert_allclose(marian, ours[:, cols], atol=1e-6)  # ... of the same numbers
    np.testing.assert_allclose(gptj, ours[:, cols], atol=1e-5)


@pytest.mark.parametrize("d", [8, 32])
def test_m2m100_concatenates_with_tensor2tensor_frequencies(d):
    """fairseq/tensor2tensor space the frequencies as 10000^(-i/(d/2 - 1)): the lowest is
    exactly 1/10000. That is the paper's formula with base 10000^((d/2)/(d/2 - 1))."""
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding

    n, half = 30, d // 2
    theirs = M2M100SinusoidalPositionalEmbedding.get_embedding(n, d).numpy()
    ours = sinusoidal_encoding(n, d, base=10000.0 ** (half / (half - 1)))
    np.testing.assert_allclose(theirs, ours[:, half_to_interleaved_columns(d)], atol=2e-6)
    assert not np.allclose(theirs, sinusoidal_encoding(n, d)[:, half_to_interleaved_columns(d)])


@PROPERTY
@given(
    d_half=st.integers(1, 32),
    p=st.integers(0, 300),
    k=st.integers(-300, 300),
    base=st.sampled_from([10.0, 10000.0, 1e6]),
)
def test_sinusoidal_shift_moves_every_position_by_k(d_half, p, k, base):
    assume(p + k >= 0)
    d = 2 * d_half
    PE = sinusoidal_encoding(max(p, p + k) + 1, d, base=base)
    R = sinusoidal_shift(k, d, base=base)
    np.testing.assert_allclose(PE[p] @ R, PE[p + k], atol=1e-9)


@PROPERTY
@given(
    d_half=st.integers(1, 16),
    a=st.floats(-1e3, 1e3, allow_nan=False),
    b=st.floats(-1e3, 1e3, allow_nan=False),
)
def test_sinusoidal_shifts_are_rotations_that_compose(d_half, a, b):
    d = 2 * d_half
    Ra, Rb = sinusoidal_shift(a, d), sinusoidal_shift(b, d)
    np.testing.assert_allclose(Ra @ Ra.T, np.eye(d), atol=1e-12)  # orthogonal
    np.testing.assert_allclose(Ra.T, sinusoidal_shift(-a, d), atol=1e-12)  # R(a)^T = R(-a)
    np.testing.assert_allclose(Ra @ Rb, sinusoidal_shift(a + b, d), atol=1e-9)
    assert np.linalg.det(Ra) == pytest.approx(1.0)


def test_sinusoidal_shift_by_a_real_number_interpolates():
    d, k = 8, 2.5
    w = 10000.0 ** (-np.arange(0, d, 2) / d)
    row = np.empty(d)
    row[0::2], row[1::2] = np.sin((3 + k) * w), np.cos((3 + k) * w)
    np.testing.assert_allclose(sinusoidal_encoding(4, d)[3] @ sinusoidal_shift(k, d), row)


def test_dot_product_of_encodings_depends_only_on_the_offset():
    d, n = 64, 200
    PE = sinusoidal_encoding(n, d)
    G = PE @ PE.T  # (n, n)
    w = 10000.0 ** (-np.arange(0, d, 2) / d)
    offsets = np.arange(n)[None, :] - np.arange(n)[:, None]
    np.testing.assert_allclose(G, np.cos(offsets[..., None] * w).sum(-1), atol=1e-10)
    assert np.allclose(np.diag(G), d / 2)
    np.testing.assert_allclose(G, G.T)  # symmetric: +k and -k look the same


# ---------------------------------------------------------------------------
# RoPE
# ---------------------------------------------------------------------------


def llama_rotary(d_head, num_heads, *, theta=10000.0, max_positions=64, **scaling):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    params = {"rope_type": "default", "rope_theta": theta, **scaling}
    config = LlamaConfig(
        hidden_size=d_head * num_heads,
        num_attention_heads=num_heads,
        head_dim=d_head,
        max_position_embeddings=max_positions,
        rope_parameters=params,
    )
    return config, LlamaRotaryEmbedding(config)


@pytest.mark.parametrize(("d_head", "num_heads", "n", "theta"), [(8, 2, 10, 1e4), (16, 3, 33, 5e5)])
def test_half_layout_matches_hugging_face_llama(d_head, num_heads, n, theta):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    rng = np.random.default_rng(0)
    q = rng.normal(size=(2, num_heads, n, d_head))  # (batch, heads, n, d_head)
    k = rng.normal(size=(2, num_heads, n, d_head))
    positions = np.arange(n)
    _, rotary = llama_rotary(d_head, num_heads, theta=theta)
    ids = torch.arange(n)[None].expand(2, n)
    cos, sin = rotary(torch.zeros(1, dtype=torch.float64), ids)  # float32 angles, as HF does
    q_hf, k_hf = apply_rotary_pos_emb(torch.tensor(q), torch.tensor(k), cos, sin)
    ours_q = rope(q, positions, base=theta, layout="half")
    ours_k = rope(k, positions, base=theta, layout="half")
    np.testing.assert_allclose(ours_q, q_hf.numpy(), atol=ATOL_F32_ANGLES)
    np.testing.assert_allclose(ours_k, k_hf.numpy(), atol=ATOL_F32_ANGLES)

    # The rotation rule itself, exactly: HF's formula with float64 angles.
    angles = torch.tensor(positions[:, None] * rope_frequencies(d_head, base=theta))
    emb = torch.cat([angles, angles], dim=-1)[None]  # (1, n, d_head)
    q64, _ = apply_rotary_pos_emb(torch.tensor(q), torch.tensor(k), emb.cos(), emb.sin())
    np.testing.assert_allclose(ours_q, q64.numpy(), atol=ATOL_64)


@pytest.mark.parametrize(("d_head", "n"), [(8, 12), (32, 40)])
def test_interleaved_layout_matches_gptj_rotate_every_two(d_head, n):
    from transformers.models.gptj.modeling_gptj import (
        apply_rotary_pos_emb,
        create_sinusoidal_positions,
    )

    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, n, 3, d_head))  # GPT-J: (batch, n, heads, d_head)
    table = create_sinusoidal_positions(n, d_head)  # (n, d_head): sines | cosines, float32
    sin, cos = torch.split(table[None].expand(2, n, d_head), d_head // 2, dim=-1)
    theirs = apply_rotary_pos_emb(torch.tensor(x), sin, cos).numpy()
    ours = rope(np.swapaxes(x, 1, 2), layout="interleaved")  # (batch, heads, n, d_head)
    np.testing.assert_allclose(np.swapaxes(ours, 1, 2), theirs, atol=ATOL_F32_ANGLES)

    angles = np.arange(n)[:, None] * rope_frequencies(d_head)  # float64 angles, exact rule
    sin64, cos64 = torch.tensor(np.sin(angles))[None], torch.tensor(np.cos(angles))[None]
    exact = apply_rotary_pos_emb(torch.tensor(x), sin64, cos64).numpy()
    np.testing.assert_allclose(np.swapaxes(ours, 1, 2), exact, atol=ATOL_64)


def test_interleaved_layout_is_multiplication_by_complex_exponentials():
    """Meta's Llama code views pairs (2i, 2i+1) as complex numbers times e^(i m θ)."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(4, 9, 16))
    positions = np.array([0, 1, 2, 5, 8, 13, 21, 34, 55])
    z = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * positions[:, None] * rope_frequencies(16))
    expected = np.stack([z.real, z.imag], axis=-1).reshape(x.shape)
    np.testing.assert_allclose(rope(x, positions), expected, atol=ATOL_64)


def permute_meta_to_hf(w: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Hugging Face's conversion of Meta's Llama q/k weights (out_features, in_features)
    to its rotate-half layout, as in its convert_llama_weights_to_hf script."""
    out_features, in_features = w.shape
    d_head = out_features // num_heads
    return (
        w.view(num_heads, d_head // 2, 2, in_features)
        .transpose(1, 2)
        .reshape(out_features, in_features)
    )


@pytest.mark.parametrize(("d_model", "num_heads"), [(16, 2), (48, 4)])
def test_converted_weights_give_the_same_scores_in_either_layout(d_model, num_heads):
    """Meta's checkpoint with interleaved RoPE = HF's converted checkpoint with rotate-half
    RoPE (Hugging Face's own code), and = the book's per-head column permutation."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    rng = np.random.default_rng(3)
    n, d_head = 11, d_model // num_heads
    X = rng.normal(size=(n, d_model))
    W_Q, W_K = rng.normal(size=(2, d_model, d_model)) / math.sqrt(d_model)  # X @ W
    split = lambda Y: Y.reshape(n, num_heads, d_head).transpose(1, 0, 2)  # noqa: E731
    scores_meta = rope(split(X @ W_Q)) @ np.swapaxes(rope(split(X @ W_K)), -1, -2)

    # Hugging Face's conversion acts on torch's (out, in) weights: the rows of W.T.
    W_Q_hf = permute_meta_to_hf(torch.tensor(W_Q.T), num_heads).numpy().T
    W_K_hf = permute_meta_to_hf(torch.tensor(W_K.T), num_heads).numpy().T
    cols = np.concatenate(
        [h * d_head + half_to_interleaved_columns(d_head) for h in range(num_heads)]
    )
    np.testing.assert_array_equal(W_Q_hf, W_Q[:, cols])  # = a permutation of our columns

    angles = np.arange(n)[:, None] * rope_frequencies(d_head)
    emb = torch.tensor(np.concatenate([angles, angles], axis=-1))
    q_hf, k_hf = apply_rotary_pos_emb(
        torch.tensor(split(X @ W_Q_hf))[None],
        torch.tensor(split(X @ W_K_hf))[None],
        emb.cos()[None],
        emb.sin()[None],
    )
    scores_hf = (q_hf @ k_hf.transpose(-1, -2))[0].numpy()
    np.testing.assert_allclose(scores_hf, scores_meta, atol=1e-12)
    ours_half = rope(split(X @ W_Q_hf), layout="half") @ np.swapaxes(
        rope(split(X @ W_K_hf), layout="half"), -1, -2
    )
    np.testing.assert_allclose(ours_half, scores_meta, atol=1e-12)
    unconverted = rope(split(X @ W_Q), layout="half") @ np.swapaxes(
        rope(split(X @ W_K), layout="half"), -1, -2
    )
    assert not np.allclose(unconverted, scores_meta, atol=1e-3)  # the wrong layout


@PROPERTY
@given(
    d_half=st.integers(1, 24),
    m=st.integers(0, 2000),
    offset=st.integers(-2000, 2000),
    shift=st.integers(0, 10**6),
    layout=st.sampled_from(["interleaved", "half"]),
    seed=st.integers(0, 2**16),
)
def test_rope_score_depends_only_on_the_offset(d_half, m, offset, shift, layout, seed):
    d = 2 * d_half
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, 1, d))
    near = rope(q, [m], layout=layout) @ rope(k, [m + offset], layout=layout).T
    far = rope(q, [m + shift], layout=layout) @ rope(k, [m + offset + shift], layout=layout).T
    np.testing.assert_allclose(far, near, rtol=RTOL_FAR, atol=ATOL_FAR)


@PROPERTY
@given(d_half=st.integers(1, 16), seed=st.integers(0, 2**16))
def test_rope_is_a_rotation_and_the_layouts_are_a_permutation_apart(d_half, seed):
    d = 2 * d_half
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(3, 7, d))
    positions = rng.integers(-100, 10**5, size=7)
    y = rope(x, positions)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1))
    cols = half_to_interleaved_columns(d)
    np.testing.assert_allclose(rope(x[..., cols], positions, layout="half"), y[..., cols])
    np.testing.assert_allclose(rope(y, -positions), x, atol=1e-10)  # the inverse rotation


def test_rope_defaults_to_positions_0_to_n_minus_1_and_keeps_leading_axes():
    x = np.random.default_rng(4).normal(size=(2, 3, 5, 8))
    np.testing.assert_array_equal(rope(x), rope(x, np.arange(5)))
    assert rope(x).shape == x.shape
    np.testing.assert_array_equal(rope(x)[1, 2], rope(x[1, 2]))
    np.testing.assert_array_equal(rope(x, np.zeros(5)), x)  # position 0: no rotation


def test_rope_with_interpolated_positions_equals_scaled_frequencies():
    x = np.random.default_rng(5).normal(size=(9, 16))
    positions = np.arange(9) * 100
    by_positions = rope(x, positions / 4)
    by_frequencies = rotate_pairs(
        x, positions[:, None] * rope_frequencies(16, scaling="linear", factor=4)
    )
    np.testing.assert_allclose(by_positions, by_frequencies, atol=ATOL_64)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_rope_keeps_float_dtypes_and_computes_angles_in_float64(dtype):
    rng = np.random.default_rng(6)
    x = rng.normal(size=(4, 8))
    positions = np.array([0, 1, 10**5, 10**6])
    y = rope(x.astype(dtype), positions)
    assert y.dtype == dtype
    exact = rope(x.astype(dtype).astype(np.float64), positions)
    tol = {np.float16: 2e-3, np.float32: 1e-6, np.float64: 1e-15}[dtype]
    np.testing.assert_allclose(y.astype(np.float64), exact, atol=tol * 4)
    assert rope(np.arange(8).reshape(2, 4)).dtype == np.float64


@pytest.mark.parametrize(
    ("d_head", "theta", "factor", "original"),
    [(16, 1e4, 4.0, 64), (64, 1e4, 8.0, 2048), (128, 5e5, 16.0, 4096), (32, 1e4, 2.0, 512)],
)
def test_rope_frequencies_match_hugging_face_scaling(d_head, theta, factor, original):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    def hf(rope_type, seq_len=None, **params):
        config, _ = llama_rotary(
            d_head,
            2,
            theta=theta,
            max_positions=int(factor * original),
            rope_type=rope_type,
            **params,
        )
        return ROPE_INIT_FUNCTIONS[rope_type](config, seq_len=seq_len)

    rtol = 1e-6  # HF computes in float32
    inv_freq, scale = hf("linear", factor=factor)
    np.testing.assert_allclose(
        rope_frequencies(d_head, base=theta, scaling="linear", factor=factor),
        inv_freq.numpy(),
        rtol=rtol,
    )
    assert scale == 1.0
    # Static NTK-aware scaling is HF's dynamic NTK at a length of factor * L (with factor 1
    # in its config, the base becomes base * (seq_len / L) ** (d / (d - 2))).
    config, _ = llama_rotary(
        d_head, 2, theta=theta, max_positions=original, rope_type="dynamic", factor=1.0
    )
    inv_freq, _ = ROPE_INIT_FUNCTIONS["dynamic"](config, seq_len=int(factor * original))
    ours = rope_frequencies(d_head, base=theta, scaling="ntk", factor=factor)
    np.testing.assert_allclose(ours, inv_freq.numpy(), rtol=rtol)
    inv_freq, attention_factor = hf(
        "yarn", factor=factor, original_max_position_embeddings=original
    )
    ours = rope_frequencies(
        d_head, base=theta, scaling="yarn", factor=factor, original_length=original
    )
    np.testing.assert_allclose(ours, inv_freq.numpy(), rtol=rtol)
    assert attention_factor == pytest.approx(0.1 * math.log(factor) + 1)


@pytest.mark.parametrize("factor", [2.0, 8.0, 32.0])
def test_what_each_scaling_does_to_the_angles(factor):
    d, L = 128, 4096
    theta = rope_frequencies(d)
    pi = rope_frequencies(d, scaling="linear", factor=factor)
    ntk = rope_frequencies(d, scaling="ntk", factor=factor)
    yarn = rope_frequencies(d, scaling="yarn", factor=factor, original_length=L)
    np.testing.assert_allclose(pi, theta / factor)  # every pair slowed by s
    assert ntk[0] == theta[0] and ntk[-1] == pytest.approx(theta[-1] / factor)
    assert np.all(np.diff(theta / ntk) > 0)  # slowed more the slower the pair
    turns = L * theta / (2 * np.pi)  # turns over the trained context
    np.testing.assert_array_equal(yarn[turns > 32], theta[turns > 32])  # fast pairs kept
    np.testing.assert_allclose(yarn[turns < 1], theta[turns < 1] / factor)  # slow: / s
    assert np.all((yarn <= theta) & (yarn >= theta / factor))
    # With any of the three, the angles reached at position s L - 1 by the slowest pair
    # stay within the range the model saw on positions 0 .. L - 1.
    for scaled in (pi, ntk, yarn):
        assert (factor * L - 1) * scaled[-1] <= (L - 1) * theta[-1] * (1 + 1e-12) + theta[-1]


# ---------------------------------------------------------------------------
# ALiBi
# ---------------------------------------------------------------------------


def paper_slopes(n: int) -> list[float]:
    """ALiBi's slope rule, written as in the paper's released code (a recursion)."""

    def power_of_2(k):
        start = 2 ** (-(2 ** -(math.log2(k) - 3)))
        return [start * start**i for i in range(k)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + paper_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("h", range(1, 65))
def test_alibi_slopes_match_the_paper_and_bloom(h):
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

    ours = alibi_slopes(h)
    assert ours.shape == (h,) and ours.dtype == np.float64
    np.testing.assert_allclose(ours, paper_slopes(h), rtol=1e-14)
    np.testing.assert_allclose(ours, _get_alibi_slopes(h, "cpu").numpy(), rtol=1e-6)
    assert len(set(ours)) == h and (ours > 0).all() and (ours < 1).all()


def test_alibi_slopes_by_hand():
    assert list(alibi_slopes(8)) == [2.0**-k for k in range(1, 9)]
    assert list(alibi_slopes(4)) == [2.0**-k for k in (2, 4, 6, 8)]
    assert list(alibi_slopes(6)) == [2.0**-k for k in (2, 4, 6, 8, 1, 3)]
    assert list(alibi_slopes(1)) == [2.0**-8]


@pytest.mark.parametrize(("h", "n", "m"), [(1, 1, 1), (4, 6, 6), (3, 5, 9), (8, 1, 7), (6, 16, 16)])
def test_alibi_bias_is_minus_slope_times_distance(h, n, m):
    bias = alibi_bias(h, n, m)
    assert bias.shape == (h, n, m)
    slopes = alibi_slopes(h)
    for k in range(h):
        for i in range(n):
            for j in range(m):
                assert bias[k, i, j] == -slopes[k] * abs(i + m - n - j)
    assert (bias <= 0).all() and np.signbit(bias[bias == 0]).sum() == 0  # no -0.0
    allowed = causal_mask(n, m)
    i_pos = np.arange(n)[:, None] + m - n
    j_pos = np.arange(m)[None, :]
    np.testing.assert_array_equal(
        np.where(allowed, bias, 0), np.where(allowed, -slopes[:, None, None] * (i_pos - j_pos), 0)
    )


@pytest.mark.parametrize(
    ("h", "n", "m", "d_k"), [(2, 5, 5, 4), (4, 3, 8, 8), (6, 16, 16, 8), (8, 1, 10, 2)]
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_alibi_through_attention_matches_torch_sdpa(h, n, m, d_k, dtype):
    rng = np.random.default_rng(7)
    Q = rng.normal(size=(2, h, n, d_k)).astype(dtype)
    K = rng.normal(size=(2, h, m, d_k)).astype(dtype)
    V = rng.normal(size=(2, h, m, 3)).astype(dtype)
    allowed = causal_mask(n, m)
    bias = alibi_bias(h, n, m)
    ours, _ = scaled_dot_product_attention(Q, K, V, allowed, bias=bias.astype(dtype))
    float_mask = torch.tensor(np.where(allowed, bias, -np.inf).astype(dtype))  # (h, n, m)
    theirs = F.scaled_dot_product_attention(
        torch.tensor(Q), torch.tensor(K), torch.tensor(V), attn_mask=float_mask
    ).numpy()
    tol = 1e-12 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(ours, theirs, atol=tol, rtol=tol)


@pytest.mark.parametrize(("h", "n"), [(4, 7), (12, 20)])
def test_bloom_shortcut_equals_alibi_under_the_causal_mask_only(h, n):
    """BLOOM (after the paper's code) adds +slope·j to every row: a constant per row away
    from -slope·(i - j) where j <= i, so the causal softmax is the same; without the mask
    it is not."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    rng = np.random.default_rng(8)
    Q, K, V = rng.normal(size=(3, 1, h, n, 8))
    shortcut = build_alibi_tensor(torch.ones(1, n), h, torch.float64).reshape(h, 1, n).numpy()
    np.testing.assert_allclose(shortcut, alibi_slopes(h)[:, None, None] * np.arange(n), rtol=1e-6)
    allowed = causal_mask(n)
    proper = alibi_bias(h, n)
    _, A = scaled_dot_product_attention(Q, K, V, allowed, bias=proper)
    _, A_short = scaled_dot_product_attention(Q, K, V, allowed, bias=shortcut)
    np.testing.assert_allclose(A_short, A, atol=1e-6)  # (BLOOM's slopes are float32)
    _, A_full = scaled_dot_product_attention(Q, K, V, bias=proper)
    _, A_full_short = scaled_dot_product_attention(Q, K, V, bias=shortcut)
    assert np.abs(A_full_short - A_full).max() > 0.1


@pytest.mark.parametrize("h", [1, 3, 5, 6, 8, 12, 17, 24, 40, 64])
def test_mpt_writes_the_slope_rule_differently_with_the_same_result(h):
    """MPT's code takes the odd-numbered slopes of the next power of 2, then the even ones,
    and adds -slope·(n - 1 - j) to every row: the last row of ALiBi's bias, for all rows."""
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    n = 9
    theirs = build_mpt_alibi_tensor(h, n).numpy()  # (h, 1, n)
    np.testing.assert_allclose(theirs[:, 0, 0] / -(n - 1), alibi_slopes(h), rtol=1e-6)
    np.testing.assert_allclose(theirs, alibi_bias(h, n)[:, -1:, :], rtol=1e-6)


@PROPERTY
@given(h=st.integers(1, 16), n=st.integers(1, 12), extra=st.integers(0, 12), t=st.integers(0, 50))
def test_alibi_bias_depends_only_on_the_offset(h, n, extra, t):
    m = n + extra
    small, big = alibi_bias(h, n, m), alibi_bias(h, n + t, m + t)
    np.testing.assert_array_equal(big[:, t:, t:], small)  # the same pairs, t positions on
    np.testing.assert_array_equal(small, alibi_bias(h, m)[:, m - n :, :])  # last n rows


# ---------------------------------------------------------------------------
# The public API and bad input
# ---------------------------------------------------------------------------


def test_exported_from_helpers():
    for name in (
        "alibi_bias",
        "alibi_slopes",
        "rope",
        "rope_frequencies",
        "rotate_pairs",
        "sinusoidal_encoding",
        "sinusoidal_shift",
    ):
        assert name in helpers.__all__ and callable(getattr(helpers, name))


@pytest.mark.parametrize(
    ("call", "exception", "message"),
    [
        (lambda: sinusoidal_encoding(0, 8), ValueError, "n must be positive, got 0"),
        (lambda: sinusoidal_encoding(4, 7), ValueError, "d_model must be even"),
        (lambda: sinusoidal_encoding(4, 0), ValueError, "d_model must be positive"),
        (lambda: sinusoidal_encoding(4.0, 8), TypeError, "n must be an integer"),
        (lambda: sinusoidal_encoding(4, 8, base=0), ValueError, "base must be positive, got 0"),
        (lambda: sinusoidal_encoding(4, 8, base=-1.0), ValueError, "base must be positive"),
        (lambda: sinusoidal_encoding(4, 8, base="10000"), TypeError, "base must be a real number"),
        (lambda: sinusoidal_shift(1, 5), ValueError, "one pair per frequency), got 5"),
        (lambda: sinusoidal_shift(float("nan"), 4), ValueError, "k must be finite"),
        (lambda: sinusoidal_shift(True, 4), TypeError, "k must be a real number"),
        (lambda: rope(np.ones((3, 5))), ValueError, "got x.shape = (3, 5)"),
        (lambda: rope(np.ones(4)), ValueError, "x must have shape (..., n, d)"),
        (
            lambda: rope(np.ones((3, 4)), [0, 1]),
            ValueError,
            "positions must have shape (n,) = (3,)",
        ),
        (
            lambda: rope(np.ones((3, 4)), np.zeros((1, 3))),
            ValueError,
            "got positions.shape = (1, 3)",
        ),
        (lambda: rope(np.ones((3, 4)), [0, 1, np.inf]), ValueError, "positions must be finite"),
        (
            lambda: rope(np.ones((3, 4)), [True, False, True]),
            TypeError,
            "positions must be an array of real",
        ),
        (
            lambda: rope(np.ones((3, 4), dtype=bool)),
            TypeError,
            "x must be an array of real numbers",
        ),
        (lambda: rope(np.ones((3, 4)), base=0.0), ValueError, "base must be positive"),
        (lambda: rope(np.ones((3, 4)), layout="pairs"), ValueError, "layout must be 'interleaved'"),
        (lambda: rope(np.full((3, 4), np.nan)), ValueError, "x must be finite"),
        (
            lambda: rotate_pairs(np.ones((3, 4)), np.ones((3, 3))),
            ValueError,
            "angles must broadcast",
        ),
        (lambda: rope_frequencies(6, scaling="ntk-aware"), ValueError, "scaling must be None"),
        (lambda: rope_frequencies(6, factor=2.0), ValueError, "needs a scaling"),
        (
            lambda: rope_frequencies(6, scaling="yarn", factor=2.0),
            ValueError,
            "needs original_length",
        ),
        (
            lambda: rope_frequencies(6, scaling="linear", factor=0),
            ValueError,
            "factor must be positive",
        ),
        (
            lambda: rope_frequencies(
                6, scaling="yarn", factor=2.0, original_length=8, beta_fast=1, beta_slow=2
            ),
            ValueError,
            "beta_fast must exceed beta_slow",
        ),
        (lambda: rope_frequencies(7), ValueError, "d_head must be even"),
        (lambda: alibi_slopes(0), ValueError, "h must be positive, got 0"),
        (lambda: alibi_slopes(2.5), TypeError, "h must be an integer"),
        (lambda: alibi_bias(0, 4), ValueError, "h must be positive"),
        (lambda: alibi_bias(2, 0), ValueError, "n must be positive, got 0"),
        (lambda: alibi_bias(2, 5, 3), ValueError, "m (keys) must be at least n (queries)"),
        (lambda: alibi_bias(2, 3, "4"), TypeError, "m must be an integer"),
    ],
)
def test_bad_input_raises_naming_the_argument(call, exception, message):
    with pytest.raises(exception) as info:
        call()
    assert message in str(info.value)


# ---------------------------------------------------------------------------
# T5's relative position buckets
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(
    ("num_buckets", "max_distance"), [(32, 128), (8, 20), (16, 64), (64, 256), (4, 3)]
)
def test_t5_buckets_match_hugging_face(bidirectional, num_buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention

    offsets = np.arange(-1000, 1001)
    theirs = T5Attention._relative_position_bucket(
        torch.from_numpy(offsets),
        bidirectional=bidirectional,
        num_buckets=num_buckets,
        max_distance=max_distance,
    ).numpy()
    ours = t5_relative_position_bucket(
        offsets, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert ours.dtype == np.int64 and ours.shape == offsets.shape
    np.testing.assert_array_equal(ours, theirs)
    # a (query, key) grid, as T5 builds it: memory position minus context position
    grid = np.subtract.outer(np.arange(7), np.arange(9)).T  # (9, 7), any shape
    np.testing.assert_array_equal(
        t5_relative_position_bucket(
            grid, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
        ),
        ours[grid + 1000],
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"relative_position": np.array([0.5])}, TypeError, "relative_position must be"),
        ({"relative_position": [1], "bidirectional": 1}, TypeError, "bidirectional"),
        ({"relative_position": [1], "num_buckets": 2}, ValueError, "num_buckets"),
        (
            {"relative_position": [1], "num_buckets": 1, "bidirectional": False},
            ValueError,
            "num_buckets",
        ),
        (
            {"relative_position": [1], "max_distance": 4, "num_buckets": 32},
            ValueError,
            "max_distance",
        ),
        ({"relative_position": [1], "num_buckets": 3.0}, TypeError, "num_buckets"),
    ],
)
def test_t5_buckets_reject_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        t5_relative_position_bucket(**kwargs)

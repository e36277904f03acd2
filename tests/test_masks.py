"""Tests of helpers.masks: values, PyTorch's alignments, broadcasting, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention.bias import causal_lower_right, causal_upper_left

from helpers.attention import scaled_dot_product_attention
from helpers.masks import causal_mask, padding_mask

PROPERTY = settings(max_examples=50, deadline=None)
SIZES = [0, 1, 2, 5, 8]

# Attention outputs in float64 against PyTorch's SDPA on O(1) inputs: both sides are
# off by ~1e-16 per operation, a few dozen operations deep.
PARITY = {"rtol": 1e-12, "atol": 1e-13}


def torch_mask(variant, n: int, m: int) -> np.ndarray:
    """PyTorch's causal bias ``variant(n, m)`` as a boolean array (via its materialiser).

    For n > m, ``causal_lower_right`` warns that it "will produce NaNs in the output";
    on the CPU, torch 2.13's SDPA gives 0 on those rows instead (the same as ours).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return variant(n, m)._materialize().numpy()


# ---------------------------------------------------------------------------
# causal_mask
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", SIZES)
def test_causal_mask_is_the_lower_triangle_with_the_diagonal(n):
    mask = causal_mask(n)
    assert mask.dtype == np.bool_ and mask.shape == (n, n)
    assert np.array_equal(mask, np.tril(np.ones((n, n), dtype=bool)))


@pytest.mark.parametrize("n", [1, 2, 5])
@pytest.mark.parametrize("m", [1, 2, 5, 8])
def test_default_alignment_is_pytorch_lower_right(n, m):
    assert np.array_equal(causal_mask(n, m), torch_mask(causal_lower_right, n, m))


@pytest.mark.parametrize("n", [1, 2, 5])
@pytest.mark.parametrize("m", [1, 2, 5, 8])
def test_offset_zero_is_pytorch_upper_left_is_causal(n, m):
    mask = causal_mask(n, m, offset=0)
    assert np.array_equal(mask, torch_mask(causal_upper_left, n, m))
    assert np.array_equal(mask, np.tril(np.ones((n, m), dtype=bool)))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize(("n", "m"), [(6, 6), (3, 7), (7, 3)])
def test_attention_with_causal_mask_matches_torch(seed, n, m):
    rng = np.random.default_rng(seed)
    Q, K, V = rng.normal(size=(2, n, 4)), rng.normal(size=(2, m, 4)), rng.normal(size=(2, m, 3))
    q, k, v = (torch.from_numpy(a) for a in (Q, K, V))
    top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True).numpy()
    got = scaled_dot_product_attention(Q, K, V, causal_mask(n, m, offset=0))[0]
    assert np.allclose(got, top_left, **PARITY)
    bottom_right = F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.from_numpy(torch_mask(causal_lower_right, n, m))
    ).numpy()
    got = scaled_dot_product_attention(Q, K, V, causal_mask(n, m))[0]
    assert np.allclose(got, bottom_right, **PARITY)  # rows with no key: 0 on both sides


def test_more_queries_than_keys_leaves_the_first_rows_fully_masked():
    mask = causal_mask(5, 3)  # bottom-right: queries 0 and 1 come before every key
    assert not mask[:2].any()
    assert mask[2:].any(axis=-1).all()


@PROPERTY
@given(n=st.integers(0, 9), m=st.integers(0, 9), offset=st.integers(-10, 10))
def test_causal_mask_definition(n, m, offset):
    mask = causal_mask(n, m, offset=offset)
    i, j = np.indices((n, m))
    assert np.array_equal(mask, j <= i + offset)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((-1,), {}, ValueError, r"n must be >= 0, got -1"),
        ((3, -2), {}, ValueError, r"m must be >= 0, got -2"),
        ((2.5,), {}, TypeError, r"n must be an integer, got 2.5"),
        ((True,), {}, TypeError, r"n must be an integer, got True"),
        ((3, "4"), {}, TypeError, r"m must be an integer, got '4'"),
        ((3,), {"offset": 1.0}, TypeError, r"offset must be an integer, got 1.0"),
        ((3,), {"offset": False}, TypeError, r"offset must be an integer, got False"),
    ],
)
def test_causal_mask_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        causal_mask(*args, **kwargs)


def test_numpy_integers_are_accepted():
    assert np.array_equal(
        causal_mask(np.int64(3), np.uint8(4), offset=np.int32(0)), np.tri(3, 4, dtype=bool)
    )


# ---------------------------------------------------------------------------
# padding_mask
# ---------------------------------------------------------------------------


def test_padding_mask_values_and_shape():
    mask = padding_mask([3, 1, 0, 4], 4)
    assert mask.dtype == np.bool_ and mask.shape == (4, 1, 4)
    assert mask[:, 0].astype(int).tolist() == [
        [1, 1, 1, 0],
        [1, 0, 0, 0],
        [0, 0, 0, 0],
        [1, 1, 1, 1],
    ]


def test_padding_mask_of_a_scalar_and_of_a_grid_of_lengths():
    assert padding_mask(2, 3).shape == (1, 3)
    assert padding_mask(np.array([[1, 2], [3, 0]]), 3).shape == (2, 2, 1, 3)
    assert padding_mask(np.array([], dtype=int), 3).shape == (0, 1, 3)


@pytest.mark.parametrize("seed", range(3))
def test_padding_mask_broadcasts_against_scores_and_matches_torch(seed):
    rng = np.random.default_rng(seed)
    b, n, m = 3, 4, 6
    lengths = np.array([6, 2, 4])
    Q, K, V = rng.normal(size=(b, n, 5)), rng.normal(size=(b, m, 5)), rng.normal(size=(b, m, 2))
    mask = padding_mask(lengths, m)  # (b, 1, m) against scores (b, n, m)
    output, weights = scaled_dot_product_attention(Q, K, V, mask)
    for i, length in enumerate(lengths):
        assert np.all(weights[i, :, length:] == 0)
        # the padding changes nothing: same as attending over the real keys only
        alone = scaled_dot_product_attention(Q[i], K[i, :length], V[i, :length])[0]
        assert np.allclose(output[i], alone, **PARITY)
    ref = F.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (Q, K, V)), attn_mask=torch.from_numpy(mask)
    ).numpy()
    assert np.allclose(output, ref, **PARITY)


def test_padding_mask_with_heads_needs_one_more_axis():
    rng = np.random.default_rng(0)
    Q = rng.normal(size=(2, 3, 4, 5))  # (b, h, n, d_k)
    mask = padding_mask([4, 1], 4)[:, None]  # (b, 1, 1, m)
    assert mask.shape == (2, 1, 1, 4)
    weights = scaled_dot_product_attention(Q, Q, Q, mask)[1]
    assert np.all(weights[1, :, :, 1:] == 0)
    assert np.allclose(weights.sum(axis=-1), 1, rtol=0, atol=1e-12)


def test_causal_and_padding_masks_combine_with_and():
    mask = causal_mask(3) & padding_mask([3, 2, 0], 3)
    assert mask.shape == (3, 3, 3)
    assert np.array_equal(mask[0], causal_mask(3))
    assert np.array_equal(mask[1], causal_mask(3) & [True, True, False])
    assert not mask[2].any()


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (
            ([2, 5], 4),
            ValueError,
            r"lengths must lie in \[0, m\] = \[0, 4\], got values from 2 to 5",
        ),
        (([-1, 2], 4), ValueError, r"lengths must lie in \[0, m\]"),
        (([1.5, 2], 4), TypeError, r"lengths must be integers, got dtype float64"),
        (([True], 4), TypeError, r"lengths must be integers, got dtype bool"),
        (([1], -1), ValueError, r"m must be >= 0, got -1"),
        (([1], 4.0), TypeError, r"m must be an integer, got 4.0"),
    ],
)
def test_padding_mask_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        padding_mask(*args)


# ---------------------------------------------------------------------------
# Two boolean conventions in PyTorch (chapter 2's "mixing mask conventions")
# ---------------------------------------------------------------------------


def test_nn_multihead_attention_reads_true_as_blocked_unlike_sdpa():
    """F.scaled_dot_product_attention's boolean attn_mask: True = may attend, as in this
    book. nn.MultiheadAttention's attn_mask and key_padding_mask: True = NOT allowed. The
    book's mask must be negated for the module; passed as is, it is silently inverted."""
    rng = np.random.default_rng(0)
    n, d = 5, 4
    X = rng.standard_normal((1, n, d))
    causal = causal_mask(n)  # the book's convention
    keys = np.array([[True, True, True, False, False]])  # (1, m): keys 4, 5 are padding
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(d, 1, bias=False, batch_first=True, dtype=torch.float64)
    W_in = module.in_proj_weight.detach().numpy()  # (3d, d), rows: W_Q^T, W_K^T, W_V^T
    W_Q, W_K, W_V = (W_in[k * d : (k + 1) * d].T for k in range(3))
    W_O = module.out_proj.weight.detach().numpy().T
    x = torch.from_numpy(X)

    def ours(allowed):
        out, _ = scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_V, allowed)
        return out @ W_O

    def module_out(**masks):
        out, _ = module(x, x, x, need_weights=False, **masks)
        return out.detach().numpy()

    # SDPA: the book's mask as it is
    sdpa = F.scaled_dot_product_attention(
        *(torch.from_numpy(X @ W) for W in (W_Q, W_K, W_V)), attn_mask=torch.from_numpy(causal)
    )
    assert np.allclose(sdpa.numpy() @ W_O, ours(causal), **PARITY)
    # nn.MultiheadAttention: the negation of the book's masks ...
    assert np.allclose(module_out(attn_mask=torch.from_numpy(~causal)), ours(causal), **PARITY)
    allowed = keys[:, None, :]  # (1, 1, m), broadcast over the queries
    assert np.allclose(
        module_out(key_padding_mask=torch.from_numpy(~keys)), ours(allowed), **PARITY
    )
    # ... and a book's mask passed as is is read the other way round: the queries attend
    # to exactly the keys it forbids (a mask without its diagonal, j < i, so that neither
    # reading leaves a row of the module with no key at all)
    strict = causal & ~np.eye(n, dtype=bool)  # j < i
    wrong = module_out(attn_mask=torch.from_numpy(strict))
    assert np.allclose(wrong, ours(~strict), **PARITY)
    assert not np.allclose(wrong, ours(strict), atol=1e-3)

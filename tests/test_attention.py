"""Tests of helpers.attention: PyTorch parity, gradients, properties, extremes, errors."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from helpers.attention import attention_backward, scaled_dot_product_attention
from helpers.masks import causal_mask, padding_mask

attention_module = importlib.import_module("helpers.attention")

SEEDS = range(3)
DTYPES = [np.float32, np.float64]

# Shapes (Q, K, V): self-attention, cross shapes (n != m, d_k != d_v), batched with
# broadcasting (K and V shared over the first batch axis), and a single query.
SHAPES = {
    "self": ((5, 8), (5, 8), (5, 8)),
    "cross": ((4, 6), (7, 6), (7, 3)),
    "broadcast batch": ((2, 3, 5, 8), (3, 7, 8), (3, 7, 4)),
    "one query": ((1, 1, 4), (2, 1, 6, 4), (1, 6, 2)),
}

# Tolerances, from an error model rather than a guess. With u the unit roundoff of
# the working dtype and b = scale · max_i |q_i| · max_j |k_j| (Cauchy-Schwarz bound
# on every score |S_ij|):
# * a score, a dot product of d_k terms, is off by at most ~(d_k + 1) u b;
# * a weight A_ij = e^{S_ij} / sum_l e^{S_il} moves relatively by at most twice the
#   largest score error (the softmax's condition number), plus a few roundings in exp,
#   the sum and the division (SLACK covers those);
# * an output entry sum_j A_ij V_jc is off by (weight error) · max|V| plus m roundings.
# The reference is PyTorch in float64 on the same input values; for float64 inputs
# both sides carry that error, so the tolerance is doubled.
SLACK = 16


def tolerances(Q, K, V, scale, dtype) -> tuple[dict[str, float], dict[str, float]]:
    """``(weights tolerance, output tolerance)`` as ``allclose`` keyword arguments."""
    u = float(np.finfo(np.float64 if dtype == np.float64 else np.float32).eps)
    Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
    d_k, m = Q.shape[-1], K.shape[-2]
    bound = scale * np.linalg.norm(Q, axis=-1).max() * np.linalg.norm(K, axis=-1).max()
    both = 2 if dtype == np.float64 else 1
    w = both * (2 * (d_k + 1) * u * bound + SLACK * u)
    v_max = max(float(np.abs(V).max()), 1.0)
    return {"rtol": w, "atol": SLACK * u}, {"rtol": w, "atol": (w + SLACK * m * u) * v_max}


# Central differences with h = 1e-6 in float64: truncation O(h²) ~ 1e-12 plus
# cancellation ~ eps/h ~ 1e-10, times the size of the loss (~10) for these inputs.
FD_STEP, FD_ATOL = 1e-6, 1e-7

# Gradients against PyTorch's autograd, both in float64 on O(1) inputs: each side is
# off by ~1e-15 per operation, a few hundred operations deep at most.
GRAD_TOL = {"rtol": 1e-10, "atol": 1e-12}

PROPERTY = settings(max_examples=40, deadline=None)


# ---------------------------------------------------------------------------
# Helpers of the tests
# ---------------------------------------------------------------------------


def random_qkv(seed: int, shapes, dtype=np.float64, spread: float = 1.0):
    rng = np.random.default_rng(seed)
    return tuple(rng.normal(scale=spread, size=s).astype(dtype) for s in shapes)


def t64(a) -> torch.Tensor:
    return torch.from_numpy(np.array(a, dtype=np.float64))  # a writable copy


def torch_reference(Q, K, V, mask=None, scale=None, bias=None):
    """PyTorch in float64: SDPA's output, and the weights as torch.softmax of the scores.

    Batch axes are broadcast explicitly; the weights of a fully masked row are nan
    (torch.softmax of an all -inf row), the output is 0 there (SDPA's own choice).
    """
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    q, k, v = (np.broadcast_to(a, batch + a.shape[-2:]) for a in (Q, K, V))
    additive = np.zeros((*q.shape[:-1], k.shape[-2]))
    if bias is not None:
        additive = additive + bias
    if mask is not None:
        additive = np.where(np.asarray(mask, dtype=bool), additive, -np.inf)
    s = q.shape[-1] ** -0.5 if scale is None else scale
    output = F.scaled_dot_product_attention(
        t64(q), t64(k), t64(v), attn_mask=t64(additive), scale=s
    )
    scores = t64(q) @ t64(k).transpose(-1, -2) * s + t64(additive)
    return output.numpy(), torch.softmax(scores, -1).numpy()


def random_mask(seed: int, shape, *, fully_masked_row: bool) -> np.ndarray:
    rng = np.random.default_rng(seed + 100)
    mask = rng.random(shape) < 0.6
    if fully_masked_row:
        mask[..., 1, :] = False
    else:
        mask[..., 0] = True  # every row sees key 0
    return mask


def full_shape(Q, K) -> tuple[int, ...]:
    return (*np.broadcast_shapes(Q.shape[:-2], K.shape[:-2]), Q.shape[-2], K.shape[-2])


# ---------------------------------------------------------------------------
# Parity with PyTorch
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shapes", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", [None, 0.3])
def test_parity_with_torch_without_mask(seed, shapes, dtype, scale):
    Q, K, V = random_qkv(seed, shapes, dtype)
    output, weights = scaled_dot_product_attention(Q, K, V, scale=scale)
    ref_out, ref_w = torch_reference(Q, K, V, scale=scale)
    s = Q.shape[-1] ** -0.5 if scale is None else scale
    tol_w, tol_out = tolerances(Q, K, V, s, dtype)
    assert output.dtype == weights.dtype == dtype
    assert output.shape == ref_out.shape and weights.shape == ref_w.shape
    assert np.allclose(weights, ref_w, **tol_w)
    assert np.allclose(output, ref_out, **tol_out)


MASK_KINDS = {
    "bool": lambda mask: mask,
    "int 0/1": lambda mask: mask.astype(np.int64),
    "float 0/1": lambda mask: mask.astype(np.float32),
}


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shapes", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", MASK_KINDS, ids=MASK_KINDS.keys())
@pytest.mark.parametrize("fully_masked_row", [False, True])
def test_parity_with_torch_with_mask(seed, shapes, dtype, kind, fully_masked_row):
    Q, K, V = random_qkv(seed, shapes, dtype)
    if Q.shape[-2] < 2:
        fully_masked_row = False  # the mask hides row 1, which needs two queries
    mask = random_mask(seed, full_shape(Q, K), fully_masked_row=fully_masked_row)
    output, weights = scaled_dot_product_attention(Q, K, V, MASK_KINDS[kind](mask))
    ref_out, ref_w = torch_reference(Q, K, V, mask)
    tol_w, tol_out = tolerances(Q, K, V, Q.shape[-1] ** -0.5, dtype)
    live = mask.any(axis=-1)  # rows with at least one key
    assert np.allclose(weights[live], ref_w[live], **tol_w)
    assert np.all(weights[~mask] == 0)  # masked entries exactly 0
    assert np.all(weights[~live] == 0) and np.all(output[~live] == 0)  # documented
    assert np.allclose(output, ref_out, **tol_out)  # SDPA also gives 0 on ~live rows


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 4, 9])
def test_causal_mask_matches_torch_is_causal(seed, dtype, n):
    Q, K, V = random_qkv(seed, ((2, n, 8), (2, n, 8), (2, n, 5)), dtype)
    output, weights = scaled_dot_product_attention(Q, K, V, causal_mask(n))
    ref = F.scaled_dot_product_attention(t64(Q), t64(K), t64(V), is_causal=True).numpy()
    _, tol_out = tolerances(Q, K, V, 8**-0.5, dtype)
    assert np.allclose(output, ref, **tol_out)
    assert np.all(np.triu(weights, k=1) == 0)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_additive_bias_matches_torch_float_attn_mask(seed, dtype):
    Q, K, V = random_qkv(seed, ((2, 4, 6), (2, 5, 6), (2, 5, 3)), dtype)
    rng = np.random.default_rng(seed)
    bias = rng.normal(scale=3.0, size=(4, 5))
    bias[rng.random((4, 5)) < 0.3] = -np.inf
    bias[2] = -np.inf  # a fully masked row through the bias
    mask = rng.random((2, 4, 5)) < 0.8
    output, weights = scaled_dot_product_attention(Q, K, V, mask, bias=bias)
    ref_out, ref_w = torch_reference(Q, K, V, mask, bias=bias)
    tol_w, tol_out = tolerances(Q, K, V, 6**-0.5, dtype)
    tol_w["rtol"] += 10 * SLACK * float(np.finfo(dtype).eps)  # the bias reaches ±10
    live = np.isfinite(np.where(mask, bias, -np.inf)).any(axis=-1)
    assert np.allclose(weights[live], ref_w[live], **tol_w)
    assert np.all(weights[~live] == 0)
    assert np.allclose(output, ref_out, rtol=tol_w["rtol"], atol=tol_out["atol"] + tol_w["rtol"])


# ---------------------------------------------------------------------------
# Fully masked rows, dtypes, extremes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float16, *DTYPES])
def test_fully_masked_rows_give_zero_weights_and_output(dtype):
    Q, K, V = random_qkv(0, ((3, 4, 8), (3, 4, 8), (3, 4, 2)), dtype)
    mask = causal_mask(4) & padding_mask([4, 2, 0], 4)  # the third sequence is empty
    output, weights = scaled_dot_product_attention(Q, K, V, mask)
    assert np.all(np.isfinite(output)) and np.all(np.isfinite(weights))
    assert np.all(weights[2] == 0) and np.all(output[2] == 0)
    assert np.allclose(weights[:2].sum(axis=-1), 1, rtol=0, atol=1e-3)


def test_no_keys_at_all_gives_zero_output():
    output, weights = scaled_dot_product_attention(
        np.ones((3, 2)), np.ones((0, 2)), np.ones((0, 5))
    )
    assert output.shape == (3, 5) and weights.shape == (3, 0)
    assert np.all(output == 0)


def test_no_queries_gives_empty_results():
    output, weights = scaled_dot_product_attention(
        np.ones((0, 2)), np.ones((4, 2)), np.ones((4, 5))
    )
    assert output.shape == (0, 5) and weights.shape == (0, 4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("target", [1e2, 1e3, 1e4])
@pytest.mark.parametrize("masked", [False, True])
def test_large_scores_stay_finite_and_correct(dtype, target, masked):
    Q, K, V = random_qkv(1, ((2, 6, 4), (2, 7, 4), (2, 7, 3)))
    Q *= target / np.abs(Q @ np.swapaxes(K, -1, -2) / 2).max()  # scores reach ±target
    Q, K, V = (a.astype(dtype) for a in (Q, K, V))
    mask = random_mask(2, (2, 6, 7), fully_masked_row=False) if masked else None
    output, weights = scaled_dot_product_attention(Q, K, V, mask)
    assert np.all(np.isfinite(output)) and np.all(np.isfinite(weights))
    ref_out, ref_w = torch_reference(Q, K, V, mask)
    tol_w, tol_out = tolerances(Q, K, V, 0.5, dtype)
    assert np.allclose(weights, ref_w, **tol_w)
    assert np.allclose(output, ref_out, **tol_out)


@pytest.mark.parametrize("seed", SEEDS)
def test_float16_is_computed_in_float32_and_rounded_once(seed):
    Q, K, V = random_qkv(seed, ((2, 9, 8), (2, 30, 8), (2, 30, 4)), np.float16, spread=2.0)
    output, weights = scaled_dot_product_attention(Q, K, V)
    out32, w32 = scaled_dot_product_attention(*(a.astype(np.float32) for a in (Q, K, V)))
    assert output.dtype == weights.dtype == np.float16
    assert np.array_equal(output, out32.astype(np.float16))
    assert np.array_equal(weights, w32.astype(np.float16))


def test_mixed_and_integer_dtypes():
    Q = np.array([[1, 0], [0, 1]])  # int64
    K = np.array([[1.0, 1.0], [0.0, 1.0]], dtype=np.float32)
    output, weights = scaled_dot_product_attention(Q, K, K)
    assert output.dtype == weights.dtype == np.float64  # int64 with float32: float64
    output, _ = scaled_dot_product_attention(Q.astype(np.float16), K, K)
    assert output.dtype == np.float32
    out_list, _ = scaled_dot_product_attention([[1.0, 0.0]], [[1.0, 0.0]], [[2.0]])
    assert out_list.tolist() == [[2.0]]


def test_inputs_are_not_modified():
    Q, K, V = random_qkv(0, SHAPES["broadcast batch"])
    mask = random_mask(0, (2, 3, 5, 7), fully_masked_row=True)
    bias = np.zeros((5, 7))
    before = [a.copy() for a in (Q, K, V, mask, bias)]
    output, weights = scaled_dot_product_attention(Q, K, V, mask, bias=bias)
    G = np.ones_like(output)
    attention_backward(Q, K, V, weights, G, mask)
    assert all(np.array_equal(a, b) for a, b in zip((Q, K, V, mask, bias), before, strict=True))
    assert np.all(G == 1)


def test_known_values():
    Q = np.array([[1.0, 0.0], [0.0, 1.0]])
    K = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    V = np.array([[1.0], [2.0], [3.0]])
    S = Q @ K.T / np.sqrt(2)
    A = np.exp(S) / np.exp(S).sum(axis=-1, keepdims=True)
    output, weights = scaled_dot_product_attention(Q, K, V)
    assert np.allclose(weights, A, rtol=1e-15, atol=0)
    assert np.allclose(output, A @ V, rtol=1e-15, atol=0)


# ---------------------------------------------------------------------------
# The blocked computation: every code path gives the same answer
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [1, 7, 40, 1 << 20])
@pytest.mark.parametrize("safe", [0.0, 64.0])
def test_chunking_and_max_shift_do_not_change_results(monkeypatch, chunk, safe):
    # chunk 1 and 7: blocks of rows; 40: several whole (5 x 7) matrices per chunk;
    # safe 0: the max-shift is always applied; 64: skipped for these scores.
    Q, K, V = random_qkv(0, SHAPES["broadcast batch"])
    mask = random_mask(0, (2, 3, 5, 7), fully_masked_row=True)
    expected = scaled_dot_product_attention(Q, K, V, mask)
    monkeypatch.setattr(attention_module, "_CHUNK_ENTRIES", chunk)
    monkeypatch.setattr(attention_module, "_EXP_SAFE", safe)
    for got, want in zip(scaled_dot_product_attention(Q, K, V, mask), expected, strict=True):
        assert np.allclose(got, want, rtol=1e-13, atol=1e-15)


def test_rows_past_the_safe_bound_are_shifted():
    # One query with huge scores next to ordinary ones: the chunk holding it needs the
    # shift, and without it exp would overflow.
    Q, K, V = random_qkv(3, ((6, 4), (5, 4), (5, 2)))
    Q[2] *= 1e3
    weights = scaled_dot_product_attention(Q, K, V)[1]
    ref_w = torch_reference(Q, K, V)[1]
    assert np.all(np.isfinite(weights))
    assert np.allclose(weights, ref_w, **tolerances(Q, K, V, 0.5, np.float64)[0])


# ---------------------------------------------------------------------------
# Properties (hypothesis)
# ---------------------------------------------------------------------------

finite = st.floats(-3, 3, allow_nan=False, allow_infinity=False)


@st.composite
def attention_inputs(draw, with_mask: bool = True):
    n, m, d_k, d_v = (draw(st.integers(1, 5)) for _ in range(4))
    batch = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    Q = draw(hnp.arrays(np.float64, (*batch, n, d_k), elements=finite))
    K = draw(hnp.arrays(np.float64, (*batch, m, d_k), elements=finite))
    V = draw(hnp.arrays(np.float64, (*batch, m, d_v), elements=finite))
    mask = draw(hnp.arrays(np.bool_, (*batch, n, m))) if with_mask else None
    return Q, K, V, mask


@PROPERTY
@given(inputs=attention_inputs())
def test_weights_are_distributions_over_the_allowed_keys(inputs):
    Q, K, V, mask = inputs
    output, weights = scaled_dot_product_attention(Q, K, V, mask)
    live = mask.any(axis=-1)
    assert np.all(weights >= 0)
    assert np.all(weights[~mask] == 0)  # masked weights are exactly 0
    assert np.allclose(weights.sum(axis=-1)[live], 1, rtol=0, atol=1e-12)
    assert np.all(weights[~live] == 0) and np.all(output[~live] == 0)


@PROPERTY
@given(inputs=attention_inputs(), data=st.data())
def test_permuting_keys_and_values_together_changes_nothing(inputs, data):
    Q, K, V, mask = inputs
    perm = np.array(data.draw(st.permutations(range(K.shape[-2]))))
    output, weights = scaled_dot_product_attention(Q, K, V, mask)
    out_p, w_p = scaled_dot_product_attention(Q, K[..., perm, :], V[..., perm, :], mask[..., perm])
    assert np.allclose(out_p, output, rtol=1e-12, atol=1e-12)
    assert np.allclose(w_p, weights[..., perm], rtol=1e-12, atol=1e-15)


@PROPERTY
@given(inputs=attention_inputs(), data=st.data())
def test_permuting_queries_permutes_the_outputs(inputs, data):
    Q, K, V, mask = inputs
    perm = np.array(data.draw(st.permutations(range(Q.shape[-2]))))
    output, weights = scaled_dot_product_attention(Q, K, V, mask)
    out_p, w_p = scaled_dot_product_attention(Q[..., perm, :], K, V, mask[..., perm, :])
    # Rows are computed independently; only BLAS's blocking could round them differently.
    assert np.allclose(out_p, output[..., perm, :], rtol=1e-14, atol=1e-15)
    assert np.allclose(w_p, weights[..., perm, :], rtol=1e-14, atol=1e-15)


@PROPERTY
@given(inputs=attention_inputs(with_mask=False), s=st.floats(0.01, 10))
def test_scale_is_a_factor_on_the_queries_or_the_keys(inputs, s):
    Q, K, V, _ = inputs
    output, weights = scaled_dot_product_attention(Q, K, V, scale=s)
    for q, k in ((Q * s, K), (Q, K * s)):
        out_1, w_1 = scaled_dot_product_attention(q, k, V, scale=1.0)
        assert np.allclose(w_1, weights, rtol=1e-10, atol=1e-13)
        assert np.allclose(out_1, output, rtol=1e-10, atol=1e-12)
    default = scaled_dot_product_attention(Q, K, V)[1]
    assert np.allclose(
        default,
        scaled_dot_product_attention(Q, K, V, scale=1 / np.sqrt(Q.shape[-1]))[1],
        rtol=0,
        atol=0,
    )


@PROPERTY
@given(inputs=attention_inputs(with_mask=False), c=st.floats(-50, 50))
def test_a_constant_bias_along_each_row_changes_nothing(inputs, c):
    Q, K, V, _ = inputs
    output, weights = scaled_dot_product_attention(Q, K, V)
    shifted = np.full((*Q.shape[:-1], 1), c)  # (..., n, 1): one constant per row
    out_b, w_b = scaled_dot_product_attention(Q, K, V, bias=shifted)
    assert np.allclose(w_b, weights, rtol=1e-12, atol=1e-14)
    assert np.allclose(out_b, output, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------


def loss_and_grads(Q, K, V, G, mask=None, scale=None):
    output, weights = scaled_dot_product_attention(Q, K, V, mask, scale=scale)
    return float(np.sum(G * output)), attention_backward(Q, K, V, weights, G, mask, scale=scale)


def finite_difference(Q, K, V, G, mask, scale, which: int) -> np.ndarray:
    args = [Q.copy(), K.copy(), V.copy()]
    x = args[which]
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        old = x[i]
        x[i] = old + FD_STEP
        up = loss_and_grads(*args, G, mask, scale)[0]
        x[i] = old - FD_STEP
        down = loss_and_grads(*args, G, mask, scale)[0]
        x[i] = old
        grad[i] = (up - down) / (2 * FD_STEP)
    return grad


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("scale", [None, 0.7])
def test_backward_matches_finite_differences(seed, masked, scale):
    Q, K, V = random_qkv(seed, ((4, 3), (5, 3), (5, 2)))
    G = np.random.default_rng(seed + 7).normal(size=(4, 2))
    mask = random_mask(seed, (4, 5), fully_masked_row=True) if masked else None
    _, grads = loss_and_grads(Q, K, V, G, mask, scale)
    for which, grad in enumerate(grads):
        assert np.allclose(grad, finite_difference(Q, K, V, G, mask, scale, which), atol=FD_ATOL)


def torch_grads(Q, K, V, G, mask=None, scale=None):
    q, k, v = (t64(a).requires_grad_() for a in (Q, K, V))
    attn_mask = None if mask is None else torch.from_numpy(np.asarray(mask, dtype=bool))
    batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])
    expand = [t.expand(*batch, *t.shape[-2:]) for t in (q, k, v)]
    out = F.scaled_dot_product_attention(*expand, attn_mask=attn_mask, scale=scale)
    out.backward(t64(G))
    return [t.grad.numpy() for t in (q, k, v)]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("shapes", SHAPES.values(), ids=SHAPES.keys())
@pytest.mark.parametrize("masked", [False, True])
def test_backward_matches_torch_autograd(seed, shapes, masked):
    Q, K, V = random_qkv(seed, shapes)
    full = full_shape(Q, K)
    mask = random_mask(seed, full, fully_masked_row=full[-2] > 1) if masked else None
    output, weights = scaled_dot_product_attention(Q, K, V, mask, scale=0.4)
    G = np.random.default_rng(seed + 9).normal(size=output.shape)
    grads = attention_backward(Q, K, V, weights, G, mask, scale=0.4)
    for grad, ref, x in zip(
        grads, torch_grads(Q, K, V, G, mask, scale=0.4), (Q, K, V), strict=True
    ):
        assert grad.shape == x.shape  # summed over the axes along which x was broadcast
        assert np.allclose(grad, ref, **GRAD_TOL)


def test_masked_keys_and_fully_masked_queries_get_exactly_zero_gradient():
    Q, K, V = random_qkv(4, ((5, 3), (6, 3), (6, 4)))
    mask = np.ones((5, 6), dtype=bool)
    mask[:, 2] = False  # key 2 hidden from every query
    mask[3] = False  # query 3 sees nothing
    output, weights = scaled_dot_product_attention(Q, K, V, mask)
    G = np.random.default_rng(0).normal(size=output.shape)
    for passed_mask in (mask, None):  # zero weights alone already zero the gradient
        dQ, dK, dV = attention_backward(Q, K, V, weights, G, passed_mask)
        assert np.all(dK[2] == 0) and np.all(dV[2] == 0)
        assert np.all(dQ[3] == 0)
        assert np.all(dQ[[0, 1, 2, 4]] != 0)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_backward_dtypes(dtype):
    Q, K, V = random_qkv(0, ((3, 4), (5, 4), (5, 2)), dtype)
    output, weights = scaled_dot_product_attention(Q, K, V)
    grads = attention_backward(Q, K, V, weights, np.ones_like(output))
    ref = attention_backward(*(a.astype(np.float64) for a in (Q, K, V, weights)), np.ones((3, 2)))
    for grad, want in zip(grads, ref, strict=True):
        assert grad.dtype == dtype
        assert np.allclose(grad, want, rtol=1e-2, atol=1e-2 if dtype == np.float16 else 1e-5)


# ---------------------------------------------------------------------------
# Errors name the arguments and their shapes
# ---------------------------------------------------------------------------

Q8 = np.zeros((2, 5, 8))
K8 = np.zeros((2, 7, 8))
V4 = np.zeros((2, 7, 4))


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (
            (Q8, np.zeros((2, 7, 4)), V4),
            {},
            ValueError,
            r"Q and K must have the same last axis \(d_k\): Q.shape = \(2, 5, 8\), "
            r"K.shape = \(2, 7, 4\)",
        ),
        (
            (Q8, K8, np.zeros((2, 6, 4))),
            {},
            ValueError,
            r"K and V must have the same number of rows \(m, .*\): K.shape = \(2, 7, 8\), "
            r"V.shape = \(2, 6, 4\)",
        ),
        (
            (np.zeros((3, 5, 8)), K8, V4),
            {},
            ValueError,
            r"batch axes of Q, K and V .* Q.shape = \(3, 5, 8\), K.shape = \(2, 7, 8\)",
        ),
        (
            (Q8, K8, V4, np.ones((5, 5), dtype=bool)),
            {},
            ValueError,
            r"mask must broadcast to \(\.\.\., n, m\) = \(2, 5, 7\) .* got mask.shape = "
            r"\(5, 5\); Q.shape = \(2, 5, 8\), K.shape = \(2, 7, 8\), V.shape = \(2, 7, 4\)",
        ),
        (
            (Q8, K8, V4, np.ones((3, 2, 5, 7), dtype=bool)),
            {},
            ValueError,
            r"mask must broadcast to .* got mask.shape = \(3, 2, 5, 7\)",
        ),
        (
            (Q8, K8, V4, np.where(np.eye(5, 7) > 0, 0.0, -np.inf)),
            {},
            ValueError,
            r"mask must be boolean .* or hold only 0 and 1 .* got mask of dtype float64 "
            r"containing -inf\. An additive mask .* goes in bias=",
        ),
        (
            (Q8, K8, V4, np.full((5, 7), 2)),
            {},
            ValueError,
            r"hold only 0 and 1 .* got mask of dtype int64 containing 2",
        ),
        (
            (np.full((2, 5, 8), np.nan), K8, V4),
            {},
            ValueError,
            r"Q must be finite, but Q\[0, 0, 0\] = nan \(Q.shape = \(2, 5, 8\)\)",
        ),
        (
            (Q8, np.where(np.arange(8) == 3, np.inf, K8), V4),
            {},
            ValueError,
            r"K must be finite, but K\[0, 0, 3\] = inf",
        ),
        ((Q8, K8, np.full((2, 7, 4), -np.inf)), {}, ValueError, r"V must be finite"),
        (
            (np.zeros(8), K8, V4),
            {},
            ValueError,
            r"Q must have at least 2 dimensions, \(\.\.\., n, d_k\); got Q.shape = \(8,\)",
        ),
        ((np.zeros((5, 0)), np.zeros((7, 0)), V4[0]), {}, ValueError, r"d_k >= 1"),
        ((Q8 > 0, K8, V4), {}, TypeError, r"Q must be an array of real numbers, got dtype bool"),
        ((Q8, K8.astype(complex), V4), {}, TypeError, r"K must be .* got dtype complex128"),
        ((Q8, K8, V4, np.array([["a"]])), {}, TypeError, r"mask must be a boolean array"),
        ((Q8, K8, V4), {"scale": 0.0}, ValueError, r"scale must be positive and finite"),
        ((Q8, K8, V4), {"scale": -1.0}, ValueError, r"scale must be positive and finite"),
        ((Q8, K8, V4), {"scale": np.inf}, ValueError, r"scale must be positive and finite"),
        ((Q8, K8, V4), {"scale": "0.1"}, TypeError, r"scale must be a real number"),
        ((Q8, K8, V4), {"scale": True}, TypeError, r"scale must be a real number"),
        ((Q8, K8, V4), {"bias": np.full((5, 7), np.nan)}, ValueError, r"bias contains nan"),
        ((Q8, K8, V4), {"bias": np.ones((5, 7), bool)}, TypeError, r"a boolean mask goes in mask="),
        ((Q8, K8, V4), {"bias": np.ones((4, 7))}, ValueError, r"bias must broadcast to"),
    ],
)
def test_bad_input_raises_naming_arguments_and_shapes(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        scaled_dot_product_attention(*args, **kwargs)


def test_backward_checks_weights_and_grad_output_shapes():
    output, weights = scaled_dot_product_attention(Q8, K8, V4)
    with pytest.raises(
        ValueError, match=r"weights must have shape \(2, 5, 7\) .* got weights.shape = \(5, 7\)"
    ):
        attention_backward(Q8, K8, V4, weights[0], output)
    with pytest.raises(
        ValueError,
        match=r"grad_output must have shape \(2, 5, 4\) .* got grad_output.shape = \(2, 5, 8\)",
    ):
        attention_backward(Q8, K8, V4, weights, np.zeros((2, 5, 8)))
    with pytest.raises(ValueError, match=r"Q and K must have the same last axis"):
        attention_backward(Q8, np.zeros((2, 7, 3)), V4, weights, output)
    with pytest.raises(ValueError, match=r"grad_output must be finite"):
        attention_backward(Q8, K8, V4, weights, np.full_like(output, np.nan))
    with pytest.raises(ValueError, match=r"mask must broadcast to"):
        attention_backward(Q8, K8, V4, weights, output, np.ones((7, 5), bool))


def test_a_minus_1e9_fill_in_float16_as_chapter_2_says():
    # Chapter 2 (and the notation page): NumPy rounds -1e9 to -inf in float16, so an
    # additive mask gives nan on a fully masked row; PyTorch's masked_fill refuses the value
    # with an overflow error, and torch.where rounds it to -inf silently.
    with np.errstate(over="ignore"):
        assert np.isneginf(np.float16(-1e9))
    scores = torch.zeros(2, 3, dtype=torch.float16)
    blocked = torch.tensor([[False, True, False], [True, True, True]])
    with pytest.raises(RuntimeError, match="overflow"):
        scores.masked_fill(blocked, -1e9)
    filled = torch.where(~blocked, scores, -1e9)
    assert filled.dtype == torch.float16 and torch.isneginf(filled[1]).all()
    additive = scores + blocked.half() * -1e9  # an additive mask built in float16
    assert torch.isnan(torch.softmax(additive, dim=-1)[1]).all()

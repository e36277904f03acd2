"""Tests of helpers.linear_attention: linear attention, random features, FAVOR+.

Oracles: the quadratic forms written out here (the full (n, m) matrix of kernel values,
masked for the causal case, normalised by rows), PyTorch's ``elu`` for the feature map,
a stable log-space evaluation of the FAVOR+ kernel for large inputs, and the
Monte-Carlo rate 1/sqrt(N) that an unbiased estimator must show (checked to fail on a
biased one).
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers.attention import scaled_dot_product_attention
from helpers.linear_attention import (
    favor_features,
    linear_attention,
    performer_attention,
    random_features,
)
from helpers.masks import causal_mask

linear_module = importlib.import_module("helpers.linear_attention")

TOL = 1e-12

SHAPES = {
    "self": ((37, 8), (37, 8), (37, 8)),
    "cross": ((23, 6), (41, 6), (41, 3)),
    "more queries": ((300, 4), (140, 4), (140, 5)),  # n > m: first queries see nothing
    "chunk edges": ((513, 4), (513, 4), (513, 3)),  # across the 256-query chunks
    "batched": ((2, 3, 19, 5), (3, 29, 5), (1, 29, 4)),
}


def _inputs(shapes, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return tuple(rng.normal(size=s) * (scale if i < 2 else 1.0) for i, s in enumerate(shapes))


def _torch_elu_attention(Q, K, V, causal):
    """The quadratic form with elu + 1 features, in PyTorch (an independent path)."""
    q, k, v = (torch.from_numpy(x) for x in (Q, K, V))
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    W = phi_q @ phi_k.transpose(-1, -2)  # (..., n, m)
    if causal:
        W = W * torch.from_numpy(causal_mask(Q.shape[-2], K.shape[-2]))
    den = W.sum(-1, keepdim=True)
    out = (W @ v) / torch.where(den > 0, den, 1)
    return out.numpy()


@pytest.mark.parametrize("name", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
def test_elu_attention_equals_the_quadratic_form(name, causal):
    Q, K, V = _inputs(SHAPES[name], seed=len(name))
    out = linear_attention(Q, K, V, causal=causal)
    ref = _torch_elu_attention(Q, K, V, causal)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=0, atol=TOL)


def test_causal_linear_attention_is_a_running_state():
    """Output i depends only on keys j <= i: changing later keys leaves it unchanged."""
    C = linear_module._CAUSAL_CHUNK
    n = 2 * C + 50
    Q, K, V = _inputs(((n, 4), (n, 4), (n, 3)), seed=1)
    out = linear_attention(Q, K, V, causal=True)
    K2, V2 = K.copy(), V.copy()
    K2[C + 20 :] += 5.0
    V2[C + 20 :] -= 3.0
    out2 = linear_attention(Q, K2, V2, causal=True)
    assert np.array_equal(out[: C + 20], out2[: C + 20])
    assert not np.allclose(out[C + 20 :], out2[C + 20 :])
    # one query at a time, against the keys up to it, gives the same rows
    for i in (0, C - 1, C, C + 1, 2 * C, n - 1):
        np.testing.assert_allclose(
            linear_attention(Q[i : i + 1], K[: i + 1], V[: i + 1]), out[i : i + 1], atol=TOL
        )


def test_elu_is_not_softmax_attention():
    """A different model: far from softmax attention on the same inputs."""
    Q, K, V = _inputs(((64, 16), (64, 16), (64, 16)), seed=2)
    exact, _ = scaled_dot_product_attention(Q, K, V)
    assert np.abs(linear_attention(Q, K, V) - exact).max() > 0.1


def test_custom_feature_map_and_its_checks():
    Q, K, V = _inputs(((10, 3), (12, 3), (12, 2)), seed=3)

    def phi(x):
        return np.concatenate([np.exp(x), x**2], axis=-1)  # r = 2 d, non-negative

    W = phi(Q) @ phi(K).T
    np.testing.assert_allclose(
        linear_attention(Q, K, V, feature_map=phi), (W / W.sum(1, keepdims=True)) @ V, atol=TOL
    )
    with pytest.raises(ValueError, match=r"feature_map\(Q\) must be finite and non-negative"):
        linear_attention(Q, K, V, feature_map=lambda x: x)  # signed: denominators cross 0
    with pytest.raises(ValueError, match=r"map the rows of Q \(shape \(1, 10, 3\)\)"):
        linear_attention(Q, K, V, feature_map=lambda x: np.exp(x).sum(-1))
    with pytest.raises(ValueError, match='feature_map must be "elu" or a function'):
        linear_attention(Q, K, V, feature_map="relu")
    with pytest.raises(TypeError, match='feature_map must be "elu" or a function'):
        linear_attention(Q, K, V, feature_map=3)


def test_denominator_underflow_gives_zero_not_nan():
    """elu + 1 = exp(x) underflows to 0 for x < -745: such rows give 0, not 0/0."""
    Q, K, V = _inputs(((6, 2), (5, 2), (5, 2)), seed=4)
    Q[2] = -1000.0
    K[:] = -1000.0 - np.abs(K)  # every key feature underflows
    with np.errstate(divide="raise", invalid="raise"):  # no 0/0
        out = linear_attention(Q, K, V)
        assert np.isfinite(out).all()
        assert np.all(out == 0)
        out = linear_attention(Q, K, V, causal=True)
        assert np.all(out == 0)


def test_dtypes_and_bad_input():
    Q, K, V = _inputs(((33, 8), (40, 8), (40, 4)), seed=5)
    ref = linear_attention(Q, K, V, causal=True)
    for dtype, tol in ((np.float32, 1e-5), (np.float16, 1e-2)):
        out = linear_attention(*(x.astype(dtype) for x in (Q, K, V)), causal=True)
        assert out.dtype == dtype
        np.testing.assert_allclose(out, ref, rtol=0, atol=tol)
    with pytest.raises(ValueError, match=r"same last axis \(d_k\)"):
        linear_attention(Q, K[:, :3], V)
    with pytest.raises(TypeError, match="causal must be True or False"):
        linear_attention(Q, K, V, causal=1)
    with pytest.raises(ValueError, match="V must be finite"):
        linear_attention(Q, K, V * np.inf)


# ---------------------------------------------------------------------------
# Random features
# ---------------------------------------------------------------------------


def test_random_features_are_orthogonal_gaussian_rows():
    rng = np.random.default_rng(6)
    d = 5
    W = random_features(2000 * d + 3, d, rng=rng)
    assert W.shape == (2000 * d + 3, d) and W.dtype == np.float64
    blocks = W[: 2000 * d].reshape(2000, d, d)
    G = blocks @ blocks.transpose(0, 2, 1)
    off = G - np.eye(d) * np.diagonal(G, axis1=1, axis2=2)[:, None, :]
    assert np.abs(off).max() < 1e-12  # rows of a block exactly orthogonal
    # each row N(0, I_d): mean 0, covariance I, squared length chi²_d (mean d, variance 2d)
    N = W.shape[0]
    assert np.abs(W.mean(axis=0)).max() < 5 / np.sqrt(N)
    assert np.abs(np.cov(W.T) - np.eye(d)).max() < 6 * np.sqrt(2 / N)
    lengths = (W**2).sum(axis=1)
    assert abs(lengths.mean() - d) < 5 * np.sqrt(2 * d / N)
    assert abs(lengths.var() - 2 * d) < 0.1 * 2 * d
    iid = random_features(7, d, rng=rng, orthogonal=False)
    assert iid.shape == (7, d)


def test_random_features_bad_input():
    with pytest.raises(TypeError, match=r"rng must be a numpy\.random\.Generator"):
        random_features(4, 2, rng=0)
    with pytest.raises(ValueError, match="r must be positive"):
        random_features(0, 2, rng=np.random.default_rng())
    with pytest.raises(TypeError, match="d must be an integer"):
        random_features(4, 2.0, rng=np.random.default_rng())


def _monte_carlo_rate(draw, exact, sizes=(4, 16, 64, 256), repeats=256):
    """(normalised errors, fitted slope, bias in standard errors) of means of N draws.

    ``draw(N)`` returns ``repeats`` independent means of N estimates each. For an
    unbiased estimator of standard deviation σ, the root-mean-square error of a mean of
    N draws is σ/sqrt(N): normalised by that it is ≈ 1 for every N, and the log-log
    slope of the error against N is -1/2.
    """
    sigma = np.std(draw(1, repeats=4096))  # σ of a single estimate
    rmse = np.array([np.sqrt(np.mean((draw(N, repeats=repeats) - exact) ** 2)) for N in sizes])
    slope = np.polyfit(np.log(sizes), np.log(rmse), 1)[0]
    big = draw(sizes[-1], repeats=repeats)
    bias = (big.mean() - exact) / (sigma / np.sqrt(sizes[-1] * repeats))
    return rmse * np.sqrt(sizes) / sigma, slope, bias


def _favor_draws(q, k, *, biased=False, orthogonal=True, seed=7):
    rng = np.random.default_rng(seed)
    d = q.size

    def draw(N, repeats):
        """Means over N blocks of d features, ``repeats`` times (one projection each)."""
        W = random_features(N * d * repeats, d, rng=rng, orthogonal=orthogonal)
        fq = favor_features(q[None], W)[0] * np.sqrt(W.shape[0])  # raw exp(w·x - |x|²/2)
        fk = favor_features(k[None], W)[0] * np.sqrt(W.shape[0])
        if biased:  # forgetting the -|x|²/2 terms: E = exp(|x + y|² / 2), not exp(x·y)
            scale = np.exp((q @ q + k @ k) / (2 * np.sqrt(d)))
            fq, fk = fq * np.sqrt(scale), fk * np.sqrt(scale)
        return (fq * fk).reshape(repeats, N * d).mean(axis=1)

    return draw


def test_favor_is_unbiased_at_the_monte_carlo_rate():
    rng = np.random.default_rng(8)
    q, k = rng.normal(size=4) * 0.5, rng.normal(size=4) * 0.5
    exact = np.exp(q @ k / 2)  # exp(q·k / sqrt(d)), d = 4
    for orthogonal in (True, False):
        normalised, slope, bias = _monte_carlo_rate(
            _favor_draws(q, k, orthogonal=orthogonal), exact
        )
        # unbiased: the error of the mean shrinks like 1/sqrt(N) (normalised error ~ 1,
        # within generous bounds for 256 repeats), and the mean over everything is within
        # 4 standard errors of the exact kernel
        assert np.all((normalised > 0.5) & (normalised < 1.6)), normalised
        assert -0.65 < slope < -0.35, slope
        assert abs(bias) < 4, bias


def test_the_monte_carlo_check_detects_a_biased_estimator():
    rng = np.random.default_rng(8)
    q, k = rng.normal(size=4) * 0.5, rng.normal(size=4) * 0.5
    normalised, slope, bias = _monte_carlo_rate(_favor_draws(q, k, biased=True), np.exp(q @ k / 2))
    # a bias does not shrink: the error stops falling, the normalised error grows
    assert abs(bias) > 20 and normalised[-1] > 3 and slope > -0.35


def test_favor_features_are_positive_and_estimate_the_kernel_matrix():
    rng = np.random.default_rng(9)
    Q, K = rng.normal(size=(5, 8)) * 0.5, rng.normal(size=(6, 8)) * 0.5
    W = random_features(200_000, 8, rng=rng)
    phi_q, phi_k = favor_features(Q, W), favor_features(K, W)
    assert phi_q.shape == (5, 200_000) and (phi_q > 0).all()
    estimate, exact = phi_q @ phi_k.T, np.exp(Q @ K.T / np.sqrt(8))
    assert np.abs(estimate / exact - 1).max() < 0.02
    with pytest.raises(ValueError, match=r"projection must have d = 8 columns.*\(100, 7\)"):
        favor_features(Q, W[:100, :7])


# ---------------------------------------------------------------------------
# Performer attention
# ---------------------------------------------------------------------------


def _favor_reference(Q, K, V, W, causal):
    """FAVOR+ attention in log space: weight_ij ∝ Σ_f exp(a_if + b_jf), never overflows."""
    d = Q.shape[-1]
    x, y = Q / d**0.25, K / d**0.25
    a = x @ W.T - 0.5 * (x * x).sum(-1, keepdims=True)  # (n, r)
    b = y @ W.T - 0.5 * (y * y).sum(-1, keepdims=True)  # (m, r)
    t = torch.from_numpy(a[:, None, :] + b[None, :, :])  # (n, m, r)
    logw = torch.logsumexp(t, dim=-1)  # log of the (unnormalised) kernel estimate
    if causal:
        logw = logw.masked_fill(~torch.from_numpy(causal_mask(*logw.shape)), -torch.inf)
    return (torch.softmax(logw, dim=-1) @ torch.from_numpy(V)).numpy()


@pytest.mark.parametrize("name", ["self", "cross", "chunk edges"])
@pytest.mark.parametrize("causal", [False, True])
def test_performer_equals_its_quadratic_form(name, causal):
    Q, K, V = _inputs(SHAPES[name], seed=10, scale=0.5)
    W = random_features(32, Q.shape[-1], rng=np.random.default_rng(11))
    out = performer_attention(Q, K, V, W, causal=causal)
    np.testing.assert_allclose(out, _favor_reference(Q, K, V, W, causal), rtol=0, atol=1e-11)
    # and the same via favor_features directly
    kernel = favor_features(Q, W) @ favor_features(K, W).T
    if causal:
        kernel = kernel * causal_mask(Q.shape[0], K.shape[0])
    np.testing.assert_allclose(out, (kernel / kernel.sum(1, keepdims=True)) @ V, atol=1e-11)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_performer_is_stabilised(dtype):
    """Inputs whose features overflow (and underflow) unstabilised still give the ratio."""
    # |x|²/2 reaches ~2000 (float64) or ~100 (float32): exp underflows or overflows
    scale = 30.0 if dtype == np.float64 else 6.0
    Q, K, V = _inputs(((40, 8), (50, 8), (50, 3)), seed=12, scale=scale)
    W = random_features(64, 8, rng=np.random.default_rng(13))
    with np.errstate(over="ignore", invalid="ignore"):
        raw = favor_features(Q.astype(dtype), W)
    assert not np.isfinite(raw).all() or (raw == 0).any()  # unstabilised features break
    for causal in (False, True):
        out = performer_attention(*(x.astype(dtype) for x in (Q, K, V)), W, causal=causal)
        assert out.dtype == dtype and np.isfinite(out).all()
        ref = _favor_reference(Q, K, V, W, causal)
        np.testing.assert_allclose(out, ref, rtol=0, atol=1e-9 if dtype == np.float64 else 1e-3)


def test_performer_converges_to_softmax_attention():
    Q, K, V = _inputs(((64, 8), (64, 8), (64, 8)), seed=14, scale=0.5)
    exact, _ = scaled_dot_product_attention(Q, K, V)
    rng = np.random.default_rng(15)
    errors = [
        np.mean(
            [
                np.abs(performer_attention(Q, K, V, random_features(r, 8, rng=rng)) - exact).max()
                for _ in range(5)
            ]
        )
        for r in (16, 256, 4096)
    ]
    assert errors[0] > errors[1] > errors[2] and errors[2] < 0.05


def test_performer_bad_projection():
    Q, K, V = _inputs(((4, 8), (5, 8), (5, 3)), seed=16)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"projection must have d = 8 columns.*\(16, 6\)"):
        performer_attention(Q, K, V, random_features(16, 6, rng=rng))
    with pytest.raises(ValueError, match=r"projection must be an \(r, d\) array"):
        performer_attention(Q, K, V, np.ones(8))
    with pytest.raises(ValueError, match="projection must be finite"):
        performer_attention(Q, K, V, np.full((3, 8), np.nan))


@pytest.mark.parametrize(("n", "m"), [(0, 3), (3, 0)])
@pytest.mark.parametrize("causal", [False, True])
def test_empty_sequences(n, m, causal):
    Q, K, V = np.ones((2, n, 4)), np.ones((2, m, 4)), np.ones((2, m, 3))
    W = np.ones((3, 4))
    for out in (
        linear_attention(Q, K, V, causal=causal),
        performer_attention(Q, K, V, W, causal=causal),
    ):
        assert out.shape == (2, n, 3) and np.all(out == 0)

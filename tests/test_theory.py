"""Tests of helpers.theory: Jacobians against PyTorch's autograd, the L2 bound, the residual.

Oracles: ``torch.autograd.functional.jacobian`` on the forward passes written in PyTorch
(float64, tolerance 1e-10); Kim et al.'s bound checked on random and on adversarially
optimised inputs, and its scaling with ``W_Q``; the closed forms of the residual, the head
width and the truncation; BFGS against problems whose minimisers are known.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import softmax
from helpers.theory import (
    l2_lipschitz_bound,
    l2_self_attention,
    l2_self_attention_jacobian,
    min_head_width,
    minimise_bfgs,
    rank_collapse_residual,
    self_attention_jacobian,
    truncated_attention,
)

torch = pytest.importorskip("torch")


def torch_dot_attention(X, W_Q, W_K, W_V):
    S = (X @ W_Q) @ (X @ W_K).T / math.sqrt(W_Q.shape[1])
    return torch.softmax(S, dim=-1) @ (X @ W_V)


def torch_l2_attention(X, W_Q, W_V):
    Q = X @ W_Q
    d_k = W_Q.shape[1]
    dist2 = ((Q[:, None, :] - Q[None, :, :]) ** 2).sum(-1)
    P = torch.softmax(-dist2 / math.sqrt(d_k), dim=-1)
    return P @ X @ (W_Q @ W_Q.T / math.sqrt(d_k)) @ W_V


def autograd_jacobian(f, X, *weights):
    Xt = torch.tensor(X, dtype=torch.float64)
    ws = [torch.tensor(w, dtype=torch.float64) for w in weights]
    J = torch.autograd.functional.jacobian(lambda x: f(x, *ws), Xt)  # (n, d_v, n, d)
    n, d = X.shape
    return J.reshape(-1, n * d).numpy()


@pytest.mark.parametrize(("n", "d", "d_k", "d_v"), [(1, 3, 2, 4), (4, 3, 2, 5), (6, 5, 5, 2)])
@pytest.mark.parametrize("seed", [0, 1])
def test_dot_product_jacobian_equals_autograd(n, d, d_k, d_v, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    W_Q, W_K = rng.standard_normal((2, d, d_k))
    W_V = rng.standard_normal((d, d_v))
    J = self_attention_jacobian(X, W_Q, W_K, W_V)
    assert J.shape == (n * d_v, n * d)
    ref = autograd_jacobian(torch_dot_attention, X, W_Q, W_K, W_V)
    np.testing.assert_allclose(J, ref, rtol=1e-10, atol=1e-10)


def test_dot_product_jacobian_for_one_token_is_the_value_map():
    rng = np.random.default_rng(3)
    W_Q, W_K = rng.standard_normal((2, 4, 3))
    W_V = rng.standard_normal((4, 2))
    J = self_attention_jacobian(100 * rng.standard_normal((1, 4)), W_Q, W_K, W_V)
    np.testing.assert_array_equal(J, W_V.T)


def test_dot_product_jacobian_is_finite_for_large_inputs():
    rng = np.random.default_rng(4)
    X = 1e3 * rng.standard_normal((5, 3))
    J = self_attention_jacobian(X, *rng.standard_normal((3, 3, 3)))
    assert np.isfinite(J).all()


@pytest.mark.parametrize(("n", "d", "d_k", "d_v"), [(1, 2, 2, 2), (4, 3, 2, 5), (7, 4, 4, 3)])
@pytest.mark.parametrize("seed", [0, 1])
def test_l2_attention_and_its_jacobian_equal_pytorch(n, d, d_k, d_v, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    W_Q = rng.standard_normal((d, d_k))
    W_V = rng.standard_normal((d, d_v))
    out = torch_l2_attention(*(torch.tensor(a) for a in (X, W_Q, W_V))).numpy()
    np.testing.assert_allclose(l2_self_attention(X, W_Q, W_V), out, rtol=1e-12, atol=1e-12)
    J = l2_self_attention_jacobian(X, W_Q, W_V)
    ref = autograd_jacobian(torch_l2_attention, X, W_Q, W_V)
    np.testing.assert_allclose(J, ref, rtol=1e-10, atol=1e-10)


def test_l2_attention_and_its_jacobian_are_batched():
    """A batch (2, 3, n, d) gives, sequence by sequence, what one sequence gives, and
    PyTorch's autograd agrees on every sequence of the batch."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((2, 3, 4, 3))
    W_Q, W_V = rng.standard_normal((3, 2)), rng.standard_normal((3, 5))
    out = l2_self_attention(X, W_Q, W_V)
    J = l2_self_attention_jacobian(X, W_Q, W_V)
    assert out.shape == (2, 3, 4, 5) and J.shape == (2, 3, 20, 12)
    for a in range(2):
        for b in range(3):
            np.testing.assert_allclose(out[a, b], l2_self_attention(X[a, b], W_Q, W_V), rtol=1e-13)
            np.testing.assert_allclose(
                J[a, b],
                autograd_jacobian(torch_l2_attention, X[a, b], W_Q, W_V),
                rtol=1e-10,
                atol=1e-10,
            )


def test_l2_bound_scales_with_the_square_of_W_Q():
    """The largest Jacobian norm grows like c^2 when W_Q is multiplied by c, and so does
    the bound; a bound linear in ||W_Q|| (the multi-head factor of the paper read literally
    for one head) is exceeded for c = 4. Two tokens of width 1: the Jacobian depends on
    c (x_2 - x_1) only, so a grid of that gap finds its largest norm."""
    gaps = np.linspace(-4.0, 4.0, 8001)
    sups = {}
    for c in (0.5, 1.0, 4.0):
        X = np.stack([np.zeros_like(gaps), gaps / c], axis=1)[:, :, None]
        sups[c] = np.linalg.norm(
            l2_self_attention_jacobian(X, [[c]], [[1.0]]), 2, axis=(1, 2)
        ).max()
        assert sups[c] <= l2_lipschitz_bound(2, [[c]], [[1.0]])
        assert math.isclose(
            l2_lipschitz_bound(2, [[c]], [[1.0]]), c**2 * l2_lipschitz_bound(2, [[1.0]], [[1.0]])
        )
    assert math.isclose(sups[0.5] / 0.25, sups[4.0] / 16, rel_tol=1e-12)
    assert math.isclose(sups[1.0], 1.6016389, rel_tol=1e-6)  # the largest norm, c = 1
    assert sups[4.0] > 4.0 * l2_lipschitz_bound(2, [[1.0]], [[1.0]])  # beyond c ||W_V|| * const


@pytest.mark.parametrize("seed", range(4))
def test_l2_bound_holds_on_random_inputs(seed):
    rng = np.random.default_rng(seed)
    n, d = 5, 3
    W_Q = rng.standard_normal((d, 2))
    W_V = rng.standard_normal((d, d))
    bound = l2_lipschitz_bound(n, W_Q, W_V)
    for scale in (0.1, 1.0, 3.0, 10.0):
        X = scale * rng.standard_normal((n, d))
        assert np.linalg.norm(l2_self_attention_jacobian(X, W_Q, W_V), 2) <= bound
        # and the difference quotient for a finite step
        Y = X + rng.standard_normal((n, d))
        gap = np.linalg.norm(l2_self_attention(X, W_Q, W_V) - l2_self_attention(Y, W_Q, W_V))
        assert gap <= bound * np.linalg.norm(X - Y)


@pytest.mark.parametrize("seed", [0, 1])
def test_l2_bound_holds_on_adversarially_optimised_inputs(seed):
    """Gradient ascent on the Jacobian's spectral norm (autograd through the Jacobian)."""
    rng = np.random.default_rng(seed)
    n, d = 4, 2
    W_Q = torch.tensor(rng.standard_normal((d, d)))
    W_V = torch.tensor(rng.standard_normal((d, d)))
    bound = l2_lipschitz_bound(n, W_Q.numpy(), W_V.numpy())
    X = torch.tensor(rng.standard_normal((n, d)), requires_grad=True)
    opt = torch.optim.Adam([X], lr=0.1)
    best = 0.0
    for _ in range(60):
        J = torch.autograd.functional.jacobian(
            lambda x: torch_l2_attention(x, W_Q, W_V), X, create_graph=True, vectorize=True
        ).reshape(n * d, n * d)
        norm = torch.linalg.matrix_norm(J, ord=2)
        best = max(best, norm.item())
        opt.zero_grad()
        (-norm).backward()
        opt.step()
    start = np.linalg.norm(l2_self_attention_jacobian(rng.standard_normal((n, d)), W_Q, W_V), 2)
    assert best > start  # the search did climb
    assert best <= bound
    np.testing.assert_allclose(
        np.linalg.norm(l2_self_attention_jacobian(X.detach().numpy(), W_Q, W_V), 2),
        torch.linalg.matrix_norm(
            torch.autograd.functional.jacobian(
                lambda x: torch_l2_attention(x, W_Q, W_V), X.detach()
            ).reshape(n * d, n * d),
            ord=2,
        ).item(),
        rtol=1e-10,
    )


def test_l2_bound_formula():
    # n = 1: phi^{-1}(0) = 0, so sqrt(1/d_k) ||W_Q||^2 ||W_V||; n = 2: phi^{-1}(1) = W_0(1/e)
    W_Q = np.diag([2.0, 1.0, 0.5])
    W_V = np.diag([3.0, 1.0, 1.0])
    assert math.isclose(l2_lipschitz_bound(1, W_Q, W_V), 4 * 3 / math.sqrt(3), rel_tol=1e-14)
    w = 0.27846454276107380  # W_0(1/e)
    assert math.isclose(
        l2_lipschitz_bound(2, W_Q, W_V), math.sqrt(2 / 3) * (4 * w + 1) * 12, rel_tol=1e-12
    )
    big = l2_lipschitz_bound(10**6, np.eye(1), np.eye(1)) / 1000 - 1  # 4 phi^{-1}(n - 1)
    x = big / 4
    assert math.isclose(x * math.exp(x + 1), 10**6 - 1, rel_tol=1e-12)


def test_dot_product_attention_jacobian_grows_without_bound():
    """Kim et al.'s family: one token at 0, the others at t; the norm grows like t^2."""
    norms = []
    for t in (1.0, 10.0, 100.0):
        X = np.array([[0.0], [t], [t]])
        norms.append(np.linalg.norm(self_attention_jacobian(X, [[1.0]], [[1.0]], [[1.0]]), 2))
    assert norms[2] / norms[1] > 50 and norms[1] / norms[0] > 10


def test_l2_attention_of_large_nearby_tokens_is_accurate():
    # tokens 1e6 from the origin and 1 apart: the expanded form of the distance would
    # cancel every digit of ||q_i - q_j||^2
    X = 1e6 + np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    out = l2_self_attention(X, np.eye(2), np.eye(2))
    ref = torch_l2_attention(*(torch.tensor(a) for a in (X - 1e6, np.eye(2), np.eye(2))))
    # the weights depend only on differences, so shifting X shifts the output by the same
    # weighted mean of the shift: compare with the shifted computation
    np.testing.assert_allclose(out - 1e6 / math.sqrt(2), ref.numpy(), rtol=0, atol=1e-6)


def test_rank_collapse_residual():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 5, 4))
    r = rank_collapse_residual(X)
    assert r.shape == (3,)
    for b in range(3):
        # minimise ||X - 1 x^T||_F directly over x: the mean row
        x = np.linalg.lstsq(np.ones((5, 1)), X[b], rcond=None)[0]
        ref = np.linalg.norm(X[b] - x) / np.linalg.norm(X[b])
        assert math.isclose(r[b], ref, rel_tol=1e-12)
        perturbed = X[b].mean(0) + 0.01 * rng.standard_normal(4)
        assert np.linalg.norm(X[b] - perturbed) / np.linalg.norm(X[b]) > r[b]
    assert rank_collapse_residual(np.tile([1.0, -2.0], (4, 1))) == 0.0
    assert rank_collapse_residual(np.zeros((3, 2))) == 0.0
    assert rank_collapse_residual(1e300 * X[0]) == pytest.approx(r[0], rel=1e-12)
    assert rank_collapse_residual(1e-300 * X[0]) == pytest.approx(r[0], rel=1e-12)


@given(st.integers(2, 7), st.integers(0, 2**32 - 1))
@settings(max_examples=30, deadline=None)
def test_min_head_width_is_reached_and_cannot_be_beaten(n, seed):
    rng = np.random.default_rng(seed)
    r = int(rng.integers(1, n + 1))
    L = rng.standard_normal((n, r)) @ rng.standard_normal((r, n)) + rng.standard_normal((n, 1))
    width = min_head_width(L)
    assert width <= r
    # reached: a rank-`width` factorisation of the centred L gives the same weights
    U, s, Vt = np.linalg.svd(L - L.mean(-1, keepdims=True))
    Q, K = U[:, :width] * s[:width], Vt[:width].T
    assert np.allclose(softmax(Q @ K.T), softmax(L))
    # not beaten: the best rank-(width - 1) centred scores miss by the next singular value
    if width > 0:
        assert s[width - 1] > 1e-9 * s[0]


def test_min_head_width_of_the_diagonal_pattern():
    for n in (2, 5, 9):
        assert min_head_width(4.0 * np.eye(n)) == n - 1
    assert min_head_width(np.zeros((3, 3))) == 0
    assert min_head_width(np.outer([1.0, 2.0, 3.0], [1.0, -1.0, 0.0])) == 1


@pytest.mark.parametrize("k", [1, 2, 4, 6])
def test_truncated_attention_and_its_error_bound(k):
    rng = np.random.default_rng(k)
    s = 2 * rng.standard_normal((2, 5, 6))
    V = rng.standard_normal((2, 6, 3))
    out = truncated_attention(s, V, k)
    p = softmax(s)
    idx = np.argsort(-s, axis=-1)[..., :k]
    kept = np.zeros_like(p)
    np.put_along_axis(kept, idx, np.take_along_axis(p, idx, -1), -1)
    mass = kept.sum(-1, keepdims=True)
    assert np.allclose(out, (kept / mass) @ V)
    eps = 1 - mass[..., 0]
    err = np.linalg.norm(p @ V - out, axis=-1)
    vmax = np.linalg.norm(V, axis=-1).max(-1)[:, None]
    assert (err <= 2 * eps * vmax + 1e-12).all()
    if k == 6:
        assert np.allclose(out, p @ V)


def test_truncated_attention_keeps_exactly_k_keys_under_ties():
    # three equal scores, k = 2: the two lower indices are kept, not all three
    out = truncated_attention(np.array([[1.0, 1.0, 1.0, 0.0]]), np.eye(4), 2)
    np.testing.assert_allclose(out, [[0.5, 0.5, 0.0, 0.0]])
    out = truncated_attention(np.array([[0.0, 2.0, 2.0, 2.0]]), np.eye(4), 1)
    np.testing.assert_allclose(out, [[0.0, 1.0, 0.0, 0.0]])


def test_truncation_bound_is_attained():
    # two keys with opposite values: the error is exactly 2 eps ||v||
    s = np.array([[1.0, 0.0]])
    V = np.array([[1.0, 0.0], [-1.0, 0.0]])
    eps = softmax(s)[0, 1]
    err = np.linalg.norm(softmax(s) @ V - truncated_attention(s, V, 1))
    assert math.isclose(err, 2 * eps, rel_tol=1e-12)


def test_truncated_attention_with_extreme_scores():
    s = np.array([[1e4, -1e4, 0.0]])
    V = np.eye(3)
    assert np.allclose(truncated_attention(s, V, 2), [[1, 0, 0]])
    s32 = np.array([[60.0, 59.0, 0.0]], dtype=np.float32)
    assert np.isfinite(truncated_attention(s32, V, 2)).all()


def _bowl(centre, curvatures):
    def f(x):  # sum_i c_i (x_i - centre_i)^2 for each row of x
        r = x - centre
        return np.sum(curvatures * r * r, axis=-1), 2 * curvatures * r

    return f


@pytest.mark.parametrize("curvatures", [[1.0, 1.0, 1.0], [1.0, 10.0, 100.0], [1e4, 1.0, 3.0]])
def test_minimise_bfgs_finds_the_minimum_of_a_quadratic(curvatures):
    """Condition numbers 1 to 1e4, four starts each: every start reaches the centre."""
    rng = np.random.default_rng(0)
    centre = rng.standard_normal(3)
    x, f, g = minimise_bfgs(
        _bowl(centre, np.array(curvatures)), 3 * rng.standard_normal((4, 3)), gtol=1e-12
    )
    np.testing.assert_allclose(x, np.tile(centre, (4, 1)), atol=1e-9)
    assert (np.linalg.norm(g, axis=-1) <= 1e-12).all() and (f < 1e-18).all()


def _rosenbrock(x):
    a, b = x[:, 0], x[:, 1]
    f = (1 - a) ** 2 + 100 * (b - a * a) ** 2
    return f, np.stack([-2 * (1 - a) - 400 * a * (b - a * a), 200 * (b - a * a)], axis=1)


def test_minimise_bfgs_finds_the_minimum_of_rosenbrocks_valley():
    starts = np.array([[-1.2, 1.0], [0.0, 0.0], [2.0, 2.0], [-0.5, 3.0]])
    x = minimise_bfgs(_rosenbrock, starts, steps=500, step=0.1)[0]
    np.testing.assert_allclose(x, np.ones((4, 2)), atol=1e-6)


def test_minimise_bfgs_treats_the_starts_independently():
    # each start ends exactly where it ends alone, though the starts converge after very
    # different numbers of steps: a converged start stops, and its steps never depend on
    # the others'
    starts = np.array([[-1.2, 1.0], [0.9, 0.8], [2.0, 2.0], [1.0, 1.0]])
    together = minimise_bfgs(_rosenbrock, starts, steps=500, gtol=1e-5, step=0.1)
    for b in range(4):
        alone = minimise_bfgs(_rosenbrock, starts[b : b + 1], steps=500, gtol=1e-5, step=0.1)
        for got, expected in zip(together, alone, strict=True):
            np.testing.assert_array_equal(got[b], expected[0])
    np.testing.assert_array_equal(together[0][3], [1.0, 1.0])  # it started at the minimum


def test_minimise_bfgs_takes_no_step_when_converged_or_told_so():
    f = _bowl(np.ones(2), np.ones(2))
    x0 = np.array([[1.0, 1.0], [0.0, 3.0]])
    np.testing.assert_array_equal(minimise_bfgs(f, x0, steps=0)[0], x0)
    np.testing.assert_array_equal(minimise_bfgs(f, x0, gtol=10.0)[0], x0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"x0": np.array([[np.nan, 1.0]])}, "x0 must be finite"),
        ({"x0": np.zeros((0, 2))}, "x0 must have shape"),
        ({"step": 0.0}, "step must be in"),
        ({"step": 1.5}, "step must be in"),
        ({"gtol": -1.0}, "gtol must be at least 0"),
        ({"steps": -1}, "steps must be"),
        ({"fun": lambda x: (np.zeros(len(x) + 1), x)}, "fun must return values of shape"),
        ({"fun": lambda x: (np.zeros(len(x)), x[:, :1])}, "gradients of shape"),
    ],
)
def test_minimise_bfgs_rejects_bad_input(kwargs, match):
    args = {"fun": _bowl(np.zeros(2), np.ones(2)), "x0": np.ones((2, 2))} | kwargs
    fun, x0 = args.pop("fun"), args.pop("x0")
    with pytest.raises(ValueError, match=match):
        minimise_bfgs(fun, x0, **args)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: self_attention_jacobian(np.ones(3), np.eye(3), np.eye(3), np.eye(3)),
            ValueError,
            "X must be 2-D",
        ),
        (
            lambda: self_attention_jacobian(np.ones((2, 3)), np.eye(2), np.eye(3), np.eye(3)),
            ValueError,
            "W_Q must have as many rows",
        ),
        (
            lambda: self_attention_jacobian(np.ones((2, 3)), np.eye(3), np.ones((3, 2)), np.eye(3)),
            ValueError,
            "same shape",
        ),
        (
            lambda: self_attention_jacobian(
                np.array([[np.nan, 1.0]]), np.eye(2), np.eye(2), np.eye(2)
            ),
            ValueError,
            "X must be finite",
        ),
        (
            lambda: self_attention_jacobian(
                np.ones((2, 2)), np.eye(2), np.eye(2), np.full((2, 2), np.inf)
            ),
            ValueError,
            "W_V must be finite",
        ),
        (
            lambda: self_attention_jacobian(np.ones((2, 2), bool), np.eye(2), np.eye(2), np.eye(2)),
            TypeError,
            "X must be an array of real",
        ),
        (
            lambda: l2_self_attention(np.ones((2, 3)), np.eye(2), np.eye(3)),
            ValueError,
            "W_Q must have as many rows",
        ),
        (
            lambda: l2_self_attention_jacobian(np.ones((2, 3)), np.eye(3), np.eye(2)),
            ValueError,
            "W_V must have as many rows",
        ),
        (lambda: l2_lipschitz_bound(0, np.eye(2), np.eye(2)), ValueError, "n must be positive"),
        (lambda: l2_lipschitz_bound(2.5, np.eye(2), np.eye(2)), TypeError, "n must be an integer"),
        (lambda: l2_lipschitz_bound(2, np.eye(2), np.eye(3)), ValueError, "same number of rows"),
        (lambda: rank_collapse_residual(np.ones(3)), ValueError, "at least 2-D"),
        (lambda: rank_collapse_residual(np.array([[np.inf, 0.0]])), ValueError, "X must be finite"),
        (
            lambda: min_head_width(np.array([[0.0, -np.inf]])),
            ValueError,
            "log_weights must be finite",
        ),
        (
            lambda: truncated_attention(np.ones((2, 3)), np.ones((4, 2)), 1),
            ValueError,
            "V must have one row per key",
        ),
        (
            lambda: truncated_attention(np.ones((2, 3)), np.ones((3, 2)), 4),
            ValueError,
            "k must be at most",
        ),
        (
            lambda: truncated_attention(np.ones((2, 3)), np.ones((3, 2)), 0),
            ValueError,
            "k must be positive",
        ),
        (
            lambda: truncated_attention(np.full((2, 3), np.nan), np.ones((3, 2)), 1),
            ValueError,
            "scores must be finite",
        ),
    ],
)
def test_bad_input_names_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()

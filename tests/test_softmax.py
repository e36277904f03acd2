"""Tests of helpers.softmax: properties, extremes, PyTorch parity, errors."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numpy.exceptions import AxisError

from helpers.softmax import entropy, log_softmax, logsumexp, softmax, softmax_jacobian

# The module itself: ``helpers.softmax`` is the re-exported *function*.
softmax_module = importlib.import_module("helpers.softmax")

DTYPES = [np.float16, np.float32, np.float64]
SEEDS = range(6)
TEMPERATURES = [1e-4, 1e-2, 0.3, 1.0, 7.0, 1e2, 1e4]

# Tolerances. Every parity test compares with a float64 reference (PyTorch in
# float64 on the same input values, exactly representable in each dtype tested), so
# they follow an error model rather than a guess:
# * the working precision u_w (float32's eps for float16 and float32 inputs, float64's
#   for float64) rounds z = (x - max x) / τ, and exp has condition number |z|, so p_i
#   moves by a relative ~u_w·|z_i|; entries with |z| beyond -log(smallest subnormal)
#   (~103 in float32, ~745 in float64) are 0 or negligible, which caps |z|;
# * the result is rounded once to the output dtype (relative u_o, its eps);
#   float16 subnormals (below 6.1e-5) have an absolute spacing of 6e-8;
# * log-domain values near 0 (the max entry's log-probability) lose the relative
#   accuracy to cancellation and keep an absolute one, ~u_w·(1 + |z|);
# * SLACK covers the few further roundings (a sum over n <= 5 terms, log, divide);
# * the reference is not exact either: PyTorch divides x / τ *before* subtracting the
#   max, which moves its z by up to ~2 u_64·max|x| / τ (u_64 = float64's eps).
SLACK = 8


def tolerance(kind: str, x: np.ndarray, tau: float, dtype: type) -> dict[str, float]:
    """``rtol``/``atol`` for comparing ``kind`` of ``x`` (of ``dtype``) at temperature ``tau``."""
    u_o = float(np.finfo(dtype).eps)
    work = np.float64 if dtype == np.float64 else np.float32
    u_w = float(np.finfo(work).eps)
    finite = x[np.isfinite(x)].astype(np.float64)
    spread = float(finite.max() - finite.min()) if finite.size else 0.0
    z = min(spread / tau, -float(np.log(np.finfo(work).smallest_subnormal)))  # largest |z|
    ref = 2 * float(np.finfo(np.float64).eps) * float(np.abs(finite).max(initial=0)) / tau
    floor = 4 * float(np.finfo(dtype).smallest_subnormal)
    rel = 2 * u_o + SLACK * u_w * (1 + z) + ref
    if kind == "prob":  # softmax
        return {"rtol": rel, "atol": floor}
    if kind == "log":  # log_softmax
        return {"rtol": 2 * u_o, "atol": SLACK * u_w * (1 + z) + ref}
    if kind == "lse":  # logsumexp = max + τ log(sum): the τ log(sum) part is absolute
        return {"rtol": 2 * u_o, "atol": tau * (SLACK * u_w * (1 + z) + ref)}
    if kind == "jacobian":  # p_i (δ_ij - p_j) / τ: 1 - p_i is absolute near p_i = 1
        return {"rtol": rel, "atol": SLACK * u_w / tau + floor}
    raise ValueError(kind)


def twice(tol: dict[str, float]) -> dict[str, float]:
    """Two independent computations, each within ``tol`` of the truth."""
    return {k: 2 * v for k, v in tol.items()}


# Central differences with h = 1e-6 in float64: truncation O(h²) ~ 1e-12 plus
# cancellation eps/h ~ 1e-10, times 1/τ for the temperature.
FD_STEP, FD_ATOL = 1e-6, 1e-8

# Hypothesis: modest example counts keep the whole file well under a minute.
PROPERTY = settings(max_examples=60, deadline=None)

logits = hnp.arrays(
    np.float64,
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6),
    elements=st.floats(-50, 50, allow_nan=False, allow_infinity=False),
)
vectors = hnp.arrays(
    np.float64,
    st.integers(1, 8),
    elements=st.floats(-50, 50, allow_nan=False, allow_infinity=False),
)
temperatures = st.floats(1e-4, 1e4).filter(lambda t: t > 0)


def random_case(seed: int) -> tuple[np.ndarray, int]:
    """A random float64 array (1-4 dims, sides 1-5) and a random valid axis."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 6, size=rng.integers(1, 5)))
    x = rng.normal(scale=4.0, size=shape)
    axis = int(rng.integers(-len(shape), len(shape)))
    return x, axis


def torch_ref(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))


def saturate(ref: np.ndarray, dtype: type) -> np.ndarray:
    """The float64 reference as the documented float16 result: finite values clipped
    to the dtype's range (a no-op for float32/float64 at these magnitudes)."""
    info = np.finfo(dtype)
    return np.where(np.isfinite(ref), np.clip(ref, info.min, info.max), ref)


# ---------------------------------------------------------------------------
# Properties (hypothesis)
# ---------------------------------------------------------------------------


@PROPERTY
@given(x=logits, data=st.data(), tau=temperatures)
def test_softmax_is_a_probability_vector(x, data, tau):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    p = softmax(x, axis=axis, temperature=tau)
    assert p.shape == x.shape
    assert np.all(p >= 0)
    assert np.allclose(p.sum(axis=axis), 1.0, rtol=0, atol=1e-12)


@PROPERTY
@given(x=vectors, tau=temperatures)
def test_softmax_preserves_order(x, tau):
    p = softmax(x, temperature=tau)
    i, j = np.meshgrid(np.arange(x.size), np.arange(x.size), indexing="ij")
    assert np.all(p[i][x[i] < x[j]] <= p[j][x[i] < x[j]])
    assert np.all(p[i][x[i] == x[j]] == p[j][x[i] == x[j]])  # ties: exactly equal


@PROPERTY
@given(x=logits, c=st.floats(-100, 100))
def test_softmax_is_shift_invariant(x, c):
    # x + c rounds each entry by up to 1e-14 (|x + c| <= 150), moving p by as much.
    assert np.allclose(softmax(x + c), softmax(x), rtol=1e-10, atol=1e-12)


@PROPERTY
@given(x=logits, tau=temperatures)
def test_log_softmax_is_log_of_softmax(x, tau):
    logp, p = log_softmax(x, temperature=tau), softmax(x, temperature=tau)
    visible = p > 1e-300  # where np.log(p) has not underflowed to -inf
    assert np.all(logp <= 0)
    assert np.allclose(logp[visible], np.log(p[visible]), rtol=1e-10, atol=1e-12)


@PROPERTY
@given(x=logits, tau=temperatures)
def test_logsumexp_is_a_smooth_maximum(x, tau):
    lse, m = logsumexp(x, temperature=tau), x.max(axis=-1)
    n = x.shape[-1]
    assert np.all(lse >= m)  # exact: the max term contributes exactly 1 to the sum
    assert np.all(lse <= m + tau * np.log(n) * (1 + 1e-12) + 1e-12 * np.abs(m))


@PROPERTY
@given(x=logits, tau=temperatures)
def test_logsumexp_keepdims_broadcasts_against_x(x, tau):
    lse = logsumexp(x, temperature=tau, keepdims=True)
    assert lse.shape == (*x.shape[:-1], 1)
    assert np.allclose((x - lse) / tau, log_softmax(x, temperature=tau), rtol=1e-9, atol=1e-9)


@PROPERTY
@given(k=hnp.arrays(np.int64, st.integers(1, 8), elements=st.integers(-5, 5)))
def test_small_temperature_gives_argmax_with_ties_split(k):
    # Integer logits differ by >= 1, so exp(-1 / 1e-4) underflows to exactly 0.
    x = k.astype(np.float64)
    winners = x == x.max()
    assert np.array_equal(softmax(x, temperature=1e-4), winners / winners.sum())


@PROPERTY
@given(x=vectors)
def test_large_temperature_gives_uniform(x):
    # Every ratio p_i / p_j is at most exp(100 / 1e4) ≈ 1.01.
    assert np.allclose(softmax(x, temperature=1e4), 1 / x.size, rtol=0.011, atol=0)


@PROPERTY
@given(x=logits, tau=temperatures)
def test_entropy_is_between_zero_and_log_n(x, tau):
    h = entropy(softmax(x, temperature=tau))
    assert np.all(h >= 0)
    assert np.all(h <= np.log(x.shape[-1]) + 1e-12)


@PROPERTY
@given(x=vectors, t1=temperatures, t2=temperatures)
def test_entropy_does_not_decrease_with_temperature(x, t1, t2):
    lo, hi = sorted((t1, t2))
    assert entropy(softmax(x, temperature=lo)) <= entropy(softmax(x, temperature=hi)) + 1e-12


# ---------------------------------------------------------------------------
# Values, dtypes and extremes
# ---------------------------------------------------------------------------


def test_known_values():
    x = np.array([1.0, 2.0, 3.0])
    e = np.exp(x)
    assert np.allclose(softmax(x), e / e.sum(), rtol=1e-15)
    assert np.allclose(log_softmax(x), x - np.log(e.sum()), rtol=1e-15)
    assert np.isclose(logsumexp(x), np.log(e.sum()), rtol=1e-15)
    assert np.isclose(logsumexp(x, temperature=2.0), 2 * np.log(np.exp(x / 2).sum()), rtol=1e-15)
    assert np.isclose(entropy(np.full(4, 0.25)), np.log(4), rtol=1e-15)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fn", [softmax, log_softmax, logsumexp, softmax_jacobian])
def test_float_dtypes_are_preserved(fn, dtype):
    assert fn(np.array([[1.0, 2.0, 3.0]], dtype=dtype)).dtype == dtype


@pytest.mark.parametrize("dtype", DTYPES)
def test_entropy_preserves_float_dtype(dtype):
    assert entropy(np.array([0.5, 0.5], dtype=dtype)).dtype == dtype


@pytest.mark.parametrize("fn", [softmax, log_softmax, logsumexp, softmax_jacobian, entropy])
@pytest.mark.parametrize(
    "value", [np.array([0, 1], dtype=np.int32), np.array([1, 0], np.uint8), [0, 1]]
)
def test_integers_and_lists_give_float64(fn, value):
    out = fn(value)
    assert out.dtype == np.float64
    assert np.allclose(out, fn(np.asarray(value, dtype=np.float64)), rtol=0, atol=0)


@pytest.mark.parametrize("scale", [3.0, 30.0])
@pytest.mark.parametrize("fn", [softmax, log_softmax, logsumexp, softmax_jacobian])
def test_float16_is_computed_in_float32_and_rounded_once(fn, scale):
    # scale 3 over 256 entries puts most probabilities in float16's subnormal range.
    x = np.random.default_rng(0).normal(scale=scale, size=(16, 256)).astype(np.float16)
    assert np.array_equal(fn(x), fn(x.astype(np.float32)).astype(np.float16))


def test_float16_rounding_shortcut_matches_numpy_cast_bit_for_bit():
    # _to_out_dtype pre-rounds float16's subnormal range itself (for speed); check it
    # against NumPy's cast on every halfway point and random values around them.
    halfway = (np.arange(-(2**11), 2**11) + 0.5) * 2.0**-24  # ties between subnormals
    rng = np.random.default_rng(0)
    near = rng.uniform(-(2.0**-13), 2.0**-13, 100_000)
    v = np.concatenate([halfway, near, [0.0, -0.0, 2.0**-14, -np.inf, 1.0]]).astype(np.float32)
    got = softmax_module._to_out_dtype(v.copy(), np.dtype(np.float16))
    assert got.dtype == np.float16
    assert np.array_equal(got.view(np.uint16), v.astype(np.float16).view(np.uint16))


def test_float16_logsumexp_does_not_overflow_the_sum():
    # 70000 equal terms: the sum 70000 > 65504, the largest float16.
    x = np.zeros(70_000, dtype=np.float16)
    assert np.isclose(logsumexp(x), np.log(70_000), rtol=1e-3)


@pytest.mark.parametrize("fn", [softmax, log_softmax, logsumexp, softmax_jacobian])
def test_input_is_not_modified(fn):
    x = np.array([[3.0, -1.0, 2.0], [0.0, 0.0, -np.inf]])
    before = x.copy()
    fn(x, temperature=0.5)
    assert np.array_equal(x, before)


EXTREME = np.array([1e4, -1e4, 0.0, 5e3, -2.5e3, 1e4 - 8])  # exact in float16 too


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tau", TEMPERATURES)
def test_extreme_logits_and_temperatures(dtype, tau):
    x = EXTREME.astype(dtype)
    ref = torch_ref(x) / tau
    p = softmax(x, temperature=tau)
    assert np.all(np.isfinite(p))
    assert np.allclose(p, torch.softmax(ref, -1).numpy(), **tolerance("prob", x, tau, dtype))
    logp = log_softmax(x, temperature=tau)
    assert np.all(np.isfinite(logp))
    ref_logp = saturate(torch.log_softmax(ref, -1).numpy(), dtype)
    assert np.allclose(logp, ref_logp, **tolerance("log", x, tau, dtype))
    lse = logsumexp(x, temperature=tau)
    assert np.isfinite(lse)
    ref_lse = tau * torch.logsumexp(ref, -1).numpy()
    assert np.allclose(lse, ref_lse, **tolerance("lse", x, tau, dtype))
    jac = softmax_jacobian(x, temperature=tau)
    assert np.all(np.isfinite(jac))
    ref_jac = torch.autograd.functional.jacobian(
        lambda t: torch.softmax(t / tau, -1), torch_ref(x)
    ).numpy()
    assert np.allclose(jac, ref_jac, **tolerance("jacobian", x, tau, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_ulp_gaps_between_large_logits_survive_a_small_temperature(dtype):
    # x - max(x) is exact here (Sterbenz), so subtracting the max *before* dividing by
    # τ keeps a gap of one ulp between logits near 1e4; dividing first would round
    # x / τ ≈ 1e7 (float32) or 1e16 (float64) to a spacing comparable to the gap.
    big = np.array(1e4, dtype=dtype)
    gap = float(np.spacing(big))
    x = big - gap * np.arange(3, dtype=dtype)  # [big, big - gap, big - 2 gap], exact
    tau = gap / 0.7
    expected = softmax(np.array([0.0, -0.7, -1.4]))
    assert np.allclose(
        softmax(x, temperature=tau), expected, **tolerance("prob", x - big, tau, dtype)
    )
    assert np.allclose(
        log_softmax(x, temperature=tau), np.log(expected), **tolerance("log", x - big, tau, dtype)
    )


@pytest.mark.filterwarnings("error")  # no "overflow encountered in cast"
def test_float16_log_softmax_saturates_instead_of_overflowing():
    x = np.array([1e4, -1e4, -np.inf], dtype=np.float16)
    logp = log_softmax(x, temperature=1e-4)  # exact: [0, -2e8, -inf]
    assert logp.tolist() == [0.0, float(np.finfo(np.float16).min), -np.inf]
    lse = logsumexp(np.full(1000, 6e4, dtype=np.float16), temperature=1e4)  # exact: 1.3e5
    assert lse == np.finfo(np.float16).max


@pytest.mark.parametrize("dtype", DTYPES)
def test_ties_split_evenly_at_tiny_temperature(dtype):
    x = np.array([1e4, 1e4, 0.0], dtype=dtype)
    assert np.array_equal(softmax(x, temperature=1e-4), np.array([0.5, 0.5, 0.0], dtype=dtype))
    assert np.array_equal(softmax(-x, temperature=1e-4), np.array([0.0, 0.0, 1.0], dtype=dtype))
    assert np.isclose(
        logsumexp(x, temperature=1e-4), 1e4, rtol=1e-3 if dtype == np.float16 else 1e-7
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_neg_inf_logits_get_exactly_zero(dtype):
    x = np.array([[0.0, -np.inf, 1.0], [-np.inf, 2.0, -np.inf]], dtype=dtype)
    p = softmax(x)
    assert p[0, 1] == 0 and p[1, 0] == 0 and p[1, 2] == 0
    assert p[1, 1] == 1
    assert np.allclose(p[0], softmax(np.array([0.0, 1.0], dtype=dtype)) @ [[1, 0, 0], [0, 0, 1]])
    logp = log_softmax(x)
    assert np.isneginf(logp[0, 1]) and np.isneginf(logp[1, 0]) and logp[1, 1] == 0
    assert np.isfinite(logsumexp(x)).all()
    jac = softmax_jacobian(x)
    assert np.all(jac[0, 1, :] == 0) and np.all(jac[0, :, 1] == 0)
    assert np.all(jac[1] == 0)  # a one-hot p has a zero Jacobian


def test_all_neg_inf_row_raises_but_logsumexp_is_neg_inf():
    x = np.array([[0.0, 1.0], [-np.inf, -np.inf]])
    for fn in (softmax, log_softmax, softmax_jacobian):
        with pytest.raises(ValueError, match=r"x has a slice .* all -inf \(x\[1, :\]\)"):
            fn(x)
    lse = logsumexp(x)
    assert np.isneginf(lse[1]) and np.isfinite(lse[0])
    assert np.array_equal(lse, torch.logsumexp(torch_ref(x), -1).numpy())


def test_entropy_zero_probabilities_contribute_nothing():
    assert entropy(np.array([0.0, 1.0, 0.0])) == 0
    assert not np.signbit(entropy(np.array([0.0, 1.0, 0.0])))  # 0.0, not -0.0
    assert np.isclose(entropy(np.array([0.5, 0.5, 0.0])), np.log(2), rtol=1e-15)
    assert entropy(np.zeros((0, 3))).shape == (0,)


@pytest.mark.parametrize("seed", SEEDS)
def test_entropy_matches_torch_distributions(seed):
    x, axis = random_case(seed)
    p = softmax(x, axis=axis)
    ref = torch.distributions.Categorical(probs=torch_ref(np.moveaxis(p, axis, -1))).entropy()
    assert np.allclose(entropy(p, axis=axis), ref.numpy(), rtol=1e-12, atol=1e-14)


# ---------------------------------------------------------------------------
# Parity with PyTorch
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tau", [1.0, 0.3, 7.0])
def test_parity_with_torch(seed, dtype, tau):
    x, axis = random_case(seed)
    x = x.astype(dtype)
    ref = torch_ref(x) / tau
    p, ref_p = softmax(x, axis, temperature=tau), torch.softmax(ref, axis).numpy()
    assert np.allclose(p, ref_p, **tolerance("prob", x, tau, dtype))
    logp, ref_logp = log_softmax(x, axis, temperature=tau), torch.log_softmax(ref, axis).numpy()
    assert np.allclose(logp, ref_logp, **tolerance("log", x, tau, dtype))
    for keepdims in (False, True):
        lse = logsumexp(x, axis, temperature=tau, keepdims=keepdims)
        ref_lse = tau * torch.logsumexp(ref, axis, keepdim=keepdims).numpy()
        assert lse.shape == ref_lse.shape
        assert np.allclose(lse, ref_lse, **tolerance("lse", x, tau, dtype))


@pytest.mark.parametrize("seed", SEEDS)
def test_float32_parity_with_torch_float32(seed):
    # Both libraries compute in float32, each within the error model of the truth.
    x, axis = random_case(seed)
    x = x.astype(np.float32)
    t = torch.from_numpy(np.ascontiguousarray(x))
    for fn, ref, kind in [
        (softmax, torch.softmax, "prob"),
        (log_softmax, torch.log_softmax, "log"),
        (logsumexp, torch.logsumexp, "lse"),
    ]:
        assert np.allclose(
            fn(x, axis), ref(t, axis).numpy(), **twice(tolerance(kind, x, 1.0, np.float32))
        )


@pytest.mark.parametrize("seed", SEEDS)
def test_float16_softmax_parity_with_torch_float16(seed):
    # Only softmax: PyTorch's CPU float16 log_softmax and logsumexp are less accurate
    # than these functions (measured up to ~2000 float16 ulps off near 0, where ours
    # stay within 2), so those are compared with the float64 reference above instead.
    x, axis = random_case(seed)
    x = x.astype(np.float16)
    ref = torch.softmax(torch.from_numpy(np.ascontiguousarray(x)), axis).numpy()
    assert np.allclose(softmax(x, axis), ref, **twice(tolerance("prob", x, 1.0, np.float16)))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tau", [1.0, 0.3, 7.0])
def test_jacobian_parity_with_torch_autograd(seed, dtype, tau):
    x, axis = random_case(seed)
    x = x.astype(dtype)
    moved = np.moveaxis(x, axis, -1)  # (..., n): the documented output layout
    batch, n = moved.shape[:-1], moved.shape[-1]
    flat = torch_ref(moved.reshape(-1, n))  # (b, n)
    full = torch.autograd.functional.jacobian(
        lambda t: torch.softmax(t / tau, -1), flat, vectorize=True
    )  # (b, n, b, n): rows of different batch entries do not interact
    ref = torch.einsum("bibj->bij", full).reshape(*batch, n, n).numpy()
    jac = softmax_jacobian(x, axis, temperature=tau)
    assert jac.shape == (*batch, n, n)
    assert np.allclose(jac, ref, **tolerance("jacobian", x, tau, dtype))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("tau", [1.0, 0.05, 20.0])
def test_jacobian_matches_finite_differences(seed, tau):
    x = np.random.default_rng(seed).normal(scale=2.0, size=(3, 5))  # (b, n)
    n = x.shape[-1]
    step = FD_STEP * np.eye(n)  # (n, n): row j nudges x_j
    plus = softmax(x[:, None, :] + step, temperature=tau)  # (b, n, n): [b, j, i] = p_i(x + h e_j)
    minus = softmax(x[:, None, :] - step, temperature=tau)
    fd = np.swapaxes((plus - minus) / (2 * FD_STEP), -1, -2)  # [b, i, j] = dp_i / dx_j
    assert np.allclose(softmax_jacobian(x, temperature=tau), fd, rtol=0, atol=FD_ATOL / tau)


@pytest.mark.parametrize("seed", SEEDS)
def test_jacobian_is_symmetric_with_zero_row_sums(seed):
    x, axis = random_case(seed)
    jac = softmax_jacobian(x, axis, temperature=0.5)
    assert np.array_equal(jac, np.swapaxes(jac, -1, -2))
    assert np.allclose(jac.sum(axis=-1), 0, rtol=0, atol=1e-14)  # n <= 5 terms of size <= 0.5


# ---------------------------------------------------------------------------
# Errors name the argument and what was wrong
# ---------------------------------------------------------------------------

SOFTMAX_LIKE = [softmax, log_softmax, logsumexp, softmax_jacobian]


@pytest.mark.parametrize("fn", SOFTMAX_LIKE)
@pytest.mark.parametrize(
    ("tau", "message"),
    [
        (0, r"temperature must be positive and finite, got 0\.0"),
        (-1.5, r"temperature must be positive and finite, got -1\.5"),
        (float("nan"), r"temperature .* got nan"),
        (float("inf"), r"temperature .* got inf"),
    ],
)
def test_bad_temperature_value(fn, tau, message):
    with pytest.raises(ValueError, match=message):
        fn([1.0, 2.0], temperature=tau)


@pytest.mark.parametrize("fn", SOFTMAX_LIKE)
@pytest.mark.parametrize("tau", ["hot", None, [1.0, 2.0], np.ones(2), True, 1 + 2j])
def test_temperature_not_a_real_scalar(fn, tau):
    with pytest.raises(TypeError, match=r"temperature must be a real scalar, got"):
        fn([1.0, 2.0], temperature=tau)


@pytest.mark.parametrize("fn", SOFTMAX_LIKE)
def test_temperature_accepts_numpy_scalars(fn):
    x = np.array([1.0, 2.0])
    for tau in (np.float32(0.5), np.int64(2), np.array(0.5)):
        assert np.allclose(fn(x, temperature=tau), fn(x, temperature=float(tau)))


@pytest.mark.parametrize("fn", [*SOFTMAX_LIKE, entropy])
@pytest.mark.parametrize("axis", [2, -3])
def test_axis_out_of_range(fn, axis):
    name = "p" if fn is entropy else "x"
    with pytest.raises(AxisError, match=rf"axis {axis} is out of bounds for {name} with ndim 2"):
        fn(np.full((2, 3), 1 / 3), axis=axis)


@pytest.mark.parametrize("fn", [*SOFTMAX_LIKE, entropy])
@pytest.mark.parametrize("axis", [1.0, "0", None, (0,)])
def test_axis_not_an_integer(fn, axis):
    with pytest.raises(TypeError, match=r"axis must be an integer"):
        fn(np.full((2, 3), 1 / 3), axis=axis)


@pytest.mark.parametrize("fn", [*SOFTMAX_LIKE, entropy])
def test_empty_axis(fn):
    name = "p" if fn is entropy else "x"
    with pytest.raises(
        ValueError, match=rf"axis -1 of {name} is empty \({name}\.shape = \(3, 0\)\)"
    ):
        fn(np.zeros((3, 0)))


@pytest.mark.parametrize("fn", [*SOFTMAX_LIKE, entropy])
@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (np.array([1 + 1j, 2]), "complex128"),
        (np.array(["a", "b"]), "<U1"),
        (np.array([1.0, None]), "object"),
        (np.array([True, False]), "bool"),
    ],
)
def test_non_real_input(fn, value, dtype):
    name = "p" if fn is entropy else "x"
    with pytest.raises(
        TypeError, match=rf"{name} must be an array of real numbers, got dtype {dtype}"
    ):
        fn(value)


@pytest.mark.parametrize("fn", SOFTMAX_LIKE)
@pytest.mark.parametrize(
    ("bad", "message"), [(np.nan, r"x contains nan"), (np.inf, r"x contains \+inf")]
)
def test_nan_and_pos_inf_are_rejected(fn, bad, message):
    with pytest.raises(ValueError, match=message):
        fn(np.array([[0.0, 1.0], [bad, 1.0]]))


@pytest.mark.parametrize(
    ("p", "message"),
    [
        ([0.5, 0.7, -0.2], r"p must be non-negative .* minimum is -0\.2"),
        ([1.0, 2.0, 3.0], r"p must sum to 1 along axis -1; a sum is off by 5"),
        ([0.5, np.nan, 0.5], r"p must be finite"),
        ([0.5, np.inf], r"p must be finite"),
    ],
)
def test_entropy_rejects_non_probabilities(p, message):
    with pytest.raises(ValueError, match=message):
        entropy(p)


def test_entropy_tolerates_float16_rounding():
    p = softmax(np.random.default_rng(0).normal(size=(50, 300))).astype(np.float16)
    assert np.all(np.isfinite(entropy(p)))

"""Self-checks of chapter 1 (the softmax function), built on :mod:`helpers.checks.core`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from helpers.checks.core import Case, CheckReport, Finding, _fmt_array, _fmt_num, run_checks
from helpers.checks.multihead import _append, _run, _Spec
from helpers.softmax import entropy, log_softmax, logsumexp, softmax, softmax_jacobian

__all__ = [
    "check_entropy",
    "check_log_softmax",
    "check_log_softmax_backward",
    "check_logsumexp",
    "check_softmax",
    "check_softmax_jacobian",
    "check_softmax_temperature",
]

_STABLE = (
    "subtract max(z) before exponentiating: softmax(z) = softmax(z - max(z)), "
    "and every exp(z_i - max(z)) <= 1 cannot overflow"
)
_F32 = np.float32
_BASIC_SOFTMAX_HINT = "softmax(z)_i = exp(z_i) / sum_j exp(z_j)"
_JACOBIAN_FORMULA = "J = diag(p) - p p^T with p = softmax(z): dp_i/dz_j = p_i (delta_ij - p_j)"

# (name, logits, hint): the inputs shared by the softmax-like checks.
_LOGIT_CASES: tuple[tuple[str, npt.NDArray[np.floating], str], ...] = (
    ("small vector", np.array([1.0, 2.0, 3.0]), ""),
    ("equal logits", np.zeros(4), "equal logits must get equal probabilities 1/n"),
    ("single logit", np.array([5.0]), "one logit gets all the probability"),
    (
        "shifted by 100",
        np.array([101.0, 102.0, 103.0]),
        "adding the same constant to every z_i must not change softmax(z)",
    ),
    (
        "large logits",
        np.array([1000.0, 1001.0, 1002.0]),
        f"exp(1000) overflows to inf, and inf/inf is nan: {_STABLE}",
    ),
    (
        "very negative logits",
        np.array([-1000.0, -1001.0, -1002.0]),
        "every exp(z_i) underflows to 0, and 0/0 is nan: subtract max(z) first, so the "
        "largest term is exp(0) = 1",
    ),
    (
        "a -inf logit (masked entry)",
        np.array([0.0, -np.inf, 0.0]),
        "a -inf logit must get probability exactly 0 (exp(-inf) = 0); subtracting "
        "max(z), which is finite here, keeps it that way",
    ),
    (
        "float32 input",
        np.array([50.0, 100.0, 90.0], dtype=_F32),
        f"in float32 exp already overflows above z = 88.7: {_STABLE}",
    ),
)

# One 2-D case for the functions that may be written for batches (rows = last axis).
_BATCH = np.array([[1.0, 2.0, 3.0], [1000.0, 1000.0, -1000.0]])
_BATCH_HINT = (
    "normalise each row separately: reduce along the last axis with keepdims=True, "
    "e.g. z.max(axis=-1, keepdims=True) and exp_z.sum(axis=-1, keepdims=True)"
)


def _softmax_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    findings = []
    sums = got.sum(axis=-1)
    if not np.allclose(sums, 1, atol=1e-3):
        findings.append(
            Finding(
                f"the output sums to {_fmt_array(sums)}, not 1",
                f"divide exp(z) by its sum: {_BASIC_SOFTMAX_HINT}",
            )
        )
    if (got < 0).any():
        findings.append(Finding("the output has negative entries; probabilities are >= 0"))
    return findings


def check_softmax(
    fn: Callable[[np.ndarray], npt.ArrayLike], *, batched: bool = False
) -> CheckReport:
    """Check the reader's softmax on ordinary and numerically hard logits.

    Parameters
    ----------
    fn : callable
        ``fn(z) -> p``: takes a 1-D array of logits ``z`` of shape ``(n,)`` and
        returns the probabilities, shape ``(n,)``.
    batched : bool, default False
        Also check a 2-D input of shape ``(2, 3)``, softmax along each row (the last
        axis). Only for functions written to handle batches.

    Returns
    -------
    CheckReport
        Truthy iff every case passed; its ``repr`` explains any failure.

    Notes
    -----
    Cases: a small vector, equal logits, a single logit, a shifted vector (shift
    invariance), large logits ``[1000, 1001, 1002]`` (``exp`` overflows), very
    negative logits (every ``exp`` underflows), a ``-inf`` logit, and float32 input.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import softmax
    >>> from helpers.checks import check_softmax
    >>> check_softmax(softmax)
    check_softmax(softmax): All 8 checks passed: small vector, equal logits, single logit,
        shifted by 100, large logits, very negative logits, a -inf logit (masked entry),
        float32 input.

    The textbook formula, without subtracting the maximum first:

    >>> def naive_softmax(z):
    ...     return np.exp(z) / np.exp(z).sum()
    >>> report = check_softmax(naive_softmax)
    >>> bool(report)
    False
    >>> report
    check_softmax(naive_softmax): 5 of 8 checks passed, 3 failed.
    <BLANKLINE>
    FAILED: large logits
        input:    z = [1000, 1001, 1002]
        expected: [0.0900306, 0.244728, 0.665241]
        got:      [nan, nan, nan]
        problem:  the output contains nan; RuntimeWarning: "overflow encountered in exp",
                  "invalid value encountered in divide"
        hint:     exp(1000) overflows to inf, and inf/inf is nan: subtract max(z) before
                  exponentiating: softmax(z) = softmax(z - max(z)), and every exp(z_i -
                  max(z)) <= 1 cannot overflow
    <BLANKLINE>
    FAILED: very negative logits
        input:    z = [-1000, -1001, -1002]
        expected: [0.665241, 0.244728, 0.0900306]
        got:      [nan, nan, nan]
        problem:  the output contains nan; RuntimeWarning: "invalid value encountered in
                  divide"
        hint:     every exp(z_i) underflows to 0, and 0/0 is nan: subtract max(z) first, so
                  the largest term is exp(0) = 1
    <BLANKLINE>
    FAILED: float32 input
        input:    z = [50, 100, 90] (float32)
        expected: [1.92866e-22, 0.999955, 4.53979e-05]
        got:      [0, nan, nan]
        problem:  the output contains nan; RuntimeWarning: "overflow encountered in exp",
                  "invalid value encountered in divide"
        hint:     in float32 exp already overflows above z = 88.7: subtract max(z) before
                  exponentiating: softmax(z) = softmax(z - max(z)), and every exp(z_i -
                  max(z)) <= 1 cannot overflow
    <BLANKLINE>
    Passed: small vector, equal logits, single logit, shifted by 100, a -inf logit (masked
        entry).
    """
    cases = [
        Case(name, {"z": z}, softmax(z.astype(np.float64)), hint or _BASIC_SOFTMAX_HINT)
        for name, z, hint in _LOGIT_CASES
    ]
    if batched:
        cases.append(Case("2-D batch (rows)", {"z": _BATCH}, softmax(_BATCH), _BATCH_HINT))
    return run_checks(fn, cases, check_name="check_softmax", diagnose=_softmax_diagnose)


_LOG_SOFTMAX_DIRECT = (
    "compute log_softmax(z) = (z - m) - log(sum(exp(z - m))) with m = max(z), "
    "instead of taking the log of softmax(z)"
)


def _log_softmax_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    findings = []
    if (got > 1e-9).any():
        findings.append(Finding("some outputs are > 0, but log-probabilities are <= 0"))
    sums = np.exp(got).sum(axis=-1)
    if not np.allclose(sums, 1, atol=1e-3):
        findings.append(
            Finding(
                f"exp(output) sums to {_fmt_array(sums)}, not 1",
                f"subtract the log of the normaliser: {_LOG_SOFTMAX_DIRECT}",
            )
        )
    return findings


def check_log_softmax(
    fn: Callable[[np.ndarray], npt.ArrayLike], *, batched: bool = False
) -> CheckReport:
    """Check the reader's log-softmax, including where ``log(softmax(z))`` fails.

    Parameters
    ----------
    fn : callable
        ``fn(z) -> log p``: takes a 1-D array of logits, shape ``(n,)``, and returns
        ``log softmax(z)``, shape ``(n,)``.
    batched : bool, default False
        Also check a 2-D input of shape ``(2, 3)``, along each row.

    Returns
    -------
    CheckReport
        Truthy iff every case passed; its ``repr`` explains any failure.

    Notes
    -----
    Besides the cases of :func:`check_softmax` (a ``-inf`` logit must give
    ``-inf``), it checks widely spread logits ``[0, -1000]``, whose answer
    ``[0, -1000]`` is finite although ``softmax`` rounds ``exp(-1000)`` to 0: a
    stable softmax followed by ``np.log`` gives ``-inf`` there.

    Examples
    --------
    >>> from helpers import log_softmax
    >>> from helpers.checks import check_log_softmax
    >>> check_log_softmax(log_softmax)
    check_log_softmax(log_softmax): All 9 checks passed: small vector, equal logits,
        single logit, shifted by 100, large logits, very negative logits, a -inf logit
        (masked entry), float32 input, widely spread logits.
    """
    cases = [
        Case(
            name,
            {"z": z},
            log_softmax(z.astype(np.float64)),
            hint or "log_softmax(z)_i = z_i - log(sum_j exp(z_j))",
        )
        for name, z, hint in _LOGIT_CASES
    ]
    spread = np.array([0.0, -1000.0])
    cases.append(
        Case(
            "widely spread logits",
            {"z": spread},
            log_softmax(spread),
            "softmax rounds exp(-1000) to 0 and log(0) = -inf, although the exact answer "
            f"is -1000: {_LOG_SOFTMAX_DIRECT}",
        )
    )
    if batched:
        cases.append(Case("2-D batch (rows)", {"z": _BATCH}, log_softmax(_BATCH), _BATCH_HINT))
    return run_checks(fn, cases, check_name="check_log_softmax", diagnose=_log_softmax_diagnose)


_LOG_SOFTMAX_VJP = (
    "d log p_i / d z_j = delta_ij - p_j, so dL/dz_j = g_j - p_j * sum_i g_i "
    "(sums over the last axis), with p = softmax(z)"
)


def _log_softmax_backward_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    z, g = (np.asarray(case.inputs[k], dtype=np.float64) for k in ("z", "g"))
    p = softmax(z)
    known = (
        (
            g - p,
            "it equals g - softmax(z): the factor sum_i g_i is missing (the two agree "
            "only when g sums to 1)",
        ),
        (
            g - (p * g).sum(axis=-1, keepdims=True),
            "it equals g - (p . g): the Jacobian I - 1 p^T is applied untransposed; "
            "the gradient needs its transpose",
        ),
        (
            p * (g - (p * g).sum(axis=-1, keepdims=True)),
            "it equals p * (g - p . g), the backward pass of softmax, not of log-softmax",
        ),
        (
            g - p * g.sum(),
            "the sum of g was taken over the whole array, not over each row",
        ),
    )
    for candidate, problem in known:
        if got.shape == candidate.shape and np.allclose(got, candidate, rtol=1e-4, atol=1e-6):
            return [Finding(problem, _LOG_SOFTMAX_VJP)]
    if np.isnan(got).any():
        return [Finding("the output contains nan", "compute p with a stable softmax")]
    return []


def check_log_softmax_backward(
    fn: Callable[[np.ndarray, np.ndarray], npt.ArrayLike],
) -> CheckReport:
    """Check the reader's backward pass of log-softmax over the last axis.

    Parameters
    ----------
    fn : callable
        ``fn(z, g) -> dz``: takes logits ``z`` of shape ``(..., n)`` and the gradient
        ``g = dL/d log_softmax(z)`` of the same shape, and returns ``dL/dz``, shape
        ``(..., n)``.

    Returns
    -------
    CheckReport
        Truthy iff every case passed; its ``repr`` names the typical mistakes: the sum
        of ``g`` left out, the Jacobian untransposed, the softmax's backward pass used
        instead, a sum over the whole batch.

    Notes
    -----
    Cases: a small vector with a ``g`` that sums neither to 0 nor to 1, a negated
    one-hot ``g`` (the cross-entropy, whose gradient is ``p - onehot``), logits of
    1000 that overflow a naive softmax, a ``(2, 3)`` batch, and float32 input.

    Examples
    --------
    Leaving out the factor ``sum(g)`` is caught (it is right only where ``g`` sums to 1):

    >>> import numpy as np
    >>> from helpers import softmax
    >>> from helpers.checks import check_log_softmax_backward
    >>> def minus_p(z, g):
    ...     return g - softmax(z)
    >>> report = check_log_softmax_backward(minus_p)
    >>> bool(report), report.failures[0].name
    (False, 'small vector')
    """
    z1 = np.array([1.0, 2.0, 0.5])
    g1 = np.array([0.5, -1.0, 2.0])
    onehot = np.array([0.0, -1.0, 0.0])
    big = np.array([1000.0, 1001.0, 1002.0])
    g_big = np.array([1.0, 0.0, 3.0])
    batch_z = np.array([[1.0, 2.0, 3.0], [0.0, -1000.0, 5.0]])
    batch_g = np.array([[1.0, 1.0, -3.0], [2.0, 0.5, 0.25]])
    z32, g32 = np.array([50.0, 100.0, 90.0], dtype=_F32), np.array([1.0, 2.0, 3.0], dtype=_F32)

    def expected(z: np.ndarray, g: np.ndarray) -> np.ndarray:
        z, g = z.astype(np.float64), g.astype(np.float64)
        return g - softmax(z) * g.sum(axis=-1, keepdims=True)

    hint = _LOG_SOFTMAX_VJP
    cases = [
        Case("small vector", {"z": z1, "g": g1}, expected(z1, g1), hint),
        Case("g = -one-hot (cross-entropy)", {"z": z1, "g": onehot}, expected(z1, onehot), hint),
        Case(
            "large logits",
            {"z": big, "g": g_big},
            expected(big, g_big),
            f"exp(1000) overflows: compute p with the max-shifted softmax; {hint}",
        ),
        Case("2-D batch (rows)", {"z": batch_z, "g": batch_g}, expected(batch_z, batch_g), hint),
        Case("float32 input", {"z": z32, "g": g32}, expected(z32, g32), hint),
    ]
    return run_checks(
        fn, cases, check_name="check_log_softmax_backward", diagnose=_log_softmax_backward_diagnose
    )


def _logsumexp_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    z_max = float(np.max(case.inputs["z"]))
    if got < z_max - 1e-9:
        return [
            Finding(f"the result is below max(z) = {_fmt_num(z_max)}, but logsumexp(z) >= max(z)")
        ]
    return []


def check_logsumexp(fn: Callable[[np.ndarray], npt.ArrayLike]) -> CheckReport:
    """Check the reader's log-sum-exp ``log(sum(exp(z)))`` on hard inputs.

    Parameters
    ----------
    fn : callable
        ``fn(z) -> float``: takes a 1-D array of logits, shape ``(n,)``, and returns
        a single number (shape ``()``).

    Returns
    -------
    CheckReport
        Truthy iff every case passed; its ``repr`` explains any failure.

    Notes
    -----
    Uses the same inputs as :func:`check_softmax`: ``[1000, 1001, 1002]`` overflows
    the naive formula to ``inf`` and ``[-1000, -1001, -1002]`` underflows it to
    ``-inf``; the stable form ``m + log(sum(exp(z - m)))``, ``m = max(z)``, is exact.

    Examples
    --------
    >>> from helpers import logsumexp
    >>> from helpers.checks import check_logsumexp
    >>> check_logsumexp(logsumexp)
    check_logsumexp(logsumexp): All 8 checks passed: small vector, equal logits, single
        logit, shifted by 100, large logits, very negative logits, a -inf logit (masked
        entry), float32 input.
    """
    stable = "use logsumexp(z) = m + log(sum(exp(z - m))) with m = max(z)"
    hints = {
        "large logits": f"exp(1000) overflows to inf: {stable}",
        "very negative logits": f"every exp(z_i) underflows to 0 and log(0) = -inf: {stable}",
        "float32 input": f"in float32 exp already overflows above z = 88.7: {stable}",
    }
    cases = [
        Case(
            name,
            {"z": z},
            logsumexp(z.astype(np.float64)),
            hints.get(name, hint or "logsumexp(z) = log(sum_j exp(z_j))"),
        )
        for name, z, hint in _LOGIT_CASES
    ]
    return run_checks(fn, cases, check_name="check_logsumexp", diagnose=_logsumexp_diagnose)


def _jacobian_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    p = softmax(case.inputs["z"]).astype(np.float64)
    outer, diag = np.outer(p, p), np.diag(p)
    known = (
        (-outer, "it equals -p p^T: the diag(p) term is missing (dp_i/dz_i = p_i - p_i^2)"),
        (outer - diag, "the sign is flipped: it equals p p^T - diag(p)"),
        (diag + outer, "it equals diag(p) + p p^T: the p p^T term has the wrong sign"),
        (diag, "it equals diag(p): the -p p^T term is missing"),
        (outer, "it equals p p^T"),
    )
    for candidate, problem in known:
        if np.allclose(got, candidate, rtol=1e-5, atol=1e-8):
            return [Finding(problem, _JACOBIAN_FORMULA)]
    findings = []
    rows = got.sum(axis=-1)
    if not np.allclose(rows, 0, atol=1e-6):
        findings.append(
            Finding(
                "rows should sum to 0 (the probabilities always sum to 1, so their "
                f"derivatives do too); yours sum to {_fmt_array(_drop_noise(rows))}"
            )
        )
    if not np.allclose(got, got.T, atol=1e-9):
        findings.append(Finding("J should be symmetric: dp_i/dz_j = dp_j/dz_i = -p_i p_j"))
    return findings


def check_softmax_jacobian(fn: Callable[[np.ndarray], npt.ArrayLike]) -> CheckReport:
    """Check the reader's Jacobian of softmax, ``J = diag(p) - p p^T``.

    Parameters
    ----------
    fn : callable
        ``fn(z) -> J``: takes a 1-D array of logits, shape ``(n,)``, and returns the
        ``(n, n)`` matrix ``J[i, j] = dp_i / dz_j`` with ``p = softmax(z)``.

    Returns
    -------
    CheckReport
        Truthy iff every case passed; its ``repr`` explains any failure, naming the
        usual slips (missing diagonal term, flipped sign) and checking that the rows
        sum to 0 and that ``J`` is symmetric.

    Examples
    --------
    >>> from helpers import softmax_jacobian
    >>> from helpers.checks import check_softmax_jacobian
    >>> check_softmax_jacobian(softmax_jacobian)
    check_softmax_jacobian(softmax_jacobian): All 6 checks passed: small vector, two equal
        logits, single logit, large logits, a -inf logit (masked entry), float32 input.
    """
    inputs = (
        ("small vector", np.array([1.0, 2.0, 3.0]), _JACOBIAN_FORMULA),
        ("two equal logits", np.zeros(2), _JACOBIAN_FORMULA),
        ("single logit", np.array([3.0]), "one logit: p = [1] whatever z is, so J = [[0]]"),
        ("large logits", np.array([1000.0, 1001.0, 1002.0]), f"compute p stably: {_STABLE}"),
        (
            "a -inf logit (masked entry)",
            np.array([0.0, -np.inf, 0.0]),
            "a masked entry has p_j = 0, so its row and column of J are 0",
        ),
        (
            "float32 input",
            np.array([50.0, 100.0, 90.0], dtype=_F32),
            f"compute p stably: {_STABLE}",
        ),
    )
    cases = [
        Case(name, {"z": z}, softmax_jacobian(z.astype(np.float64)), hint)
        for name, z, hint in inputs
    ]
    return run_checks(fn, cases, check_name="check_softmax_jacobian", diagnose=_jacobian_diagnose)


_ZERO_LOG_ZERO = (
    "0 * log(0) must count as 0, but np.log(0) = -inf and 0 * -inf = nan: sum only "
    "over the non-zero entries, e.g. q = p[p > 0]; -np.sum(q * np.log(q))"
)


def _drop_noise(a: np.ndarray) -> np.ndarray:
    """Show rounding noise (|a| < 1e-12) as 0."""
    return np.where(np.abs(a) < 1e-12, 0.0, a)


def _entropy_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    h = float(case.expected)
    nats = "use the natural log, np.log: the book measures entropy in nats"
    known = (
        (-h, Finding("the sign is flipped; H(p) = -sum_i p_i log p_i is >= 0")),
        (h / np.log(2), Finding("this is in bits (log base 2)", nats)),
        (h / np.log(10), Finding("this uses log base 10", nats)),
    )
    if h == 0:
        return []
    return [finding for value, finding in known if np.isclose(float(got), value, rtol=1e-5)][:1]


def check_entropy(fn: Callable[[np.ndarray], npt.ArrayLike]) -> CheckReport:
    """Check the reader's Shannon entropy (in nats) of a probability vector.

    Parameters
    ----------
    fn : callable
        ``fn(p) -> float``: takes a 1-D probability vector, shape ``(n,)``, and
        returns ``H(p) = -sum_i p_i log p_i`` with the natural log, as a single
        number (shape ``()``).

    Returns
    -------
    CheckReport
        Truthy iff every case passed; its ``repr`` explains any failure.

    Notes
    -----
    Cases: uniform (``log n``), a general vector, one-hot (0), a vector with a zero
    entry (``0 log 0 = 0``: the naive ``p * np.log(p)`` gives ``nan``), a single
    entry, and float32 input.

    Examples
    --------
    >>> from helpers import entropy
    >>> from helpers.checks import check_entropy
    >>> check_entropy(entropy)
    check_entropy(entropy): All 6 checks passed: uniform over 4, general vector, one-hot,
        with a zero entry, single entry, float32 input.
    """
    formula = "H(p) = -sum_i p_i log(p_i), with the natural log (np.log)"
    inputs = (
        ("uniform over 4", np.full(4, 0.25), f"{formula}; for uniform p it is log(n)"),
        ("general vector", np.array([0.1, 0.2, 0.7]), formula),
        (
            "one-hot",
            np.array([0.0, 1.0, 0.0]),
            f"a certain outcome has entropy 0; {_ZERO_LOG_ZERO}",
        ),
        ("with a zero entry", np.array([0.5, 0.5, 0.0]), _ZERO_LOG_ZERO),
        ("single entry", np.array([1.0]), "a single outcome has entropy log(1) = 0"),
        ("float32 input", np.full(4, 0.25, dtype=_F32), formula),
    )
    cases = [Case(name, {"p": p}, entropy(p.astype(np.float64)), hint) for name, p, hint in inputs]
    return run_checks(fn, cases, check_name="check_entropy", diagnose=_entropy_diagnose)


# ---------------------------------------------------------------------------
# check_softmax_temperature
# ---------------------------------------------------------------------------

_TEMPERATURE_FORMULA = (
    "over the last axis, p = softmax((z - m) / tau) with m the row's largest logit; at "
    "tau = 0 the limit: 1/k on each of the k entries equal to m, 0 elsewhere; a row whose "
    "entries are all -inf gets all zeros"
)
_TAU_ZERO_HINT = (
    "(z - m) / 0 is 0/0 = nan at the maximum: handle tau = 0 as the limit of "
    "softmax(z / tau) as tau -> 0, which puts 1/k on each of the k entries equal to the "
    "row's maximum"
)
_ALL_MASKED_HINT = (
    "a row of -inf has maximum m = -inf, and -inf - (-inf) is nan: shift such a row by 0 "
    "instead (every exp is then 0) and divide by 1 instead of its sum, 0"
)
_F32_TINY_TAU_HINT = (
    "tau = 1e-300 is below the smallest float32 (about 1e-45): in float32 arithmetic it "
    "rounds to 0, and (z - m) / tau is 0/0 = nan at the maximum; divide in float64, e.g. "
    "z = np.asarray(z, dtype=np.float64)"
)
_TINY_TAU_HINT = (
    "exp(z / tau) overflows when tau is small: subtract the row's maximum before dividing "
    "by tau, so that every exponent is <= 0"
)


def _softmax_at(z: np.ndarray, tau: float) -> np.ndarray:
    """softmax(z / tau) over the last axis for tau >= 0, with the limit at 0 and 0-rows."""
    z = np.asarray(z, dtype=np.float64)
    m = z.max(axis=-1, keepdims=True)
    some = np.isfinite(m)  # (..., 1): the row has an entry that is not -inf
    if tau == 0:
        e = ((z == m) & some).astype(np.float64)
    else:
        with np.errstate(over="ignore"):
            e = np.exp((z - np.where(some, m, 0.0)) / tau)
    total = e.sum(axis=-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


def _temperature_slips(z: np.ndarray, tau: float) -> list[tuple[np.ndarray, Finding]]:
    z = np.asarray(z, dtype=np.float64)
    slips = []
    if tau > 0:
        slips.append(
            (
                _softmax_at(z * tau, 1.0),
                Finding("this is softmax(z * tau): the logits are multiplied by tau, not divided"),
            )
        )
    slips.append(
        (
            _softmax_at(z, 1.0),
            Finding("this is softmax(z) at tau = 1: the temperature is ignored"),
        )
    )
    if tau == 0:
        first = np.zeros_like(z)
        rows = np.isfinite(z.max(axis=-1))
        np.put_along_axis(first, z.argmax(axis=-1)[..., None], 1.0, axis=-1)
        first = np.where(rows[..., None], first, 0.0)
        slips.append(
            (
                first,
                Finding(
                    "all the weight goes to the first of the tied maxima (np.argmax): as "
                    "tau -> 0, tied maxima keep equal probabilities, 1/k each",
                    "put 1/k on every entry equal to the row's maximum (z == z.max(...))",
                ),
            )
        )
    if z.ndim > 1:
        with np.errstate(invalid="ignore"):
            m0 = z.max(axis=0, keepdims=True)
            e0 = np.exp((z - m0) / tau) if tau > 0 else (z == m0).astype(float)
            wrong_axis = e0 / e0.sum(axis=0, keepdims=True)
        slips.append(
            (
                wrong_axis,
                Finding(
                    "the softmax is taken over the first axis (columns), not the last",
                    "use axis=-1 with keepdims=True in max and sum",
                ),
            )
        )
    masked = ~np.isfinite(z.max(axis=-1))
    if masked.any():
        uniform = _softmax_at(z, tau).copy()
        uniform[masked] = 1.0 / z.shape[-1]
        slips.append(
            (
                uniform,
                Finding(
                    "a row with every entry -inf gets uniform weights; here it gets all "
                    "zeros, there being nothing to weigh (uniform weights are what a finite "
                    "fill such as -1e9 gives)",
                    _ALL_MASKED_HINT,
                ),
            )
        )
    return slips


def _temperature_diagnose(tau: float) -> Callable[[Case, np.ndarray], list[Finding]]:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        z = np.asarray(case.inputs["z"])
        for candidate, finding in _temperature_slips(z, tau):
            if candidate.shape == got.shape and np.allclose(got, candidate, rtol=1e-6, atol=1e-9):
                return [finding]
        if not np.allclose(got.sum(axis=-1)[np.isfinite(z.max(axis=-1))], 1.0, atol=1e-6):
            return [Finding("a row with a finite logit does not sum to 1")]
        return []

    return diagnose


def check_softmax_temperature(fn: Callable[[np.ndarray, float], npt.ArrayLike]) -> CheckReport:
    """Check the reader's softmax with a temperature, its limit at 0 and masked rows.

    Parameters
    ----------
    fn : callable
        ``fn(z, tau) -> p``: ``z`` of shape ``(..., n)`` (entries may be ``-inf``),
        ``tau >= 0`` a Python float; returns ``softmax(z / tau)`` over the last axis,
        shape ``(..., n)``. At ``tau = 0`` it returns the limit as ``tau -> 0``: ``1/k``
        on each of the ``k`` entries equal to the row's maximum. A row whose entries are
        all ``-inf`` gives a row of zeros.

    Returns
    -------
    CheckReport
        Truthy iff every case matches: temperatures from ``1e-300`` to ``1e6``, logits
        near ``1e4``, tied maxima, ``tau = 0``, fully masked rows, a batch and float32
        (``tau = 1e-300`` included, which float32 cannot hold).
        The report recognises logits multiplied by ``tau``, the temperature ignored,
        the first maximum taking all the weight at ``tau = 0``, the softmax over the
        wrong axis, and uniform weights for a fully masked row.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_softmax_temperature
    >>> def shifted(z, tau):  # stable for tau > 0, but not at tau = 0 nor on masked rows
    ...     e = np.exp((z - z.max(axis=-1, keepdims=True)) / tau)
    ...     return e / e.sum(axis=-1, keepdims=True)
    >>> report = check_softmax_temperature(shifted)
    >>> [r.name for r in report.failures]
    ['tau = 0 with one maximum', 'tau = 0 with tied maxima', 'a fully masked row (tau = 1)',
     'a fully masked row (tau = 0)', 'float32 logits (tau = 1e-300)']
    """
    inf = np.inf
    cases: list[tuple[str, np.ndarray, float, str]] = [
        ("small vector (tau = 1)", np.array([1.0, 2.0, 3.0]), 1.0, _TEMPERATURE_FORMULA),
        ("a batch of 2 rows (tau = 0.5)", np.array([[1.0, 2.0, 3.0], [0.0, 0.0, -1.0]]), 0.5, ""),
        ("logits near 1e4 (tau = 2)", np.array([1e4, 1e4 - 1.0, -1e4]), 2.0, _TINY_TAU_HINT),
        ("tiny temperature (tau = 1e-3)", np.array([0.0, 0.5, 1.0]), 1e-3, _TINY_TAU_HINT),
        ("tied maxima (tau = 1e-300)", np.array([2.0, 2.0, 1.0]), 1e-300, _TINY_TAU_HINT),
        ("large temperature (tau = 1e6)", np.array([1.0, 5.0, -3.0, 0.0]), 1e6, ""),
        ("tau = 0 with one maximum", np.array([1.0, 3.0, 2.0]), 0.0, _TAU_ZERO_HINT),
        (
            "tau = 0 with tied maxima",
            np.array([[3.0, 1.0, 3.0, 3.0], [0.0, -inf, 5.0, 1.0]]),
            0.0,
            _TAU_ZERO_HINT,
        ),
        (
            "a fully masked row (tau = 1)",
            np.array([[1.0, -inf, 2.0], [-inf, -inf, -inf]]),
            1.0,
            _ALL_MASKED_HINT,
        ),
        (
            "a fully masked row (tau = 0)",
            np.array([[-inf, -inf, -inf], [4.0, -inf, 4.0]]),
            0.0,
            _ALL_MASKED_HINT,
        ),
        ("float32 logits (tau = 0.01)", np.array([1.0, 2.0, 3.0], dtype=np.float32), 0.01, ""),
        (
            "float32 logits (tau = 1e-300)",
            np.array([1.0, 3.0, 2.0], dtype=np.float32),
            1e-300,
            _F32_TINY_TAU_HINT,
        ),
    ]
    specs = [
        _Spec(
            Case(name, {"z": z}, _softmax_at(z, tau), hint or _TEMPERATURE_FORMULA),
            _append(tau),
            f"z = {_fmt_array(z, dtype=True)}, tau = {tau:g}",
            _temperature_diagnose(tau),
        )
        for name, z, tau, hint in cases
    ]
    return _run(fn, "check_softmax_temperature", specs)

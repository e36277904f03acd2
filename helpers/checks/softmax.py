"""Self-checks of chapter 1 (the softmax function), built on :mod:`helpers.checks.core`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from helpers.checks.core import (
    Case,
    CheckReport,
    Finding,
    _fmt_array,
    _fmt_num,
    run_checks,
    section,
)
from helpers.checks.multihead import _append, _run, _Spec
from helpers.i18n import join, msg
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

_DEFINITION = section(1, "Definition")
_PROPERTIES = section(1, "Four properties")
_OVERFLOW = section(1, "Computing softmax without overflow")
_LOG_SECTION = section(1, "Log-sum-exp and log-softmax")
_LIMIT = section(1, "What softmax approximates")
_TEMPERATURE = section(1, "Temperature")
_JACOBIAN = section(1, "The Jacobian")
_STABLE = (
    "the exact answer is finite, and adding the same constant to every logit does not change it"
)
_F32 = np.float32
_BASIC_SOFTMAX_HINT = msg(
    "the probabilities are positive and sum to 1 ({definition})", definition=_DEFINITION
)

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
        msg("exp(1000) overflows to inf, and inf/inf is nan: {stable}", stable=_STABLE),
    ),
    (
        "very negative logits",
        np.array([-1000.0, -1001.0, -1002.0]),
        msg("every exp(z_i) underflows to 0, and 0/0 is nan: {stable}", stable=_STABLE),
    ),
    (
        "a -inf logit (masked entry)",
        np.array([0.0, -np.inf, 0.0]),
        "a -inf logit must get probability exactly 0, and the others share all of it",
    ),
    (
        "float32 input",
        np.array([50.0, 100.0, 90.0], dtype=_F32),
        msg("in float32 exp already overflows above z = 88.7: {stable}", stable=_STABLE),
    ),
)

# One 2-D case for the functions that may be written for batches (rows = last axis).
_BATCH = np.array([[1.0, 2.0, 3.0], [1000.0, 1000.0, -1000.0]])
_BATCH_HINT = "each row (along the last axis) is a separate vector of logits"


def _softmax_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    findings = []
    sums = got.sum(axis=-1)
    if not np.allclose(sums, 1, atol=1e-3):
        findings.append(
            Finding(
                msg("the output sums to {sums}, not 1", sums=_fmt_array(sums)), _BASIC_SOFTMAX_HINT
            )
        )
    if (got < 0).any():
        findings.append(Finding("the output has negative entries; probabilities are >= 0"))
    return findings


def check_softmax(
    fn: Callable[[np.ndarray], npt.ArrayLike], *, batched: bool = False, hint: bool = False
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
    hint : bool, default False
        Add a fuller hint to a failing report.

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
    The textbook formula, exponentiating the logits as they are:

    >>> import numpy as np
    >>> from helpers.checks import check_softmax
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
        hint:     exp(1000) overflows to inf, and inf/inf is nan: the exact answer is
                  finite, and adding the same constant to every logit does not change it
    <BLANKLINE>
    FAILED: very negative logits
        input:    z = [-1000, -1001, -1002]
        expected: [0.665241, 0.244728, 0.0900306]
        got:      [nan, nan, nan]
        problem:  the output contains nan; RuntimeWarning: "invalid value encountered in
                  divide"
        hint:     every exp(z_i) underflows to 0, and 0/0 is nan: the exact answer is
                  finite, and adding the same constant to every logit does not change it
    <BLANKLINE>
    FAILED: float32 input
        input:    z = [50, 100, 90] (float32)
        expected: [1.92866e-22, 0.999955, 4.53979e-05]
        got:      [0, nan, nan]
        problem:  the output contains nan; RuntimeWarning: "overflow encountered in exp",
                  "invalid value encountered in divide"
        hint:     in float32 exp already overflows above z = 88.7: the exact answer is
                  finite, and adding the same constant to every logit does not change it
    <BLANKLINE>
    Passed: small vector, equal logits, single logit, shifted by 100, a -inf logit (masked
        entry).
    <BLANKLINE>
    See chapter 1, "Computing softmax without overflow".
    <BLANKLINE>
    A fuller hint: check_softmax(naive_softmax, hint=True).
    """
    cases = [
        Case(name, {"z": z}, softmax(z.astype(np.float64)), text or _BASIC_SOFTMAX_HINT)
        for name, z, text in _LOGIT_CASES
    ]
    if batched:
        cases.append(Case("2-D batch (rows)", {"z": _BATCH}, softmax(_BATCH), _BATCH_HINT))
    return run_checks(
        fn,
        cases,
        check_name="check_softmax",
        diagnose=_softmax_diagnose,
        see=_OVERFLOW,
        more="the probabilities are unchanged when the same constant is added to every "
        "logit: which constant makes every exponential at most 1, so that nothing "
        "overflows, and at least one of them equal to 1, so that the sum cannot underflow "
        "to 0?",
        hint=hint,
    )


_LOG_SOFTMAX_DIRECT = (
    "the exact answer is finite although softmax rounds the smallest probability to 0: a "
    "log-probability need not be computed as the log of a probability"
)


def _log_softmax_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    findings = []
    if (got > 1e-9).any():
        findings.append(Finding("some outputs are > 0, but log-probabilities are <= 0"))
    sums = np.exp(got).sum(axis=-1)
    if not np.allclose(sums, 1, atol=1e-3):
        findings.append(
            Finding(
                msg("exp(output) sums to {sums}, not 1", sums=_fmt_array(sums)),
                "the log-probabilities of a vector are those of a probability vector",
            )
        )
    return findings


def check_log_softmax(
    fn: Callable[[np.ndarray], npt.ArrayLike], *, batched: bool = False, hint: bool = False
) -> CheckReport:
    """Check the reader's log-softmax, including where ``log(softmax(z))`` fails.

    Parameters
    ----------
    fn : callable
        ``fn(z) -> log p``: takes a 1-D array of logits, shape ``(n,)``, and returns
        ``log softmax(z)``, shape ``(n,)``.
    batched : bool, default False
        Also check a 2-D input of shape ``(2, 3)``, along each row.
    hint : bool, default False
        Add a fuller hint to a failing report.

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
    >>> import numpy as np
    >>> from helpers.checks import check_log_softmax
    >>> def logits_back(z):  # the logits themselves: not normalised
    ...     return z
    >>> check_log_softmax(logits_back).message.split(";")[0]
    'single logit: some outputs are > 0, but log-probabilities are <= 0'
    """
    cases = [
        Case(
            name,
            {"z": z},
            log_softmax(z.astype(np.float64)),
            text
            or msg(
                "the log-probabilities: their exponentials sum to 1 ({log_section})",
                log_section=_LOG_SECTION,
            ),
        )
        for name, z, text in _LOGIT_CASES
    ]
    spread = np.array([0.0, -1000.0])
    cases.append(
        Case(
            "widely spread logits",
            {"z": spread},
            log_softmax(spread),
            msg(
                "softmax rounds exp(-1000) to 0 and log(0) = -inf, although the exact "
                "answer is -1000: {log_softmax_direct}",
                log_softmax_direct=_LOG_SOFTMAX_DIRECT,
            ),
        )
    )
    if batched:
        cases.append(Case("2-D batch (rows)", {"z": _BATCH}, log_softmax(_BATCH), _BATCH_HINT))
    return run_checks(
        fn,
        cases,
        check_name="check_log_softmax",
        diagnose=_log_softmax_diagnose,
        see=_LOG_SECTION,
        more="take the log of the softmax's definition on paper first: it splits into the "
        "logit minus the log of a sum of exponentials, and that sum can be computed without "
        "overflow as chapter 1 computes log-sum-exp",
        hint=hint,
    )


_LOG_SOFTMAX_VJP = (
    "derive d log p_i / d z_j from the log-softmax's definition, then sum the chain rule over i"
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
            "it equals g - (p . g): the Jacobian is applied untransposed; the gradient "
            "needs its transpose",
        ),
        (
            p * (g - (p * g).sum(axis=-1, keepdims=True)),
            "it equals p * (g - p . g), the backward pass of softmax, not of log-softmax",
        ),
        (
            g - p * g.sum(),
            "the sum of g was taken over the whole array, not over each row",
        ),
        (g, "it equals g: the gradient went through the log-softmax unchanged"),
    )
    for candidate, problem in known:
        if got.shape == candidate.shape and np.allclose(got, candidate, rtol=1e-4, atol=1e-6):
            return [Finding(problem, _LOG_SOFTMAX_VJP)]
    if np.isnan(got).any():
        return [Finding("the output contains nan", _STABLE)]
    return []


def check_log_softmax_backward(
    fn: Callable[[np.ndarray, np.ndarray], npt.ArrayLike], *, hint: bool = False
) -> CheckReport:
    """Check the reader's backward pass of log-softmax over the last axis.

    Parameters
    ----------
    fn : callable
        ``fn(z, g) -> dz``: takes logits ``z`` of shape ``(..., n)`` and the gradient
        ``g = dL/d log_softmax(z)`` of the same shape, and returns ``dL/dz``, shape
        ``(..., n)``.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case passed; its ``repr`` names the typical mistakes: the sum
        of ``g`` left out, the Jacobian untransposed, the softmax's backward pass used
        instead, a sum over the whole batch, ``g`` returned unchanged.

    Notes
    -----
    Cases: a small vector with a ``g`` that sums neither to 0 nor to 1, a negated
    one-hot ``g`` (the cross-entropy, whose gradient is ``p - onehot``), logits of
    1000 that overflow a naive softmax, a ``(2, 3)`` batch, and float32 input.

    Examples
    --------
    >>> from helpers.checks import check_log_softmax_backward
    >>> def unchanged(z, g):  # the gradient passed through as it came
    ...     return g
    >>> check_log_softmax_backward(unchanged).failures[0].problem
    'it equals g: the gradient went through the log-softmax unchanged'
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

    rows = (
        "each row of dL/dz sums to 0: adding the same constant to every logit changes no "
        "log-probability"
    )
    cases = [
        Case(
            "small vector",
            {"z": z1, "g": g1},
            expected(z1, g1),
            msg("g sums to 1.5; {rows}", rows=rows),
        ),
        Case(
            "g = -one-hot (cross-entropy)",
            {"z": z1, "g": onehot},
            expected(z1, onehot),
            "the gradient of the cross-entropy with respect to the logits: part 1 of the "
            "exercise asks for it",
        ),
        Case(
            "large logits",
            {"z": big, "g": g_big},
            expected(big, g_big),
            msg("logits of 1000: {stable}", stable=_STABLE),
        ),
        Case(
            "2-D batch (rows)",
            {"z": batch_z, "g": batch_g},
            expected(batch_z, batch_g),
            join("; ", [_BATCH_HINT, rows]),
        ),
        Case("float32 input", {"z": z32, "g": g32}, expected(z32, g32), rows),
    ]
    return run_checks(
        fn,
        cases,
        check_name="check_log_softmax_backward",
        diagnose=_log_softmax_backward_diagnose,
        see=_LOG_SECTION,
        more="log p_i is z_i minus the log-sum-exp of z: differentiate it with respect to "
        "z_j (the derivative of log-sum-exp is a familiar vector), then apply the chain "
        "rule, a sum over i weighted by g_i",
        hint=hint,
    )


def _logsumexp_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    z_max = float(np.max(case.inputs["z"]))
    if got < z_max - 1e-9:
        return [
            Finding(
                msg(
                    "the result is below max(z) = {z_max}, but logsumexp(z) >= max(z)",
                    z_max=_fmt_num(z_max),
                )
            )
        ]
    return []


def check_logsumexp(
    fn: Callable[[np.ndarray], npt.ArrayLike], *, hint: bool = False
) -> CheckReport:
    """Check the reader's log-sum-exp ``log(sum(exp(z)))`` on hard inputs.

    Parameters
    ----------
    fn : callable
        ``fn(z) -> float``: takes a 1-D array of logits, shape ``(n,)``, and returns
        a single number (shape ``()``).
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case passed; its ``repr`` explains any failure.

    Notes
    -----
    Uses the same inputs as :func:`check_softmax`: ``[1000, 1001, 1002]`` overflows
    the naive formula to ``inf`` and ``[-1000, -1001, -1002]`` underflows it to
    ``-inf``, though the exact values are finite.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_logsumexp
    >>> def largest(z):  # the largest logit: a lower bound only
    ...     return np.max(z)
    >>> check_logsumexp(largest).failures[0].name
    'small vector'
    """
    bounds = "the exact value lies between max(z) and max(z) + log(n), finite here"
    texts = {
        "large logits": msg("exp(1000) overflows to inf: {bounds}", bounds=bounds),
        "very negative logits": msg(
            "every exp(z_i) underflows to 0 and log(0) = -inf: {bounds}", bounds=bounds
        ),
        "float32 input": msg(
            "in float32 exp already overflows above z = 88.7: {bounds}", bounds=bounds
        ),
    }
    cases = [
        Case(name, {"z": z}, logsumexp(z.astype(np.float64)), texts.get(name, text or bounds))
        for name, z, text in _LOGIT_CASES
    ]
    return run_checks(
        fn,
        cases,
        check_name="check_logsumexp",
        diagnose=_logsumexp_diagnose,
        see=_LOG_SECTION,
        more="adding a constant to every logit adds that constant to log-sum-exp: choose "
        "the constant so that no exponential can overflow and at least one equals 1",
        hint=hint,
    )


def _jacobian_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    p = softmax(case.inputs["z"]).astype(np.float64)
    outer, diag = np.outer(p, p), np.diag(p)
    quotient = (
        "differentiate the quotient for j = i and for j != i separately: they differ by one term"
    )
    known = (
        (-outer, "it equals -p p^T: a term on the diagonal is missing"),
        (outer - diag, "the sign is flipped: it equals p p^T - diag(p)"),
        (diag + outer, "it equals diag(p) + p p^T: the p p^T term has the wrong sign"),
        (diag, "it equals diag(p): the off-diagonal entries are missing"),
        (outer, "it equals p p^T"),
    )
    for candidate, problem in known:
        if np.allclose(got, candidate, rtol=1e-5, atol=1e-8):
            return [Finding(problem, quotient)]
    findings = []
    rows = got.sum(axis=-1)
    if not np.allclose(rows, 0, atol=1e-6):
        findings.append(
            Finding(
                msg(
                    "rows should sum to 0 (the probabilities always sum to 1, so their "
                    "derivatives do too); yours sum to {drop_noise}",
                    drop_noise=_fmt_array(_drop_noise(rows)),
                )
            )
        )
    if not np.allclose(got, got.T, atol=1e-9):
        findings.append(Finding("J should be symmetric: dp_i/dz_j = dp_j/dz_i"))
    return findings


def check_softmax_jacobian(
    fn: Callable[[np.ndarray], npt.ArrayLike], *, hint: bool = False
) -> CheckReport:
    """Check the reader's Jacobian of softmax, ``J = diag(p) - p p^T``.

    Parameters
    ----------
    fn : callable
        ``fn(z) -> J``: takes a 1-D array of logits, shape ``(n,)``, and returns the
        ``(n, n)`` matrix ``J[i, j] = dp_i / dz_j`` with ``p = softmax(z)``.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case passed; its ``repr`` explains any failure, naming the
        usual slips (missing diagonal term, flipped sign) and checking that the rows
        sum to 0 and that ``J`` is symmetric.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_softmax_jacobian
    >>> def identity(z):  # as if each p_i were z_i itself
    ...     return np.eye(len(z))
    >>> report = check_softmax_jacobian(identity)
    >>> report.status, report.failures[0].problem
    ('failed', 'it equals diag(p): the off-diagonal entries are missing')
    """
    rows = "each row of J sums to 0, and J is symmetric"
    inputs = (
        ("small vector", np.array([1.0, 2.0, 3.0]), rows),
        ("two equal logits", np.zeros(2), msg("both probabilities are 1/2; {rows}", rows=rows)),
        ("single logit", np.array([3.0]), "one logit: p = [1] whatever z is, so J = [[0]]"),
        (
            "large logits",
            np.array([1000.0, 1001.0, 1002.0]),
            msg("p is finite: {stable}", stable=_STABLE),
        ),
        (
            "a -inf logit (masked entry)",
            np.array([0.0, -np.inf, 0.0]),
            "a masked entry has p_j = 0, so its row and column of J are 0",
        ),
        (
            "float32 input",
            np.array([50.0, 100.0, 90.0], dtype=_F32),
            msg("p is finite: {stable}", stable=_STABLE),
        ),
    )
    cases = [
        Case(name, {"z": z}, softmax_jacobian(z.astype(np.float64)), text)
        for name, z, text in inputs
    ]
    return run_checks(
        fn,
        cases,
        check_name="check_softmax_jacobian",
        diagnose=_jacobian_diagnose,
        see=_JACOBIAN,
        more="p_i is a quotient whose numerator depends on z_i only and whose denominator on "
        "every z_j: apply the quotient rule, once for j = i and once for j != i, and write "
        "both results in terms of p",
        hint=hint,
    )


_ZERO_LOG_ZERO = (
    "0 log 0 counts as 0 (its limit), but the logarithm of 0 is -inf, and 0 times -inf is "
    "nan in floating point"
)


def _drop_noise(a: np.ndarray) -> np.ndarray:
    """Show rounding noise (|a| < 1e-12) as 0."""
    return np.where(np.abs(a) < 1e-12, 0.0, a)


def _entropy_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    h = float(case.expected)
    nats = "the book measures entropy in nats, with the natural logarithm"
    known = (
        (-h, Finding("the sign is flipped; an entropy is >= 0")),
        (h / np.log(2), Finding("this is in bits (log base 2)", nats)),
        (h / np.log(10), Finding("this uses log base 10", nats)),
    )
    if h == 0:
        return []
    return [finding for value, finding in known if np.isclose(float(got), value, rtol=1e-5)][:1]


def check_entropy(fn: Callable[[np.ndarray], npt.ArrayLike], *, hint: bool = False) -> CheckReport:
    """Check the reader's Shannon entropy (in nats) of a probability vector.

    Parameters
    ----------
    fn : callable
        ``fn(p) -> float``: takes a 1-D probability vector, shape ``(n,)``, and
        returns ``H(p) = -sum_i p_i log p_i`` with the natural log, as a single
        number (shape ``()``).
    hint : bool, default False
        Add a fuller hint to a failing report.

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
    >>> import numpy as np
    >>> from helpers.checks import check_entropy
    >>> def outcomes(p):  # how many outcomes are possible: not how uncertain they are
    ...     return np.log(np.count_nonzero(p))
    >>> check_entropy(outcomes).failures[0].name
    'general vector'
    """
    formula = "the entropy in nats (natural logarithm): log n for uniform p, 0 for one-hot"
    inputs = (
        ("uniform over 4", np.full(4, 0.25), "uniform over 4 outcomes: log 4, in nats"),
        ("general vector", np.array([0.1, 0.2, 0.7]), formula),
        (
            msg("one-hot"),
            np.array([0.0, 1.0, 0.0]),
            msg("a certain outcome has entropy 0; {zero_log_zero}", zero_log_zero=_ZERO_LOG_ZERO),
        ),
        ("with a zero entry", np.array([0.5, 0.5, 0.0]), _ZERO_LOG_ZERO),
        ("single entry", np.array([1.0]), "a single outcome has entropy log(1) = 0"),
        ("float32 input", np.full(4, 0.25, dtype=_F32), formula),
    )
    cases = [Case(name, {"p": p}, entropy(p.astype(np.float64)), text) for name, p, text in inputs]
    return run_checks(
        fn,
        cases,
        check_name="check_entropy",
        diagnose=_entropy_diagnose,
        see=section(1, "Entropy as a function of temperature"),
        more="the entropy is a sum over the outcomes, each weighted by its probability: "
        "decide what an outcome of probability 0 contributes, and make the code give "
        "exactly that",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_softmax_temperature
# ---------------------------------------------------------------------------

_TEMPERATURE_FORMULA = (
    "over the last axis, the probabilities of softmax(z / tau): positive on the finite "
    "logits and summing to 1 in each row"
)
_TAU_ZERO_HINT = msg(
    "at tau = 0 the answer is the limit of softmax(z / tau) as tau -> 0+, "
    "not a division by 0: {limit} says what it is",
    limit=_LIMIT,
)
_ALL_MASKED_HINT = (
    "a row whose every entry is -inf has no finite maximum: the exercise asks for a row of "
    "zeros, not nan"
)
_F32_TINY_TAU_HINT = (
    "tau = 1e-300 is below the smallest float32 (about 1e-45): in float32 arithmetic it rounds to 0"
)
_TINY_TAU_HINT = msg(
    "exp(z / tau) overflows when tau is small, yet the exact answer is "
    "finite: adding the same constant to every logit of a row does not "
    "change it ({overflow})",
    overflow=_OVERFLOW,
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
                    "tau -> 0, tied maxima keep equal probabilities",
                    "for every tau > 0, equal logits get equal probabilities: so does the limit",
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
                    _BATCH_HINT,
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


def check_softmax_temperature(
    fn: Callable[[np.ndarray, float], npt.ArrayLike], *, hint: bool = False
) -> CheckReport:
    """Check the reader's softmax with a temperature, its limit at 0 and masked rows.

    Parameters
    ----------
    fn : callable
        ``fn(z, tau) -> p``: ``z`` of shape ``(..., n)`` (entries may be ``-inf``),
        ``tau >= 0`` a Python float; returns ``softmax(z / tau)`` over the last axis,
        shape ``(..., n)``. At ``tau = 0`` it returns the limit as ``tau -> 0``: ``1/k``
        on each of the ``k`` entries equal to the row's maximum. A row whose entries are
        all ``-inf`` gives a row of zeros.
    hint : bool, default False
        Add a fuller hint to a failing report.

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
    >>> def uniform(z, tau):  # the limit tau -> infinity, whatever tau is
    ...     return np.full(np.shape(z), 1 / np.shape(z)[-1])
    >>> [r.name for r in check_softmax_temperature(uniform).results if r.passed]
    []
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
            Case(name, {"z": z}, _softmax_at(z, tau), text or _TEMPERATURE_FORMULA),
            _append(tau),
            msg("z = {z}, tau = {tau:g}", z=_fmt_array(z, dtype=True), tau=tau),
            _temperature_diagnose(tau),
        )
        for name, z, tau, text in cases
    ]
    return _run(
        fn,
        "check_softmax_temperature",
        specs,
        see=msg("{temperature} and {limit}", temperature=_TEMPERATURE, limit=_LIMIT),
        more="three regimes, each decided on paper first: for tau > 0, a form of the "
        "softmax in which no exponential can overflow whatever tau is; at tau = 0, the "
        "limit of that form as tau -> 0+, tied maxima included; for a row of -inf, the "
        "exercise's convention. Then make sure float32 input meets a temperature it cannot "
        "hold",
        hint=hint,
    )

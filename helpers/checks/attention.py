"""Self-checks of chapter 2 (scaled dot-product attention), built on :mod:`helpers.checks.core`.

Each check runs the reader's function on small hand-made inputs and recognises the usual
slips (a missing ``√d_k``, the softmax over the wrong axis, ``K`` for ``Kᵀ``, an inverted
or transposed mask, a missing term of the softmax Jacobian, ...) by comparing the wrong
answer with what each slip produces.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from helpers.attention import attention_backward, scaled_dot_product_attention
from helpers.checks.core import (
    Case,
    CheckReport,
    Finding,
    _name_of,
    nan_aware,
    run_checks,
    section,
)
from helpers.i18n import localize, msg
from helpers.masks import causal_mask

__all__ = [
    "check_attention",
    "check_attention_grad",
    "check_causal_mask",
    "check_kernel_attention",
    "check_left_padded_attention",
    "check_masked_attention",
    "check_self_attention_grad",
]

_F32 = np.float32

# A slip is recognised when the reader's answer matches what it produces this closely
# (the answers of different slips differ by far more on the inputs below).
_SLIP_RTOL, _SLIP_ATOL = 1e-5, 1e-8

_FORMULA = section(2, "The attention formula")
_SCALED = section(2, "Why the scores are scaled")
_MASKS = section(2, "Masks")
_FULLY_MASKED = section(2, "Fully masked rows")
_BACKWARD = section(2, "The backward pass")
_OVERFLOW = section(1, "Computing softmax without overflow")
_STABLE_ROWS = msg(
    "the weights are still finite and each row sums to 1: a softmax need not overflow ({overflow})",
    overflow=_OVERFLOW,
)


def _softmax_rows(S: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax along ``axis`` with the max-shift; fully -inf slices give nan (as naive code)."""
    with np.errstate(invalid="ignore"):
        E = np.exp(S - S.max(axis=axis, keepdims=True))
        return E / E.sum(axis=axis, keepdims=True)


def _close(got: np.ndarray, candidate: np.ndarray) -> bool:
    return bool(
        got.shape == candidate.shape
        and np.allclose(got, candidate, rtol=_SLIP_RTOL, atol=_SLIP_ATOL, equal_nan=True)
    )


def _recognise(got: np.ndarray, slips: Sequence[tuple[np.ndarray, Finding]]) -> list[Finding]:
    """The first slip whose answer equals ``got``, as a one-element list (or [])."""
    return [finding for candidate, finding in slips if _close(got, candidate)][:1]


def _require_callable(fn: object, check_name: str) -> None:
    """Raise the core's TypeError for a non-callable ``fn`` before it gets wrapped."""
    run_checks(fn, (), check_name=check_name)  # type: ignore[arg-type]


def _as_float64(*arrays: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(a, dtype=np.float64) for a in arrays]


# ---------------------------------------------------------------------------
# (a) attention from the four steps
# ---------------------------------------------------------------------------


def _output_of(fn: Callable[..., object]) -> Callable[..., object]:
    """``fn`` returning only the output when it returns a tuple ``(output, weights)``."""

    @functools.wraps(fn)
    def output_only(*args: np.ndarray) -> object:
        result = fn(*args)
        if isinstance(result, tuple) and len(result) == 2:
            return result[0]
        return result

    return output_only


def _attention_slips(
    Q: np.ndarray, K: np.ndarray, V: np.ndarray
) -> list[tuple[np.ndarray, Finding]]:
    """(what a slip gives, what to say about it) for the inputs of one case."""
    d_k = Q.shape[-1]
    S = Q @ K.T
    scaled = msg(
        "the scaling keeps the scores' spread independent of d_k ({scaled})", scaled=_SCALED
    )
    rows = "each query's weights, a row, are positive and sum to 1"
    slips = [
        (
            _softmax_rows(S) @ V,
            Finding("the scores are not scaled: it equals softmax(Q K^T) V", scaled),
        ),
        (
            _softmax_rows(S / d_k) @ V,
            Finding("the scores are divided by d_k instead of sqrt(d_k)", scaled),
        ),
        (
            _softmax_rows(S * np.sqrt(d_k)) @ V,
            Finding("the scores are multiplied by sqrt(d_k) instead of divided by it", scaled),
        ),
        (
            _softmax_rows(S / np.sqrt(d_k), axis=0) @ V,
            Finding("the softmax normalises each column of S instead of each row (axis=0)", rows),
        ),
        (
            np.exp(S / np.sqrt(d_k)) @ V,
            Finding("the weights are not normalised: it equals exp(S) V", rows),
        ),
        (
            _softmax_rows(S / np.sqrt(d_k)),
            Finding(
                "it returns the weights A, not the output",
                "the output has one row of width d_v per query: a weighted mean of the values",
            ),
        ),
    ]
    if K.shape[0] == d_k:  # Q @ K runs too, silently, when m = d_k
        slips.append(
            (
                _softmax_rows(Q @ K / np.sqrt(d_k)) @ V,
                Finding(
                    "it uses Q @ K instead of Q @ K.T",
                    "the score of query i and key j compares two rows: row i of Q and row j of K",
                ),
            )
        )
    return slips


def _attention_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    Q, K, V = _as_float64(*case.inputs.values())
    return _recognise(got, _attention_slips(Q, K, V))


def check_attention(
    fn: Callable[[np.ndarray, np.ndarray, np.ndarray], object], *, hint: bool = False
) -> CheckReport:
    """Check the reader's scaled dot-product attention, written from the four steps.

    Parameters
    ----------
    fn : callable
        ``fn(Q, K, V)`` with ``Q (n, d_k)``, ``K (m, d_k)``, ``V (m, d_v)``, returning
        the output ``(n, d_v)``, or a tuple ``(output, weights)`` (the output is
        checked; a 2-tuple is always read as ``(output, weights)``).
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case passed; its ``repr`` explains any failure, naming the
        usual slips: no ``√d_k`` (or ``d_k``, or a product), the softmax over the
        columns, unnormalised weights, ``Q @ K`` for ``Q @ K.T``, returning the weights.

    Notes
    -----
    Cases: a hand-sized ``2 x 2`` example, cross shapes (``n != m``,
    ``d_k != d_v``: a transposed product fails to run), large scores (a softmax written
    without care overflows), rows whose maxima differ by 800 (a shift common to the whole
    score matrix underflows a row to 0/0), a wide ``d_k = 16`` (the scaling matters
    most), keys that differ only by a constant (equal weights), a single key, and float32
    input.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_attention
    >>> def mean_of_values(Q, K, V):  # every key weighted alike: the scores are ignored
    ...     return np.tile(V.mean(axis=0), (len(Q), 1))
    >>> report = check_attention(mean_of_values)
    >>> report.status, [r.name for r in report.results if r.passed]
    ('failed', ['equal scores', 'a single key'])
    """
    _require_callable(fn, "check_attention")
    rng = np.random.default_rng(2)
    inputs = {
        "hand-sized 2 x 2": (
            np.array([[1.0, 0.0], [0.0, 2.0]]),
            np.array([[1.0, 1.0], [0.0, 1.0]]),
            np.array([[1.0, 2.0], [3.0, 4.0]]),
            "each output row is a weighted mean of the rows of V, with weights that sum to "
            "1: work this one out by hand",
        ),
        "cross shapes (n=2, m=4, d_k=3, d_v=5)": (
            np.array([[1.0, 0.0, 1.0], [0.0, 2.0, -1.0]]),
            np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 1.0], [2.0, 0.0, 1.0], [-1.0, 0.0, 0.0]]),
            np.arange(20.0).reshape(4, 5),
            "Q is (n, d_k), K is (m, d_k), V is (m, d_v): one weight per query and key, "
            "(n, m), and one output row of width d_v per query",
        ),
        "large scores": (
            np.array([[300.0, 0.0], [0.0, 300.0]]),
            np.array([[4.0, 0.0], [3.0, 1.0], [0.0, 5.0]]),
            np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
            msg(
                "the scores reach 1060, where exp overflows: {stable_rows}",
                stable_rows=_STABLE_ROWS,
            ),
        ),
        "wide d_k = 16": (
            rng.integers(-2, 3, size=(3, 16)).astype(np.float64),
            rng.integers(-2, 3, size=(4, 16)).astype(np.float64),
            rng.integers(-2, 3, size=(4, 2)).astype(np.float64),
            msg("with d_k = 16 the scaling of the scores matters most ({scaled})", scaled=_SCALED),
        ),
        "equal scores": (
            np.array([[1.0, 2.0]]),
            np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]]),
            np.array([[3.0], [6.0], [9.0]]),
            "equal scores give equal weights, and the output is the mean of the values",
        ),
        "a single key": (
            np.array([[1.0, -1.0], [5.0, 2.0]]),
            np.array([[2.0, 3.0]]),
            np.array([[7.0, -7.0, 1.0]]),
            "with one key, every query puts all its weight on it: each output row is V[0]",
        ),
        "rows whose maxima differ by 800": (
            np.array([[400.0, 0.0], [0.0, 1.0]]),
            np.array([[4.0, 0.0], [3.0, 1.0], [0.0, 2.0]]),
            np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
            msg(
                "row 1's scores reach 800 and row 2's stay below 2: each row is a "
                "softmax of its own, and a shift common to the whole matrix underflows "
                "every exp of row 2 to 0 (e^-745 is below the smallest float64), so 0/0 "
                "({overflow})",
                overflow=_OVERFLOW,
            ),
        ),
        "float32 input": (
            np.array([[40.0, 0.0], [0.0, 40.0]], dtype=_F32),
            np.array([[4.0, 0.0], [0.0, 4.0]], dtype=_F32),
            np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=_F32),
            msg(
                "in float32 exp overflows above 88.7, and these scores reach 113: {stable_rows}",
                stable_rows=_STABLE_ROWS,
            ),
        ),
    }
    cases = [
        Case(
            name,
            {"Q": Q, "K": K, "V": V},
            scaled_dot_product_attention(*_as_float64(Q, K, V))[0],
            text,
        )
        for name, (Q, K, V, text) in inputs.items()
    ]
    return _with_function_name(
        run_checks(
            _output_of(fn),
            cases,
            check_name="check_attention",
            diagnose=_attention_diagnose,
            see=_FORMULA,
            more="the output of a query is a weighted mean of the rows of V; its weights are "
            "a softmax, over the keys, of its scores against every key, scaled as the "
            "chapter explains. Compare each intermediate array's shape with the chapter's "
            "worked example, and work the hand-sized case out by hand",
            hint=hint,
        ),
        fn,
    )


def _with_function_name(report: CheckReport, fn: Callable[..., object]) -> CheckReport:
    """The report under the name of the reader's own function (not of a wrapper)."""
    return dataclasses.replace(report, function=_name_of(fn))


# ---------------------------------------------------------------------------
# (b) the causal mask
# ---------------------------------------------------------------------------

_CAUSAL_RULE = (
    "True where query i may attend to key j, False elsewhere, as booleans (not the additive "
    "form of 0 and -inf): a query may attend to its own position and to every earlier one"
)


def _causal_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    n = int(case.inputs["n"])
    right = causal_mask(n)
    j, i = np.meshgrid(np.arange(n), np.arange(n))
    slips = [
        (
            j < i,
            Finding(
                "the diagonal is missing: query i does not see key i, its own position",
                "each query may attend to itself",
            ),
        ),
        (
            ~right,
            Finding(
                "the convention is inverted: True marks the keys a query may NOT see",
                "in this book (and in PyTorch's boolean attn_mask) True means may attend",
            ),
        ),
        (
            j >= i,
            Finding(
                "it is the upper triangle: query i sees the keys j >= i, the future",
                "row i is query i and column j is key j: each query sees the past and "
                "itself, never the future",
            ),
        ),
        (
            np.ones((n, n), dtype=bool),
            Finding(
                "every query may attend to every key: this is no mask at all (bidirectional "
                "attention)",
                "a causal query may not attend to the keys after it",
            ),
        ),
        (
            np.eye(n, dtype=bool),
            Finding(
                "each query sees only its own position: the earlier keys are missing",
                "a causal query sees every key up to its own position",
            ),
        ),
    ]
    return _recognise(got.astype(bool), slips) if np.isin(got, (0, 1)).all() else []


def check_causal_mask(fn: Callable[[int], npt.ArrayLike], *, hint: bool = False) -> CheckReport:
    """Check the reader's causal mask.

    Parameters
    ----------
    fn : callable
        ``fn(n) -> mask``: a boolean ``(n, n)`` array with ``mask[i, j]`` True when
        query ``i`` may attend to key ``j``, called with a Python int. The exercise asks
        for booleans: an array of 0s and 1s with the right pattern fails with that
        explanation (0/1 numbers read like the additive form or the "1 = blocked"
        convention), and so does an additive mask of 0 and ``-inf``.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case passed; its ``repr`` explains any failure, naming an
        inverted convention, the upper triangle, a missing diagonal, no mask at all, the
        diagonal alone and numbers where booleans are asked.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_causal_mask
    >>> def itself_only(n):  # each query sees its own position and nothing else
    ...     return np.eye(n, dtype=bool)
    >>> check_causal_mask(itself_only).message.split(":")[1].strip()
    'each query sees only its own position'
    """
    _require_callable(fn, "check_causal_mask")
    cases = [
        Case(f"n = {n}", {"n": np.array(float(n))}, causal_mask(n), _CAUSAL_RULE)
        for n in (1, 2, 3, 6)
    ]
    # The dtype each case returned (None if the function raised: a function that raises
    # on every case must fail every case, not leave the dtypes to pair with nothing).
    dtypes: list[np.dtype | None] = []

    def call(n: np.ndarray) -> object:
        dtypes.append(None)
        result = fn(int(n))
        dtypes[-1] = np.asarray(result).dtype
        return result

    report = run_checks(
        functools.wraps(fn)(call),
        cases,
        check_name="check_causal_mask",
        diagnose=_causal_diagnose,
        see=_MASKS,
        more="draw the 3 x 3 mask by hand, row i for query i and column j for key j, and "
        "mark where the query may look; then find a comparison of i and j that is True "
        "exactly there, for every n",
        hint=hint,
    )
    results = []
    for result, dtype in zip(report.results, dtypes, strict=True):
        if result.passed and dtype != np.bool_:
            result = dataclasses.replace(
                result,
                passed=False,
                got=msg("{result_got} (dtype {dtype})", result_got=result.got, dtype=dtype),
                problem=msg(
                    "the right pattern, but as numbers of dtype {dtype}, not a boolean mask: "
                    "a mask of 0s and 1s reads like the additive form, where 0 means "
                    "allowed, or like the '1 = blocked' convention of other code",
                    dtype=dtype,
                ),
                hint="return an array of booleans (dtype bool), True where the query may attend",
            )
        results.append(result)
    return dataclasses.replace(report, function=_name_of(fn), results=tuple(results))


# ---------------------------------------------------------------------------
# (c) attention with a mask
# ---------------------------------------------------------------------------

_MASK_BEFORE_SOFTMAX = (
    "a key the mask hides gets weight exactly 0, and the weights of the keys it allows "
    "still sum to 1"
)
_FULLY_MASKED_RULE = msg(
    "a query that may attend to no key has nothing to attend to: the book's "
    "convention (and PyTorch's) is weights 0 and output 0 for that row "
    "({fully_masked})",
    fully_masked=_FULLY_MASKED,
)


def _masked_slips(
    Q: np.ndarray, K: np.ndarray, V: np.ndarray, mask: np.ndarray
) -> list[tuple[np.ndarray, Finding]]:
    d_k = Q.shape[-1]
    S = Q @ K.T / np.sqrt(d_k)
    allowed = np.broadcast_to(mask, S.shape)
    fully_masked = ~allowed.any(axis=-1)
    A = _softmax_rows(S)
    with np.errstate(invalid="ignore"):
        uniform = _softmax_rows(np.where(allowed, S, -1e9)) @ V  # NumPy's -1e9 "mask"
        count = allowed.sum(axis=-1, keepdims=True)
        mean_allowed = (allowed / np.where(count > 0, count, 1)) @ V
    slips = [
        (
            scaled_dot_product_attention(Q, K, V, ~allowed)[0],
            Finding(
                "the mask is inverted: the queries attend to the keys it hides",
                "True means may attend (the book's convention, and PyTorch's boolean attn_mask)",
            ),
        ),
        (
            A @ V,
            Finding(
                "the mask made no difference: the output is unmasked attention",
                _MASK_BEFORE_SOFTMAX,
            ),
        ),
        (
            (A * allowed) @ V,
            Finding(
                "the weights were masked after the softmax and not renormalised, so a "
                "row's weights no longer sum to 1",
                _MASK_BEFORE_SOFTMAX,
            ),
        ),
        (
            _softmax_rows(S * allowed) @ V,
            Finding(
                "the scores were multiplied by the mask: a hidden key gets score 0 and "
                "still receives weight",
                _MASK_BEFORE_SOFTMAX,
            ),
        ),
        (
            mean_allowed,
            Finding(
                "every allowed key gets the same weight: the scores are ignored",
                "the weights of the allowed keys come from their scores",
            ),
        ),
    ]
    if fully_masked.any():
        slips.append(
            (
                uniform,
                Finding(
                    "the query with no allowed key got the mean of all the values: its "
                    "weights are uniform over keys it may not see (what a finite fill "
                    "value such as -1e9 gives)",
                    _FULLY_MASKED_RULE,
                ),
            )
        )
        slips.append(
            (
                _nan_rows_attention(Q, K, V, allowed),
                Finding(
                    "the query with no allowed key got nan: all its scores are -inf, and "
                    "the softmax of such a row is 0/0",
                    _FULLY_MASKED_RULE,
                ),
            )
        )
    return slips


@nan_aware
def _masked_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    Q, K, V = _as_float64(*list(case.inputs.values())[:3])
    mask = np.asarray(case.inputs["mask"], dtype=bool)
    return _recognise(got, _masked_slips(Q, K, V, mask))


def check_masked_attention(
    fn: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], object],
    *,
    hint: bool = False,
) -> CheckReport:
    """Check the reader's attention with a boolean mask (True = may attend).

    Parameters
    ----------
    fn : callable
        ``fn(Q, K, V, mask)`` with ``Q (n, d_k)``, ``K (m, d_k)``, ``V (m, d_v)`` and
        a boolean ``mask`` broadcastable to ``(n, m)``; returns the output
        ``(n, d_v)`` or a tuple ``(output, weights)`` (the output is checked).
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case passed; its ``repr`` explains any failure, naming an
        inverted mask, a mask applied after the softmax without renormalising, a mask
        multiplied into the scores, a mask that was ignored, and equal weights for the
        allowed keys.

    Notes
    -----
    The last case has a query that may attend to no key. The book's convention,
    and PyTorch's, is that such a row gets weights 0 and output 0. The usual ``-inf``
    fill gives ``nan`` there (a softmax of 0/0), and a finite fill such as ``-1e9`` gives
    the mean of all values; both are right on every other row, so only this case fails.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_masked_attention
    >>> def mean_of_allowed(Q, K, V, mask):  # the allowed keys' values, weighted alike
    ...     allowed = np.broadcast_to(mask, (len(Q), len(K)))
    ...     return allowed @ V / allowed.sum(axis=-1, keepdims=True)
    >>> check_masked_attention(mean_of_allowed).message.split(": ")[1]
    'every allowed key gets the same weight'
    """
    _require_callable(fn, "check_masked_attention")
    Q = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    K = np.array([[1.0, 2.0], [0.0, 1.0], [2.0, 0.0]])
    V = np.array([[1.0, 0.0], [0.0, 10.0], [5.0, 5.0]])
    Q4 = np.array([[2.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    K4 = np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 1.0], [1.0, 0.0, 2.0], [3.0, 1.0, 1.0]])
    V4 = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    text = _MASK_BEFORE_SOFTMAX
    inputs = {
        "causal mask": (Q, K, V, causal_mask(3), text),
        "random mask": (
            Q4,
            K4,
            V4,
            np.array([[True, False, True, False], [False, True, True, True]]),
            text,
        ),
        "padding mask of shape (1, m)": (
            Q4,
            K4,
            V4,
            np.array([[True, True, True, False]]),
            msg("the mask broadcasts against the (n, m) scores like any array: {text}", text=text),
        ),
        "large scores with a mask": (
            100 * Q,
            K,
            V,
            causal_mask(3),
            msg("scores near 200: {stable_rows}", stable_rows=_STABLE_ROWS),
        ),
        "a query with no allowed key": (
            Q,
            K,
            V,
            np.array([[True, False, False], [False, False, False], [True, True, False]]),
            _FULLY_MASKED_RULE,
        ),
    }
    cases = [
        Case(
            name,
            {"Q": Q_, "K": K_, "V": V_, "mask": mask},
            scaled_dot_product_attention(Q_, K_, V_, mask)[0],
            case_text,
        )
        for name, (Q_, K_, V_, mask, case_text) in inputs.items()
    ]
    return _with_function_name(
        run_checks(
            _output_of(fn),
            cases,
            check_name="check_masked_attention",
            diagnose=_masked_diagnose,
            see=_MASKS,
            more="a hidden key must end with weight exactly 0 and the allowed ones must "
            "share all the weight, as a softmax over the allowed keys alone would give: "
            "decide at which of the four steps the mask acts. A row with no allowed key "
            "needs a rule of its own",
            hint=hint,
        ),
        fn,
    )


# ---------------------------------------------------------------------------
# (d) the gradients
# ---------------------------------------------------------------------------

_GRAD_NAMES = ("dQ", "dK", "dV")
_GRAD_SHAPES = "each gradient has the shape of its array: dQ of Q, dK of K, dV of V"
_GRAD_MORE = (
    "go backwards through the four steps of the forward pass: the output is the product of "
    "the weights and the values, the weights a softmax of each row of scores (its Jacobian "
    'is chapter 1\'s, "The Jacobian"), and the scores a scaled product of Q and K. At each '
    "step, the gradient of an array has that array's shape"
)


def _grad_part(fn: Callable[..., object], index: int) -> Callable[..., object]:
    """``fn`` returning only gradient ``index`` of its ``(dQ, dK, dV)``."""

    @functools.wraps(fn)
    def part(*args: np.ndarray) -> object:
        result = fn(*args)
        if not isinstance(result, (tuple, list)) or len(result) != 3:
            what = msg("a {type}", type=type(result).__name__)
            if isinstance(result, (tuple, list)):
                what = msg("a {type} of length {n}", type=type(result).__name__, n=len(result))
            raise ValueError(
                localize(
                    msg("it must return three arrays (dQ, dK, dV); it returned {what}", what=what)
                )
            )
        return result[index]

    return part


def _grad_slips(
    Q: np.ndarray, K: np.ndarray, V: np.ndarray, G: np.ndarray, index: int
) -> list[tuple[np.ndarray, Finding]]:
    s = 1 / np.sqrt(Q.shape[-1])
    A = _softmax_rows(s * Q @ K.T)
    dA = G @ V.T
    dS = A * (dA - (dA * A).sum(axis=-1, keepdims=True))
    no_rowsum = A * dA
    missing_scale = Finding(
        msg(
            "{grad_names} lacks the factor 1/sqrt(d_k): the scores are scaled, so "
            "the chain rule brings that factor into dQ and dK",
            grad_names=_GRAD_NAMES[index],
        ),
        "the scaling of the scores is part of the forward pass, and of its derivative",
    )
    rowsum = Finding(
        "one term of the softmax's Jacobian is missing: dS = A * dA treats each weight as if "
        "it depended only on its own score",
        'the softmax\'s Jacobian has two terms (chapter 1, "The Jacobian"): a change of one '
        "score moves weight away from every other key",
    )
    transposed = Finding(
        msg("{grad_names} has a transpose in the wrong place", grad_names=_GRAD_NAMES[index]),
        "on the square case the shapes cannot tell: check which index of the scores belongs "
        "to the queries and which to the keys",
    )
    jacobian = Finding(
        "the gradient goes from the weights to the scores unchanged: the softmax's Jacobian "
        "is missing entirely",
        'the weights are a softmax of the scores (chapter 1, "The Jacobian")',
    )
    candidates: list[tuple[Callable[[], np.ndarray], Finding]] = [
        [  # dQ
            (lambda: dS @ K, missing_scale),
            (lambda: s * no_rowsum @ K, rowsum),
            (lambda: s * dS.T @ K, transposed),
            (lambda: s * dA @ K, jacobian),
        ],
        [  # dK
            (lambda: dS.T @ Q, missing_scale),
            (lambda: s * no_rowsum.T @ Q, rowsum),
            (lambda: s * dS @ Q, transposed),
            (lambda: s * dA.T @ Q, jacobian),
        ],
        [  # dV
            (lambda: A @ G, transposed),
            (lambda: G.T @ A, transposed),
        ],
    ][index]
    slips = []
    for compute, finding in candidates:
        try:  # a transposed product runs only for some shapes
            slips.append((compute(), finding))
        except ValueError:
            pass
    return slips


def _grad_diagnose(index: int) -> Callable[[Case, np.ndarray], list[Finding]]:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        Q, K, V, G = _as_float64(*case.inputs.values())
        return _recognise(got, _grad_slips(Q, K, V, G, index))

    return diagnose


def check_attention_grad(
    fn: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], object],
    *,
    hint: bool = False,
) -> CheckReport:
    """Check the reader's gradients of attention with respect to ``Q``, ``K`` and ``V``.

    Parameters
    ----------
    fn : callable
        ``fn(Q, K, V, grad_output) -> (dQ, dK, dV)`` with ``Q (n, d_k)``,
        ``K (m, d_k)``, ``V (m, d_v)`` and ``grad_output (n, d_v)``, the gradient of a
        loss with respect to the output of (unmasked) scaled dot-product attention.
        Returns the gradients of that loss with respect to ``Q``, ``K`` and ``V``, of
        the same shapes.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        One result per gradient per case (``"square: dQ"``, ...), truthy iff all
        passed; its ``repr`` names a missing ``1/sqrt(d_k)``, a missing row-sum term
        of the softmax Jacobian, a missing Jacobian and misplaced transposes.

    Notes
    -----
    Cases: square shapes (``n = m = d_k = d_v = 3``, where a misplaced transpose
    still runs) and cross shapes (``n = 2``, ``m = 4``, ``d_k = 3``, ``d_v = 5``).

    Examples
    --------
    A wrong answer is caught and explained (a correct one is for the reader to write):

    >>> import numpy as np
    >>> from helpers.checks import check_attention_grad
    >>> def only_values(Q, K, V, G):  # stops at dV: Q and K get no gradient
    ...     return np.zeros_like(Q), np.zeros_like(K), np.ones_like(V)
    >>> report = check_attention_grad(only_values)
    >>> bool(report), report.status
    (False, 'failed')
    """
    _require_callable(fn, "check_attention_grad")
    rng = np.random.default_rng(3)
    inputs = {
        msg("square"): (
            rng.integers(-2, 3, size=(3, 3)),
            rng.integers(-2, 3, size=(3, 3)),
            rng.integers(-2, 3, size=(3, 3)),
            rng.integers(-2, 3, size=(3, 3)),
        ),
        "cross shapes": (
            rng.integers(-2, 3, size=(2, 3)),
            rng.integers(-2, 3, size=(4, 3)),
            rng.integers(-2, 3, size=(4, 5)),
            rng.integers(-2, 3, size=(2, 5)),
        ),
    }
    texts = {
        "square": "n = m = d_k = d_v = 3: a transpose in the wrong place still runs here",
        "cross shapes": _GRAD_SHAPES,
    }
    results = []
    for name, arrays in inputs.items():
        Q, K, V, G = _as_float64(*arrays)
        weights = scaled_dot_product_attention(Q, K, V)[1]
        expected = attention_backward(Q, K, V, weights, G)
        for index, part in enumerate(_GRAD_NAMES):
            case = Case(
                msg("{name}: {part}", name=name, part=part),
                {"Q": Q, "K": K, "V": V, "grad_output": G},
                expected[index],
                texts[name],
            )
            report = run_checks(
                _grad_part(fn, index),
                [case],
                check_name="check_attention_grad",
                diagnose=_grad_diagnose(index),
            )
            results.extend(report.results)
    return CheckReport(
        check="check_attention_grad",
        function=_name_of(fn),
        results=tuple(results),
        see=_BACKWARD,
        more=_GRAD_MORE,
        hinted=hint,
    )


_SELF_NAMES = ("dX", "dW_Q", "dW_K", "dW_V")
_SELF_PATHS = "X enters the loss three times, as the queries, the keys and the values"
_SELF_MORE = (
    "take the gradients of attention with respect to Q, K and V (the chapter's, or yours), "
    "then go back through each projection Q = X W_Q, K = X W_K, V = X W_V: each gives the "
    "gradient of its weight and one path into X, and the chain rule adds the paths. The "
    "gradient of each array has that array's shape"
)


def _self_part(fn: Callable[..., object], index: int) -> Callable[..., object]:
    """``fn`` returning only gradient ``index`` of its ``(dX, dW_Q, dW_K, dW_V)``."""

    @functools.wraps(fn)
    def part(*args: np.ndarray) -> object:
        result = fn(*args)
        if not isinstance(result, (tuple, list)) or len(result) != 4:
            what = msg("a {type}", type=type(result).__name__)
            if isinstance(result, (tuple, list)):
                what = msg("a {type} of length {n}", type=type(result).__name__, n=len(result))
            raise ValueError(
                localize(
                    msg(
                        "it must return four arrays (dX, dW_Q, dW_K, dW_V); it returned {what}",
                        what=what,
                    )
                )
            )
        return result[index]

    return part


def _self_slips(
    X: np.ndarray, W_Q: np.ndarray, W_K: np.ndarray, W_V: np.ndarray, G: np.ndarray, index: int
) -> list[tuple[np.ndarray, Finding]]:
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    dQ, dK, dV = attention_backward(Q, K, V, scaled_dot_product_attention(Q, K, V)[1], G)
    through = {"Q": dQ @ W_Q.T, "K": dK @ W_K.T, "V": dV @ W_V.T}
    if index == 0:
        slips = []
        for missing in (("Q", "K"), ("K",), ("Q",), ("V",), ("K", "V"), ("Q", "V")):
            kept = [name for name in "QKV" if name not in missing]
            slips.append(
                (
                    sum(through[name] for name in kept),
                    Finding(
                        msg(
                            "only the path(s) through {names} are included; the path(s) through "
                            "{names2} are missing: X makes the queries, the keys and the values",
                            names=", ".join(kept),
                            names2=", ".join(missing),
                        ),
                        _SELF_PATHS,
                    ),
                )
            )
        if dQ.shape == dK.shape == dV.shape == X.shape:
            slips.append(
                (
                    dQ + dK + dV,
                    Finding(
                        "it equals dQ + dK + dV: the projections are missing; each path goes "
                        "back through its own projection matrix",
                        "dQ is the gradient with respect to X W_Q, not X",
                    ),
                )
            )
        return slips
    d, W = [(dQ, W_Q), (dK, W_K), (dV, W_V)][index - 1]
    transposed = Finding(
        msg(
            "{self_names} is transposed (its shape matches only because the matrix is square here)",
            self_names=_SELF_NAMES[index],
        ),
        "the gradient of a weight has the weight's shape, (d_model, d_k): the rows belong "
        "to the features of X",
    )
    out = [(d.T @ X, transposed)]
    if index == 2:  # dW_K from dQ or dW_Q from dK: the roles of queries and keys swapped
        out.append(
            (
                X.T @ dQ,
                Finding(
                    "dW_K uses dQ: the roles of Q and K are swapped",
                    "W_K makes the keys",
                ),
            )
        )
    return [(c, f) for c, f in out if c.shape == W.shape]


def _self_diagnose(index: int) -> Callable[[Case, np.ndarray], list[Finding]]:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        return _recognise(got, _self_slips(*_as_float64(*case.inputs.values()), index))

    return diagnose


def check_self_attention_grad(
    fn: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], object],
    *,
    hint: bool = False,
) -> CheckReport:
    """Check the reader's gradients of a self-attention head with its projections.

    Parameters
    ----------
    fn : callable
        ``fn(X, W_Q, W_K, W_V, grad_output) -> (dX, dW_Q, dW_K, dW_V)`` with
        ``X (n, d_model)``, ``W_Q, W_K (d_model, d_k)``, ``W_V (d_model, d_v)`` and
        ``grad_output (n, d_v)``, the gradient of a loss with respect to the output of
        ``attention(X W_Q, X W_K, X W_V)`` (scaled, unmasked). Returns the gradients of
        that loss with respect to ``X`` and the three matrices, of their shapes.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        One result per gradient per case (``"square: dX"``, ...), truthy iff all
        passed; its ``repr`` names a path of ``X`` left out (through the queries, the
        keys or the values), a transposed weight gradient and swapped roles of Q and K.

    Notes
    -----
    Cases: square shapes (``n = d_model = d_k = d_v = 3``, where a misplaced transpose
    still runs) and rectangular ones (``n = 4``, ``d_model = 5``, ``d_k = 2``,
    ``d_v = 3``).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_self_attention_grad
    >>> def nothing_flows(X, W_Q, W_K, W_V, G):  # every gradient left at 0
    ...     return tuple(np.zeros_like(a) for a in (X, W_Q, W_K, W_V))
    >>> report = check_self_attention_grad(nothing_flows)
    >>> report.status, report.message.endswith("every entry is 0")
    ('failed', True)
    """
    _require_callable(fn, "check_self_attention_grad")
    rng = np.random.default_rng(5)
    inputs = {
        msg("square"): (3, 3, 3, 3),
        msg("rectangular"): (4, 5, 2, 3),
    }
    texts = {
        "square": "n = d_model = d_k = d_v = 3: a transposed weight gradient still has the "
        "right shape here",
        "rectangular": "each gradient has the shape of its array: dX of X, dW_Q of W_Q, ...",
    }
    results = []
    for name, (n, d_model, d_k, d_v) in inputs.items():
        X = rng.integers(-2, 3, size=(n, d_model)).astype(np.float64)
        W_Q, W_K = (rng.integers(-1, 2, size=(d_model, d_k)) / 2 for _ in range(2))
        W_V = rng.integers(-1, 2, size=(d_model, d_v)) / 2
        G = rng.integers(-2, 3, size=(n, d_v)).astype(np.float64)
        Q, K, V = X @ W_Q, X @ W_K, X @ W_V
        dQ, dK, dV = attention_backward(Q, K, V, scaled_dot_product_attention(Q, K, V)[1], G)
        expected = (
            dQ @ W_Q.T + dK @ W_K.T + dV @ W_V.T,
            X.T @ dQ,
            X.T @ dK,
            X.T @ dV,
        )
        for index, part in enumerate(_SELF_NAMES):
            case = Case(
                msg("{name}: {part}", name=name, part=part),
                {"X": X, "W_Q": W_Q, "W_K": W_K, "W_V": W_V, "grad_output": G},
                expected[index],
                texts[name],
            )
            report = run_checks(
                _self_part(fn, index),
                [case],
                check_name="check_self_attention_grad",
                diagnose=_self_diagnose(index),
            )
            results.extend(report.results)
    return CheckReport(
        check="check_self_attention_grad",
        function=_name_of(fn),
        results=tuple(results),
        see=_BACKWARD,
        more=_SELF_MORE,
        hinted=hint,
    )


# ---------------------------------------------------------------------------
# check_kernel_attention (exercise 2.2: Nadaraya-Watson with vectors)
# ---------------------------------------------------------------------------

_LOOKUP = section(2, "A soft dictionary lookup")
_KERNEL_UNDERFLOW = (
    "every kernel value underflows to 0 here, yet the weights are well defined: each query "
    "still has a nearest key, and its weights are a softmax of finite scores"
)
_EXPAND = (
    "expand the squared distance (part 1 of the exercise): which of its terms cancel in the "
    "normalisation over the keys, and which do not?"
)


def _kernel_reference(Q: np.ndarray, K: np.ndarray, V: np.ndarray, sigma: float):
    Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
    S = (Q @ K.T - 0.5 * (K * K).sum(axis=-1)) / sigma**2  # (n, m)
    A = _softmax_rows(S)
    return A @ V, A


def _kernel_slips(Q, K, V, sigma) -> list[tuple[np.ndarray, Finding]]:
    Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
    QK, kk = Q @ K.T, (K * K).sum(axis=-1)

    def out(S: np.ndarray, axis: int = -1) -> np.ndarray:
        return _softmax_rows(S, axis) @ V

    return [
        (
            out(QK / sigma**2),
            Finding(
                "the weights are a softmax of q . k / sigma^2 alone: the key's own term is "
                "missing, so a long key wins even when it is far",
                _EXPAND,
            ),
        ),
        (
            out((QK - kk) / sigma**2),
            Finding("the key's own term is twice as large as it should be", _EXPAND),
        ),
        (
            out((QK - 0.5 * kk) / sigma),
            Finding(
                "the scores are divided by sigma, not by sigma^2",
                "in the kernel, sigma enters squared",
            ),
        ),
        (
            out((QK - 0.5 * kk) / (2 * sigma**2)),
            Finding(
                "the scores are half as large as they should be: the factor 2 of the "
                "kernel's 2 sigma^2 was used twice",
                _EXPAND,
            ),
        ),
        (
            out(QK / np.sqrt(Q.shape[-1])),
            Finding(
                "this is scaled dot-product attention (q . k / sqrt(d)): the width of the "
                "kernel, sigma, and the key's own term are not used",
                _EXPAND,
            ),
        ),
        (
            out((QK - 0.5 * kk) / sigma**2, axis=0) if Q.shape[0] > 1 else np.array([]),
            Finding(
                "the softmax is taken over the queries (axis 0): each query's weights must "
                "sum to 1 over the keys",
                "one row of weights per query, each summing to 1",
            ),
        ),
        (
            out((QK + 0.5 * kk) / sigma**2),
            Finding(
                "the key's own term has the wrong sign: it favours far keys",
                _EXPAND,
            ),
        ),
        (
            _kernel_values_normalised(Q, K, V, sigma),
            Finding(
                "the weights are the kernel values divided by their sum: for a tiny sigma, "
                "or a query far from every key, every kernel value underflows to 0, and "
                "0/0 is nan",
                "the weights are a softmax of finite scores, which needs no kernel value "
                "(part 1 of the exercise)",
            ),
        ),
        (
            np.broadcast_to(V.mean(axis=0), (len(Q), V.shape[1])),
            Finding(
                "every output row is the mean of the values: the weights do not depend on "
                "the distances (that is the limit of a very wide kernel only)",
                "near keys weigh more than far ones, the more so as sigma is small",
            ),
        ),
    ]


def _kernel_values_normalised(Q, K, V, sigma) -> np.ndarray:
    """The slip: exp(-|q - k|^2 / (2 sigma^2)) normalised as it is (nan where it underflows)."""
    with np.errstate(all="ignore"):
        D = ((Q[:, None, :] - K[None, :, :]) ** 2).sum(axis=-1)
        W = np.exp(-D / (2 * sigma**2))
        return W / W.sum(axis=-1, keepdims=True) @ V


def _kernel_diagnose(sigma: float) -> Callable[[Case, np.ndarray], list[Finding]]:
    @nan_aware
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        Q, K, V = (np.asarray(case.inputs[k]) for k in ("Q", "K", "V"))
        return _recognise(got, _kernel_slips(Q, K, V, sigma))

    return diagnose


def check_kernel_attention(
    fn: Callable[[np.ndarray, np.ndarray, np.ndarray, float], object],
    *,
    hint: bool = False,
) -> CheckReport:
    """Check the reader's Gaussian-kernel (Nadaraya-Watson) attention on vectors.

    Parameters
    ----------
    fn : callable
        ``fn(Q, K, V, sigma)`` with ``Q (n, d)``, ``K (m, d)``, ``V (m, d_v)`` and a
        Python float ``sigma > 0``, returning ``(output, weights)`` of shapes
        ``(n, d_v)`` and ``(n, m)`` (or the output alone): the weights are
        ``exp(-|q_i - k_j|^2 / (2 sigma^2))`` normalised over the keys. The output is
        checked.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case matches: a hand-sized example, keys of different lengths
        (where the key's own term decides), cross shapes, a tiny ``sigma`` (every kernel
        value underflows: the nearest key's value), a large ``sigma`` (the mean of the
        values) and queries far from every key. The report recognises the key's term
        left out, doubled or with the wrong sign, a division by ``sigma`` or by
        ``2 sigma^2``, scaled dot-product attention, the softmax over the queries and
        weights that ignore the distances.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_kernel_attention
    >>> def mean_of_values(Q, K, V, sigma):  # the limit of a very wide kernel only
    ...     return np.tile(V.mean(axis=0), (len(Q), 1))
    >>> report = check_kernel_attention(mean_of_values)
    >>> bool(report), report.failures[0].problem.split(":")[0]
    (False, 'every output row is the mean of the values')
    """
    _require_callable(fn, "check_kernel_attention")
    from helpers.checks.multihead import _append, _run, _Spec

    rng = np.random.default_rng(4)
    far = rng.normal(size=(3, 2)) + 1e3
    inputs = [
        (
            "1 query and 3 keys on a line",
            np.array([[2.6]]),
            np.array([[1.0], [2.0], [3.0]]),
            np.array([[1.0], [2.0], [4.0]]),
            0.4,
            "one query at 2.6 between keys at 2 and 3, sigma = 0.4: the weights fall off "
            "with the squared distance to each key",
        ),
        (
            "keys of different lengths",
            np.array([[1.0, 0.0], [0.0, 1.0]]),
            np.array([[1.0, 0.0], [3.0, 0.0], [0.0, 0.5]]),
            np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
            1.0,
            "the key (3, 0) is the longest and the farthest from both queries: it must not "
            "win because it is long",
        ),
        (
            "cross shapes (n=2, m=4, d=3, d_v=5)",
            rng.normal(size=(2, 3)),
            rng.normal(size=(4, 3)),
            np.arange(20.0).reshape(4, 5),
            0.8,
            "Q is (n, d), K is (m, d), V is (m, d_v): the weights are (n, m), the output (n, d_v)",
        ),
        (
            "tiny sigma = 1e-3 (the nearest key)",
            np.array([[0.0, 0.0], [2.0, 2.1]]),
            np.array([[0.1, 0.0], [1.0, 1.0], [2.0, 2.0]]),
            np.array([[1.0, -1.0], [2.0, -2.0], [3.0, -3.0]]),
            1e-3,
            msg(
                "sigma = 1e-3: {kernel_underflow}; each output row is the value of the nearest key",
                kernel_underflow=_KERNEL_UNDERFLOW,
            ),
        ),
        (
            "large sigma = 1e4 (the mean of the values)",
            np.array([[0.0, 1.0]]),
            np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]]),
            np.array([[4.0], [8.0], [0.0], [0.0]]),
            1e4,
            "a kernel far wider than the distances: every key weighs nearly the same, and "
            "the output is nearly the mean of the values",
        ),
        (
            "queries far from every key",
            far + rng.normal(size=(3, 2)) * 0.1,
            rng.normal(size=(4, 2)),
            rng.normal(size=(4, 3)),
            1.0,
            _KERNEL_UNDERFLOW,
        ),
    ]
    specs = [
        _Spec(
            Case(name, {"Q": Q, "K": K, "V": V}, _kernel_reference(Q, K, V, sigma)[0], hint),
            _append(sigma),
            msg(
                "Q: {q_shape}, K: {k_shape}, V: {v_shape}, sigma = {sigma:g}",
                q_shape=Q.shape,
                k_shape=K.shape,
                v_shape=V.shape,
                sigma=sigma,
            ),
            _kernel_diagnose(sigma),
            lambda r: r[0] if isinstance(r, tuple) and len(r) == 2 else r,
        )
        for name, Q, K, V, sigma, hint in inputs
    ]
    return _run(
        fn,
        "check_kernel_attention",
        specs,
        see=_LOOKUP,
        more="part 1 of the exercise turns the kernel weights into a softmax over the keys "
        "of scores that never need a kernel value to be computed: expand the squared "
        "distance and keep the terms that depend on the key. Then write that softmax so "
        "that it cannot overflow or give 0/0, as chapter 1 does",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_left_padded_attention (exercise 2.4: a batch of left-padded prompts)
# ---------------------------------------------------------------------------


def _left_pad_mask(lengths: np.ndarray, n: int, variant: str = "") -> np.ndarray:
    """The (b, n, n) mask of the right answer, or of ``variant``'s slip."""
    pos = np.arange(n)
    lengths = np.asarray(lengths)[:, None]
    real = pos >= n - lengths  # (b, n): the last lengths[s] positions
    masks = {
        "": causal_mask(n) & real[:, None, :],
        "right-padded": causal_mask(n) & (pos < lengths)[:, None, :],
        "no causal": real[:, None, :],
        "no padding": causal_mask(n)[None],
        "queries": causal_mask(n) & real[:, :, None],
        "transposed causal": causal_mask(n).T & real[:, None, :],
    }
    return np.broadcast_to(masks[variant], (len(lengths), n, n))


def _zero_rows_attention(Q, K, V, mask, fill: float = -np.inf) -> np.ndarray:
    S = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    if np.isinf(fill):
        return scaled_dot_product_attention(Q, K, V, mask=mask)[0]
    return _softmax_rows(np.where(mask, S, fill)) @ V


_REAL_KEYS = "no query may attend to a padding key, nor to a key after it"


def _left_pad_slips(Q, K, V, lengths) -> list[tuple[np.ndarray, Finding]]:
    n = Q.shape[-2]
    right = _left_pad_mask(lengths, n)
    return [
        (
            _zero_rows_attention(Q, K, V, _left_pad_mask(lengths, n, "right-padded")),
            Finding(
                "the padding is taken to be on the right (keys j < lengths[s] are real): "
                "here it is on the left, the real tokens are the last ones",
                "sequence s has its lengths[s] real tokens in its last positions",
            ),
        ),
        (
            _zero_rows_attention(Q, K, V, _left_pad_mask(lengths, n, "no causal")),
            Finding(
                "the causal mask is missing: a query attends to the keys after it",
                _REAL_KEYS,
            ),
        ),
        (
            _zero_rows_attention(Q, K, V, _left_pad_mask(lengths, n, "transposed causal")),
            Finding(
                "the causal mask is transposed: query i attends to the keys j >= i, the "
                "future, instead of j <= i",
                "in a mask, row i is query i and column j is key j",
            ),
        ),
        (
            _zero_rows_attention(Q, K, V, _left_pad_mask(lengths, n, "no padding")),
            Finding(
                "the padding mask is missing: the queries attend to the padding keys",
                _REAL_KEYS,
            ),
        ),
        (
            _zero_rows_attention(Q, K, V, _left_pad_mask(lengths, n, "queries")),
            Finding(
                "the padding rule hides queries instead of keys (the mask is indexed "
                "[s, j, i] instead of [s, i, j]): real tokens still attend to the padding",
                "the padding decides which keys a query may see",
            ),
        ),
        (
            _zero_rows_attention(Q, K, V, right, fill=-1e9),
            Finding(
                "a padding query gets the mean of all the values: its weights are uniform "
                "over keys it may not see (what a finite fill such as -1e9 gives)",
                _FULLY_MASKED_RULE,
            ),
        ),
        (
            _nan_rows_attention(Q, K, V, right),
            Finding(
                "a padding query, which may see no key, gets nan: all its scores are -inf, "
                "and the softmax of such a row is 0/0",
                _FULLY_MASKED_RULE,
            ),
        ),
    ]


def _nan_rows_attention(Q, K, V, mask) -> np.ndarray:
    """Masked attention with a plain softmax: nan in the rows with no allowed key."""
    S = np.where(mask, Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), -np.inf)
    with np.errstate(all="ignore"):
        return _softmax_rows(S) @ V


@nan_aware
def _left_pad_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    Q, K, V = _as_float64(*(case.inputs[k] for k in ("Q", "K", "V")))
    lengths = np.asarray(case.inputs["lengths"])
    return _recognise(got, _left_pad_slips(Q, K, V, lengths))


def check_left_padded_attention(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check the reader's causal self-attention on a batch of left-padded sequences.

    Parameters
    ----------
    fn : callable
        ``fn(Q, K, V, lengths)`` with ``Q, K (b, n, d_k)``, ``V (b, n, d_v)`` and
        ``lengths (b,)`` integers: sequence ``s`` has its ``lengths[s]`` real tokens in
        the last positions. Returns ``(output, weights)`` of shapes ``(b, n, d_v)`` and
        ``(b, n, n)`` (or the output alone): causal attention over the real keys, and
        weights 0 and output 0 for a query with no real key up to it. The output is
        checked.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case matches: no padding, one sequence padded, a batch of three
        lengths, a sequence of one token, scores near ``1e3`` and float32. The report
        recognises padding taken to be on the right, the causal mask left out or
        transposed, the padding mask left out, the padding rule applied to the queries,
        and uniform weights for the padding queries.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_left_padded_attention
    >>> def values_back(Q, K, V, lengths):  # each token's own value: no attention at all
    ...     return V
    >>> report = check_left_padded_attention(values_back)
    >>> report.status, report.failures[0].name
    ('failed', 'a sequence of one real token')
    """
    _require_callable(fn, "check_left_padded_attention")
    from helpers.checks.multihead import _run, _Spec

    rng = np.random.default_rng(8)

    def qkv(b: int, n: int, d_k: int, d_v: int, scale: float = 1.0, dtype=np.float64):
        return (
            (rng.normal(size=(b, n, d_k)) * scale).astype(dtype),
            (rng.normal(size=(b, n, d_k)) * scale).astype(dtype),
            rng.normal(size=(b, n, d_v)).astype(dtype),
        )

    inputs = [
        (
            "no padding (lengths = n)",
            qkv(2, 4, 3, 2),
            [4, 4],
            "no padding at all: plain causal attention in each sequence",
        ),
        (
            "one sequence padded",
            qkv(1, 5, 4, 3),
            [3],
            "lengths = [3] with n = 5: the real tokens are at positions 2, 3 and 4, and "
            "queries 0 and 1, which may see no key, get weights 0 and output 0",
        ),
        (
            "a batch of three lengths",
            qkv(3, 6, 4, 2),
            [6, 2, 4],
            "lengths 6, 2 and 4 with n = 6: each sequence has its own padding, and a query "
            "that may see no key gets weights 0 and output 0",
        ),
        (
            "a sequence of one real token",
            qkv(2, 4, 2, 2),
            [1, 4],
            "lengths = [1, 4]: in the first sequence only the last query may see a key, "
            "itself, and its output is its own value; the others get weights 0 and output 0",
        ),
        (
            "scores near 1e3",
            qkv(2, 5, 4, 2, scale=20.0),
            [5, 3],
            msg("scores near 1e3: {stable_rows}", stable_rows=_STABLE_ROWS),
        ),
        (
            "float32 input",
            qkv(2, 5, 4, 3, dtype=np.float32),
            [2, 5],
            "float32 input: the same answer to float32 precision",
        ),
    ]
    specs = []
    for name, (Q, K, V), lengths, text in inputs:
        lengths = np.array(lengths)
        mask = _left_pad_mask(lengths, Q.shape[-2])
        expected = scaled_dot_product_attention(*_as_float64(Q, K, V), mask=mask)[0]
        specs.append(
            _Spec(
                Case(name, {"Q": Q, "K": K, "V": V, "lengths": lengths}, expected, text),
                lambda *arrays: arrays,
                msg(
                    "Q, K: {q_shape}, V: {v_shape}, lengths = {tolist}",
                    q_shape=Q.shape,
                    v_shape=V.shape,
                    tolist=lengths.tolist(),
                ),
                _left_pad_diagnose,
                lambda r: r[0] if isinstance(r, tuple) and len(r) == 2 else r,
            )
        )
    return _run(
        fn,
        "check_left_padded_attention",
        specs,
        see=msg("{masks} and {fully_masked}", masks=_MASKS, fully_masked=_FULLY_MASKED),
        more="the mask is two conditions at once: whether the key comes after the query, "
        "and whether the key is a real token of its sequence; find an array for each and "
        "combine them into the batch's (b, n, n) mask. Then make the softmax of a row with "
        "no allowed key give zeros rather than 0/0",
        hint=hint,
    )

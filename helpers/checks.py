"""Self-checks for the exercises: run on the reader's own function, report in words.

Introduced in chapter 1 (:func:`check_softmax`, :func:`check_log_softmax`,
:func:`check_logsumexp`, :func:`check_softmax_jacobian`, :func:`check_entropy`);
later chapters add their own ``check_*`` functions built on the same core.

Every ``check_*`` function calls the reader's function on a handful of chosen
inputs (ordinary ones, then the ones that break a naive formula), compares with
this package's reference implementation and returns a :class:`CheckReport`. The
report is truthy iff every case passed, and its ``repr`` says, for each failing
case, what went in, what was expected, what came back (or what was raised), what
is wrong and a hint. It never raises because the reader's function did.

The core, for writing new checks
--------------------------------
A check is a list of :class:`Case` objects plus, optionally, a ``diagnose``
function that recognises typical wrong answers; :func:`run_checks` does the rest::

    def check_double(fn):
        cases = [
            Case(
                "small vector",
                {"z": np.array([1.0, 2.0])},
                np.array([2.0, 4.0]),
                hint="multiply every entry by 2",
            )
        ]
        return run_checks(fn, cases, check_name="check_double")

The report's text is deterministic (no addresses, timings or numpy print options
leak in), so notebooks that show it pass strict output comparison.
"""

from __future__ import annotations

import textwrap
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from helpers.softmax import entropy, log_softmax, logsumexp, softmax, softmax_jacobian

__all__ = [
    "Case",
    "CaseResult",
    "CheckReport",
    "Finding",
    "check_entropy",
    "check_log_softmax",
    "check_logsumexp",
    "check_softmax",
    "check_softmax_jacobian",
    "run_checks",
]

# Default tolerances of a case, against a float64 reference. Float64 inputs: a
# correct answer is ~1e-15 off (~1e-7 if the reader computes in float32 somewhere),
# while every formula slip the checks look for is off by far more than 1e-6.
# Float32 inputs: the reader's arithmetic rounds at ~6e-8 per step.
RTOL_FLOAT64, ATOL_FLOAT64 = 1e-6, 1e-9
RTOL_FLOAT32, ATOL_FLOAT32 = 1e-4, 1e-6

_WIDTH = 88  # the report's text is wrapped to this many columns
_MAX_SHOWN = 12  # longer vectors are shown with "..." in the middle


# ---------------------------------------------------------------------------
# The core: cases, results, reports, the runner
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One input to run the reader's function on, with the answer expected.

    Parameters
    ----------
    name : str
        Short description shown in the report, e.g. ``"large logits"``.
    inputs : Mapping[str, ndarray]
        Argument name -> value, passed positionally in this order (each call gets
        a fresh copy, and an input changed in place is reported).
    expected : ndarray
        The correct output.
    hint : str
        What to try if this case fails.
    rtol, atol : float, optional
        Tolerances of the comparison (``numpy.isclose``); by default
        ``RTOL_FLOAT32``/``ATOL_FLOAT32`` if any input is float32 and
        ``RTOL_FLOAT64``/``ATOL_FLOAT64`` otherwise.
    """

    name: str
    inputs: Mapping[str, np.ndarray]
    expected: np.ndarray
    hint: str
    rtol: float | None = None
    atol: float | None = None

    def tolerances(self) -> tuple[float, float]:
        """Return ``(rtol, atol)`` for this case."""
        low = any(np.asarray(v).dtype == np.float32 for v in self.inputs.values())
        rtol = self.rtol if self.rtol is not None else (RTOL_FLOAT32 if low else RTOL_FLOAT64)
        atol = self.atol if self.atol is not None else (ATOL_FLOAT32 if low else ATOL_FLOAT64)
        return rtol, atol


@dataclass(frozen=True)
class CaseResult:
    """The outcome of one :class:`Case`, as the report shows it.

    Attributes
    ----------
    name : str
        The case's name.
    passed : bool
        Whether the output matched.
    input, expected, got : str
        The inputs, the expected output and what the function returned (or
        ``"raised ValueError: ..."``), formatted independently of numpy's print
        options.
    problem : str
        What is wrong ("" if passed), including any RuntimeWarning raised.
    hint : str
        What to try ("" if passed).
    """

    name: str
    passed: bool
    input: str
    expected: str
    got: str
    problem: str = ""
    hint: str = ""


@dataclass(frozen=True, repr=False)
class CheckReport:
    """What a ``check_*`` function returns: truthy iff every case passed.

    Attributes
    ----------
    check : str
        Name of the check, e.g. ``"check_softmax"``.
    function : str
        Name of the function that was checked.
    results : tuple of CaseResult
        One per case, in the order they ran.
    """

    check: str
    function: str
    results: tuple[CaseResult, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        """True iff every case passed."""
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> tuple[CaseResult, ...]:
        """The cases that failed."""
        return tuple(r for r in self.results if not r.passed)

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        n = len(self.results)
        head = f"{self.check}({self.function})"
        if self.passed:
            names = ", ".join(r.name for r in self.results)
            count = f"All {n} checks passed" if n != 1 else "The 1 check passed"
            return _wrap(f"{head}: {count}: {names}.", "    ")
        failed = self.failures
        lines = [f"{head}: {n - len(failed)} of {n} checks passed, {len(failed)} failed."]
        first_seen: dict[tuple[str, str], str] = {}
        for r in failed:
            same_as = first_seen.setdefault((r.got, r.problem), r.name)
            if same_as != r.name:  # the same output and problem again: say so briefly
                lines += ["", f'FAILED: {r.name}: same output and problem as "{same_as}"']
                continue
            lines += ["", f"FAILED: {r.name}"]
            for label, text in (
                ("input", r.input),
                ("expected", r.expected),
                ("got", r.got),
                ("problem", r.problem),
                ("hint", r.hint),
            ):
                if text:
                    lines.append(_field(label, text))
        passed = [r.name for r in self.results if r.passed]
        if passed:
            lines += ["", _wrap("Passed: " + ", ".join(passed) + ".", "    ")]
        return "\n".join(lines)

    __str__ = __repr__


@dataclass(frozen=True)
class Finding:
    """A wrong answer recognised by a check's ``diagnose`` function.

    ``problem`` says what is wrong; ``hint``, if not empty, replaces the case's own
    hint (which is written for the failure that case usually provokes).
    """

    problem: str
    hint: str = ""


Diagnose = Callable[[Case, np.ndarray], Sequence[Finding]]


def run_checks(
    fn: Callable[..., npt.ArrayLike],
    cases: Sequence[Case],
    *,
    check_name: str,
    diagnose: Diagnose | None = None,
) -> CheckReport:
    """Run ``fn`` on every case and collect a :class:`CheckReport`.

    Parameters
    ----------
    fn : callable
        The reader's function, called as ``fn(*case.inputs.values())``.
    cases : sequence of Case
        What to run and what to expect.
    check_name : str
        Shown at the top of the report.
    diagnose : callable, optional
        ``diagnose(case, got) -> list of Finding``, called when the output has the
        right shape, no nan or inf, but wrong values; returns the specific problems
        it recognises (e.g. "the sign is flipped"). The generic "values differ" line
        is shown only if it returns none.

    Returns
    -------
    CheckReport

    Raises
    ------
    TypeError
        If ``fn`` is not callable (e.g. the *result* of the function was passed).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import Case, run_checks
    >>> cases = [
    ...     Case(
    ...         "two vectors",
    ...         {"a": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0])},
    ...         np.array([4.0, 6.0]),
    ...         hint="add a and b entry by entry",
    ...     )
    ... ]
    >>> run_checks(np.add, cases, check_name="check_add")
    check_add(add): The 1 check passed: two vectors.
    >>> run_checks(np.subtract, cases, check_name="check_add")
    check_add(subtract): 0 of 1 checks passed, 1 failed.
    <BLANKLINE>
    FAILED: two vectors
        input:    a = [1, 2]
                  b = [3, 4]
        expected: [4, 6]
        got:      [-2, -2]
        problem:  values differ (rtol=1e-06, atol=1e-09): largest difference 8 at index 1
        hint:     add a and b entry by entry
    """
    if not callable(fn):
        raise TypeError(
            f"{check_name} expects your function itself, e.g. {check_name}(my_function), "
            f"not its result; got a {type(fn).__name__}"
        )
    results = tuple(_run_case(fn, case, diagnose) for case in cases)
    return CheckReport(check=check_name, function=_name_of(fn), results=results)


def _run_case(
    fn: Callable[..., npt.ArrayLike], case: Case, diagnose: Diagnose | None
) -> CaseResult:
    """Run one case; never raises because ``fn`` misbehaved."""
    shown_input = "\n".join(f"{k} = {_fmt_array(v, dtype=True)}" for k, v in case.inputs.items())
    expected = np.asarray(case.expected)

    def fail(got: str, problem: str, hint: str = case.hint) -> CaseResult:
        return CaseResult(case.name, False, shown_input, _fmt_array(expected), got, problem, hint)

    args = [np.array(v, copy=True) for v in case.inputs.values()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(divide="warn", over="warn", invalid="warn", under="ignore"):
            try:
                result = fn(*args)
            except Exception as err:
                return fail(
                    f"raised {type(err).__name__}: {_first_line(err)}", "your function raised"
                )
    warned = _warning_text(caught)

    changed = [
        k
        for k, a, v in zip(case.inputs, args, case.inputs.values(), strict=True)
        if not np.array_equal(a, v, equal_nan=True)
    ]
    if result is None:
        return fail("None", "your function returned None; did you forget `return`?", "")
    try:
        got = np.asarray(result)
    except Exception as err:
        return fail(type(result).__name__, f"could not convert it to an array: {err}")
    if got.dtype.kind not in "biuf":
        return fail(
            f"{type(result).__name__} of dtype {got.dtype}",
            "expected an array of real numbers",
        )
    shown_got = _fmt_array(got)
    if got.shape != expected.shape:
        want = "a single number, shape ()" if expected.ndim == 0 else f"shape {expected.shape}"
        return fail(shown_got, f"expected {want}, got shape {got.shape}", "")
    if changed:
        names = " and ".join(changed)
        return fail(
            shown_got,
            f"your function changed its input {names} in place",
            "work on a new array (z = z - z.max()) instead of modifying the argument "
            "(z -= z.max()): the caller's logits must stay as they were",
        )
    got = got.astype(np.float64)
    if np.isnan(got).any() and not np.isnan(expected).any():
        return fail(shown_got, _join("the output contains nan", warned))
    rtol, atol = case.tolerances()
    close = np.isclose(got, expected, rtol=rtol, atol=atol)
    if close.all():
        return CaseResult(case.name, True, shown_input, _fmt_array(expected), shown_got)
    bad_inf = np.isinf(got) & np.isfinite(expected)
    if bad_inf.any():
        i = _index_of(bad_inf)
        return fail(
            shown_got,
            _join(f"the output is {_fmt_num(got[i])}{_at(i)} where the answer is finite", warned),
        )
    findings = []
    if diagnose is not None:
        with np.errstate(all="ignore"):  # the reader's output may be huge
            findings = list(diagnose(case, got))
    if not findings:
        diff = np.where(close, 0.0, np.abs(got - expected))
        i = _index_of(diff == diff.max())
        problem = (
            f"values differ (rtol={rtol:g}, atol={atol:g}): largest difference "
            f"{_fmt_num(diff[i])}{_at(i)}"
        )
        return fail(shown_got, _join(problem, warned))
    hint = next((f.hint for f in findings if f.hint), case.hint)
    return fail(shown_got, _join("; ".join(f.problem for f in findings), warned), hint)


def _index_of(mask: np.ndarray) -> tuple[int, ...]:
    """The first index where ``mask`` is True."""
    return tuple(int(k) for k in np.unravel_index(int(np.argmax(mask)), mask.shape))


def _at(index: tuple[int, ...]) -> str:
    if not index:
        return ""
    return f" at index {index[0]}" if len(index) == 1 else f" at index {index}"


def _name_of(fn: Callable[..., object]) -> str:
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


def _first_line(err: BaseException, limit: int = 200) -> str:
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _warning_text(caught: Sequence[warnings.WarningMessage]) -> str:
    """The distinct RuntimeWarnings (numpy's overflow, 0/0, log 0, ...) in order."""
    seen: list[str] = []
    for w in caught:
        if issubclass(w.category, RuntimeWarning) and str(w.message) not in seen:
            seen.append(str(w.message))
    return "RuntimeWarning: " + ", ".join(f'"{m}"' for m in seen) if seen else ""


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _fmt_num(v: float) -> str:
    return f"{float(v) + 0.0:.6g}"  # + 0.0 turns -0.0 into 0.0


def _fmt_vector(v: np.ndarray) -> str:
    items = [_fmt_num(float(a)) for a in v]
    if len(items) > _MAX_SHOWN:
        items = [*items[:6], "...", *items[-3:]]
    return "[" + ", ".join(items) + "]"


def _fmt_array(a: npt.ArrayLike, *, dtype: bool = False) -> str:
    """Format independently of numpy's print options (the reader may change them)."""
    arr = np.asarray(a)
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    if arr.ndim == 0:
        text = _fmt_num(float(arr))
    elif arr.ndim == 1:
        text = _fmt_vector(arr)
    elif arr.ndim == 2 and arr.shape[0] <= _MAX_SHOWN:
        text = "[" + ",\n ".join(_fmt_vector(row) for row in arr) + "]"
    else:
        text = f"an array of shape {arr.shape}"
    if dtype and arr.dtype != np.float64:
        text += f" ({arr.dtype})"
    return text


def _field(label: str, text: str) -> str:
    """``    label:    text`` with continuation lines aligned under the text."""
    prefix = f"    {label + ':':<10}"
    indent = " " * len(prefix)
    lines = text.split("\n")
    if len(lines) == 1:  # prose: wrap it
        return _wrap(prefix + text, indent)
    return prefix + ("\n" + indent).join(lines)


def _wrap(text: str, indent: str) -> str:
    return textwrap.fill(
        text, _WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )


# ---------------------------------------------------------------------------
# Chapter 1: softmax and friends
# ---------------------------------------------------------------------------

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

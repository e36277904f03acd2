"""The core of the self-checks: cases, running them, and the report (see the package docstring)."""

from __future__ import annotations

import dataclasses
import textwrap
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = [
    "ERROR",
    "FAILED",
    "NOT_ATTEMPTED",
    "PASSED",
    "Case",
    "CaseResult",
    "CheckReport",
    "Finding",
    "SelfCheckResult",
    "run_checks",
    "run_self_check",
]

# What a check decided, for people and for the grader (``CheckReport.status``,
# ``SelfCheckResult.status``).
PASSED = "passed"
FAILED = "failed"
NOT_ATTEMPTED = "not attempted"  # the reader's function is still a starting cell
ERROR = "error"  # the check could not run the reader's function at all

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
    raised : str
        The name of the exception the function raised (e.g. ``"NotImplementedError"``),
        or "" if it returned.
    """

    name: str
    passed: bool
    input: str
    expected: str
    got: str
    problem: str = ""
    hint: str = ""
    raised: str = ""


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
        """True iff every case passed (and there was at least one)."""
        return bool(self.results) and all(r.passed for r in self.results)

    @property
    def failures(self) -> tuple[CaseResult, ...]:
        """The cases that failed."""
        return tuple(r for r in self.results if not r.passed)

    @property
    def not_attempted(self) -> bool:
        """True iff the function raised ``NotImplementedError`` on every case: it is still
        the starting cell of the student edition."""
        return bool(self.results) and all(r.raised == "NotImplementedError" for r in self.results)

    @property
    def status(self) -> str:
        """``"passed"``, ``"failed"`` or ``"not attempted"`` (see :attr:`not_attempted`)."""
        if self.not_attempted:
            return NOT_ATTEMPTED
        return PASSED if self.passed else FAILED

    @property
    def message(self) -> str:
        """One line for a table of results: "" if passed, else what went wrong first."""
        if self.not_attempted:
            return f"{self.function} raises NotImplementedError: not attempted yet"
        if self.passed:
            return ""
        first = self.failures[0]
        if first.raised:  # got: "raised ValueError: ..."
            return f"{first.name}: your function {first.got}"
        return f"{first.name}: {first.problem}"

    def to_dict(self) -> dict[str, str | int]:
        """The verdict as plain data (JSON-serialisable), for the grader."""
        return {
            "check": self.check,
            "function": self.function,
            "status": self.status,
            "message": self.message,
            "passed": len(self.results) - len(self.failures),
            "total": len(self.results),
        }

    def __bool__(self) -> bool:
        return self.passed

    def _ipython_display_(self) -> None:
        """Show the report, unless the check already showed it in this cell.

        In a notebook every ``check_*`` call shows its report where it runs (inside a
        loop too; see :func:`helpers.checks.notebook.shown_where_called`). When the call
        is also the cell's last line, IPython asks to show the value again: that second
        showing is skipped. The same report shown from a later cell appears as usual.
        """
        from helpers.checks.notebook import already_shown, show

        if not already_shown(self):
            show(self)

    def __repr__(self) -> str:
        n = len(self.results)
        head = f"{self.check}({self.function})"
        if self.not_attempted:
            return "\n".join(
                [
                    f"{head}: not attempted yet ({self.function} raises NotImplementedError).",
                    _wrap(
                        "    Write its body in place of the `raise NotImplementedError` line, "
                        f"run that cell, then run this check again: {n} cases are waiting.",
                        "    ",
                    ),
                ]
            )
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


@dataclass(frozen=True)
class SelfCheckResult:
    """The verdict of :func:`run_self_check`: one exercise of one student.

    Attributes
    ----------
    check : str
        The check's name, e.g. ``"check_softmax"``.
    function : str
        The name that was looked up, e.g. ``"my_softmax"``.
    status : str
        ``"passed"``, ``"failed"``, ``"not attempted"`` or ``"error"``.
    message : str
        "" if passed; otherwise one line saying what went wrong first.
    report : CheckReport or None
        The check's full report (None if the check could not run).
    """

    check: str
    function: str
    status: str
    message: str
    report: CheckReport | None = None

    def to_dict(self) -> dict[str, str | int]:
        """The verdict as plain data (JSON-serialisable), without the full report."""
        counts = self.report.to_dict() if self.report is not None else {}
        return {
            "check": self.check,
            "function": self.function,
            "status": self.status,
            "message": self.message,
            "passed": int(counts.get("passed", 0)),
            "total": int(counts.get("total", 0)),
        }


def run_self_check(
    check: Callable[[Callable[..., object]], CheckReport] | str,
    namespace: Mapping[str, object],
    name: str,
) -> SelfCheckResult:
    """Run a self-check on the function called ``name`` in ``namespace``; never raise.

    For graders: ``namespace`` is the global namespace of an executed notebook. A name
    that is not defined there, or a function that raises ``NotImplementedError`` on every
    case (the student edition's starting cell), is "not attempted"; a check that cannot
    run at all (e.g. the name is bound to something that is not a function) is an
    "error"; otherwise the check's report decides: "passed" or "failed".

    Parameters
    ----------
    check : callable or str
        A ``check_*`` function of :mod:`helpers.checks`, or its name.
    namespace : mapping
        Where to look the reader's function up, e.g. ``globals()``.
    name : str
        The function's name, e.g. ``"my_softmax"``.

    Returns
    -------
    SelfCheckResult

    Examples
    --------
    >>> from helpers.checks import run_self_check
    >>> def my_softmax(z):
    ...     raise NotImplementedError
    >>> run_self_check("check_softmax", {"my_softmax": my_softmax}, "my_softmax").status
    'not attempted'
    >>> run_self_check("check_softmax", {}, "my_softmax").message
    'my_softmax is not defined: not attempted'
    >>> import numpy as np
    >>> def my_softmax(z):
    ...     e = np.exp(z - z.max())
    ...     return e / e.sum()
    >>> result = run_self_check("check_softmax", {"my_softmax": my_softmax}, "my_softmax")
    >>> result.status, result.message, result.to_dict()["total"] == result.to_dict()["passed"]
    ('passed', '', True)
    """
    if isinstance(check, str):
        import helpers.checks

        check_name = check
        found = getattr(helpers.checks, check, None)
        if not check_name.startswith("check_") or not callable(found):
            return SelfCheckResult(check_name, name, ERROR, f"no self-check named {check_name!r}")
        check = found
    else:
        check_name = _name_of(check)
    if name not in namespace:
        return SelfCheckResult(
            check_name, name, NOT_ATTEMPTED, f"{name} is not defined: not attempted"
        )
    try:
        report = check(namespace[name])  # type: ignore[arg-type]
    except Exception as err:
        message = f"{check_name} raised {type(err).__name__}: {_first_line(err)}"
        return SelfCheckResult(check_name, name, ERROR, message)
    return SelfCheckResult(check_name, name, report.status, report.message, report)


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
                return dataclasses.replace(
                    fail(
                        f"raised {type(err).__name__}: {_first_line(err)}", "your function raised"
                    ),
                    raised=type(err).__name__,
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

"""The core of the self-checks: cases, running them, and the report (see the package docstring).

What a report says when a case fails, in this order: the smallest failing input, what was
expected of it (the value, and in ``Case.hint`` the property or value that decides it),
what came back, the slip when a check's table of slips recognises it (``Finding``), and a
pointer to the section of the book that decides it (``see``, made by :func:`section`).
Never the code or the formula of the answer: a fuller hint (``more``) is shown only when
the reader asks for it, ``check_x(fn, hint=True)``, and it too stops short of the answer.

A function that calls the book's own implementation of the quantity a check grades (the
dotted names of :data:`IMPLEMENTATIONS`) is reported as not attempted, whatever its
output: :mod:`helpers.checks.shortcuts` watches for those calls while it runs.
"""

from __future__ import annotations

import dataclasses
import math
import reprlib
import textwrap
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from helpers.checks.shortcuts import public_names, watching
from helpers.i18n import get_language, join, localize, msg, width
from helpers.i18n import wrap as _wrap_wide

__all__ = [
    "ERROR",
    "FAILED",
    "IMPLEMENTATIONS",
    "NOT_ATTEMPTED",
    "PASSED",
    "SECTIONS",
    "Case",
    "CaseResult",
    "CheckReport",
    "Finding",
    "SelfCheckResult",
    "explain",
    "nan_aware",
    "recognise",
    "run_checks",
    "run_self_check",
    "section",
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
_MAX_CONVERTED = 10**6  # a list of the wrong shape with more numbers is not converted


# ---------------------------------------------------------------------------
# The book's own implementations of what each check grades
# ---------------------------------------------------------------------------

_SDPA = "helpers.attention.scaled_dot_product_attention"
_FLASH = ("helpers.flash.flash_attention", "helpers.flash._forward", "helpers.flash._forward_rows")
_SOFTMAX = "helpers.softmax.softmax"
_LINEAR = (
    "helpers.linear_attention.linear_attention",
    "helpers.linear_attention._kernel_attention",
)

#: For each self-check, the functions of :mod:`helpers` that compute the quantity it
#: grades (dotted names, the module where each is defined; private delegates that compute
#: the whole quantity are listed too). A reader's function that calls any of them, by any
#: route (an alias, ``getattr``, a wrapper, ``functools.partial``), is "not attempted":
#: the exercise asks the reader to write that quantity, and the book's version is not an
#: answer. Other helpers stay allowed (``helpers.softmax`` inside an attention exercise,
#: ``helpers.attention_backward`` in exercise 2.5, which its statement allows). Where an
#: exercise's statement asks for a part to be written by hand ("a softmax you write
#: yourself"), the helper computing that part is listed. An empty tuple: no helper
#: computes it. Graders read this table too: it is plain data (check name -> dotted names),
#: and :func:`helpers.checks.shortcuts.watching` needs nothing else.
IMPLEMENTATIONS: Mapping[str, tuple[str, ...]] = {
    # chapter 1
    "check_softmax": (_SOFTMAX, "helpers.softmax.log_softmax", "helpers.softmax.logsumexp"),
    "check_log_softmax": ("helpers.softmax.log_softmax", "helpers.softmax.logsumexp"),
    "check_logsumexp": ("helpers.softmax.logsumexp",),
    "check_softmax_jacobian": ("helpers.softmax.softmax_jacobian",),
    "check_softmax_temperature": (_SOFTMAX, "helpers.softmax.log_softmax"),
    "check_log_softmax_backward": (),
    "check_entropy": ("helpers.softmax.entropy",),
    # chapter 2
    "check_attention": (_SDPA, *_FLASH),
    "check_masked_attention": (_SDPA, *_FLASH),
    "check_causal_mask": ("helpers.masks.causal_mask",),
    "check_kernel_attention": (_SDPA, _SOFTMAX),  # "with a softmax you write yourself"
    # "build the batch's mask yourself ... and write the masked softmax yourself"
    "check_left_padded_attention": (_SDPA, *_FLASH, "helpers.masks.padding_mask", _SOFTMAX),
    "check_attention_grad": (
        "helpers.attention.attention_backward",
        "helpers.flash.flash_attention_backward",
    ),
    "check_self_attention_grad": ("helpers.multihead.multi_head_attention_backward",),
    # chapter 3
    "check_multi_head_attention": (
        "helpers.multihead.multi_head_attention",
        "helpers.multihead.grouped_query_attention",
        "helpers.multihead._forward",
    ),
    "check_mha_parameter_count": ("helpers.multihead.mha_parameter_count",),
    "check_mha_backward": ("helpers.multihead.multi_head_attention_backward",),
    # chapter 4
    "check_sinusoidal_encoding": ("helpers.positional.sinusoidal_encoding",),
    "check_sinusoidal_shift": ("helpers.positional.sinusoidal_shift",),
    "check_concatenated_shift": ("helpers.positional.sinusoidal_shift",),
    "check_rope": ("helpers.positional.rope", "helpers.positional.rotate_pairs"),
    "check_rope_half": ("helpers.positional.rope", "helpers.positional.rotate_pairs"),
    "check_rope_layout_conversion": (),
    "check_rope_layout_inverse": (),
    "check_position_from_encoding": (),  # no helper decodes an encoding
    "check_alibi_slopes": (
        "helpers.positional.alibi_slopes",
        "helpers.positional.alibi_bias",
        "helpers.positional._geometric_slopes",
    ),
    # chapter 5
    "check_online_softmax_merge": ("helpers.flash.online_softmax_merge",),
    "check_tiled_attention": _FLASH,
    "check_flash1_update": (),
    "check_causal_linear_attention": _LINEAR,
    "check_chunked_linear_attention": _LINEAR,
    "check_kv_cache_bytes": ("helpers.cost.kv_cache_bytes", "helpers.multihead.kv_cache_elements"),
    # chapter 6
    "check_layer_norm": ("helpers.transformer.layer_norm", "helpers.transformer._ln_forward"),
    "check_layer_norm_backward": (
        "helpers.transformer.layer_norm_backward",
        "helpers.transformer.layer_norm_jacobian",
        "helpers.transformer._ln_backward",
    ),
    "check_rms_norm_backward": (),
    "check_fold_layer_norm": (),  # no helper folds a layer norm into a layer
    "check_block_parameter_count": ("helpers.transformer.block_parameter_count",),
    "check_llama_block_parameter_count": (),
    "check_encoder_block": ("helpers.transformer.encoder_block",),
    # chapter 7
    "check_mlm_corruption": ("helpers.models.mlm_corrupt",),
    "check_top_k_gating": ("helpers.moe.top_k_gating",),
    "check_load_balancing_loss": ("helpers.moe.load_balancing_loss",),
    "check_next_token_distribution": (
        "helpers.models.next_token_distribution",
        "helpers.models.sample_next_token",
    ),
    "check_beam_search": ("helpers.models.beam_search",),
    # chapter 8
    "check_previous_token_score": ("helpers.circuits.previous_token_score",),
    "check_prefix_matching_score": (
        "helpers.circuits.prefix_matching_score",
        "helpers.circuits._prefix_targets",
    ),
    "check_k_composition_score": (
        "helpers.circuits.composition_score",
        "helpers.circuits.k_composition_scores",
    ),
    # chapter 9
    "check_min_head_width": ("helpers.theory.min_head_width",),
    "check_self_attention_jacobian": ("helpers.theory.self_attention_jacobian",),
    "check_truncated_attention": ("helpers.theory.truncated_attention",),
}


# ---------------------------------------------------------------------------
# Pointers into the book, as the reader sees it
# ---------------------------------------------------------------------------

#: Every (chapter, section title) a report points to; tests/test_checks_pointers.py checks
#: that each is a heading of that chapter, so a renamed section cannot leave a stale pointer.
SECTIONS: set[tuple[int, str]] = set()


def section(chapter: int, title: str) -> str:
    """A pointer to a section as the reader sees it: ``chapter 2, "Masks"``.

    Reports point to sections by their titles, never by an internal label or an equation
    number (both change when the book is edited). The pair is recorded in :data:`SECTIONS`.

    Examples
    --------
    >>> section(2, "Masks")
    'chapter 2, "Masks"'
    """
    SECTIONS.add((chapter, title))
    return msg('chapter {chapter}, "{title}"', chapter=chapter, title=title)


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
        Shown when this case fails and no slip is recognised: what this case expects (a
        property, a value: "equal logits get equal probabilities", "a query with no key
        gets output 0") and, where it helps, the section that decides it
        (:func:`section`). Never the answer's code or formula.
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
    calls : tuple of str
        The book's own implementations of the checked quantity that the function called
        on this case (dotted names, see :data:`IMPLEMENTATIONS`).
    size : int
        The number of numbers in the case's inputs: the report shows the smallest
        failing case first.
    """

    name: str
    passed: bool
    input: str
    expected: str
    got: str
    problem: str = ""
    hint: str = ""
    raised: str = ""
    calls: tuple[str, ...] = ()
    size: int = 0


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
    see : str
        Where the book decides what the check grades (:func:`section`), shown under the
        failures.
    more : str
        A fuller hint, shown under the failures only if ``hinted``; otherwise the report
        says how to ask for it.
    hinted : bool
        Whether the reader asked for the fuller hint (``check_x(fn, hint=True)``).
    """

    check: str
    function: str
    results: tuple[CaseResult, ...] = field(default_factory=tuple)
    see: str = ""
    more: str = ""
    hinted: bool = False

    @property
    def book_calls(self) -> tuple[str, ...]:
        """The book's implementations of the checked quantity that the function called
        (dotted names, see :data:`IMPLEMENTATIONS`), private delegates left out."""
        return tuple(public_names(name for r in self.results for name in r.calls))

    @property
    def passed(self) -> bool:
        """True iff every case passed (and there was at least one) without calling the
        book's own implementation (:attr:`book_calls`)."""
        return bool(self.results) and all(r.passed for r in self.results) and not self.book_calls

    @property
    def failures(self) -> tuple[CaseResult, ...]:
        """The cases that failed, the smallest input first (ties in the order they ran)."""
        failed = [r for r in self.results if not r.passed]
        return tuple(sorted(failed, key=lambda r: r.size))

    @property
    def not_attempted(self) -> bool:
        """True iff the function raised ``NotImplementedError`` on every case: it is still
        the starting cell of the student edition."""
        return bool(self.results) and all(r.raised == "NotImplementedError" for r in self.results)

    @property
    def status(self) -> str:
        """``"passed"``, ``"failed"`` or ``"not attempted"``.

        Not attempted: the function still raises ``NotImplementedError`` (see
        :attr:`not_attempted`), or it calls the book's own implementation of what the
        check grades (see :attr:`book_calls`), whatever it returns.
        """
        if self.not_attempted or self.book_calls:
            return NOT_ATTEMPTED
        return PASSED if self.passed else FAILED

    @property
    def message(self) -> str:
        """One line for a table of results: "" if passed, else what went wrong first (in
        the smallest failing case); in the language set."""
        return localize(self._message())

    def _message(self) -> str:
        if self.not_attempted:
            return msg(
                "{function} raises NotImplementedError: not attempted yet", function=self.function
            )
        if self.book_calls:
            return msg(
                "this calls {names}, the book's own version: the exercise asks you to write it",
                names=_names(self.book_calls),
            )
        if self.passed:
            return ""
        first = self.failures[0]
        if first.raised:  # got: "raised ValueError: ..."
            return msg("{name}: your function {got}", name=first.name, got=first.got)
        return msg("{name}: {problem}", name=first.name, problem=first.problem)

    def to_dict(self) -> dict[str, str | int]:
        """The verdict as plain data (JSON-serialisable), for the grader.

        ``book_calls`` is "" or the book's implementations the function called, joined
        by ", " (the status is then "not attempted").
        """
        return {
            "check": self.check,
            "function": self.function,
            "status": self.status,
            "message": self.message,
            "passed": len(self.results) - len(self.failures),
            "total": len(self.results),
            "book_calls": ", ".join(self.book_calls),
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
        if self.book_calls:
            return _wrap(
                msg(
                    "{head}: not attempted: it calls {names}, the book's own version of what "
                    "this check grades. The exercise asks you to write it: replace that call "
                    "by your own computation, then run this check again.",
                    head=head,
                    names=_names(self.book_calls),
                ),
                "    ",
            )
        if self.not_attempted:
            return "\n".join(
                localize(line)
                for line in [
                    msg(
                        "{head}: not attempted yet ({function} raises NotImplementedError).",
                        head=head,
                        function=self.function,
                    ),
                    _wrap(
                        msg(
                            "    Write its body in place of the `raise NotImplementedError` line, "
                            "run that cell, then run this check again: {n} cases are waiting.",
                            n=n,
                        ),
                        "    ",
                    ),
                ]
            )
        if self.passed:
            names = join(", ", [r.name for r in self.results])
            count = msg("All {n} checks passed", n=n) if n != 1 else "The 1 check passed"
            return _wrap(
                msg("{head}: {count}: {names}.", head=head, count=count, names=names), "    "
            )
        failed = self.failures
        lines = [
            msg(
                "{head}: {value} of {n} checks passed, {n_failed} failed.",
                head=head,
                value=n - len(failed),
                n=n,
                n_failed=len(failed),
            )
        ]
        first_seen: dict[tuple[str, str], str] = {}
        slip_seen: dict[tuple[str, str], str] = {}
        shown_differ = False
        for r in failed:
            same_as = first_seen.setdefault((r.got, r.problem), r.name)
            if same_as != r.name:  # the same output and problem again: say so briefly
                lines += [
                    "",
                    msg(
                        'FAILED: {name}: same output and problem as "{same_as}"',
                        name=r.name,
                        same_as=same_as,
                    ),
                ]
                continue
            if not r.raised and not r.problem.startswith("values differ"):
                same_as = slip_seen.setdefault((r.problem, r.hint), r.name)
                if same_as != r.name:  # the same slip recognised again: say so briefly
                    lines += [
                        "",
                        msg(
                            'FAILED: {name}: the same problem as "{same_as}"',
                            name=r.name,
                            same_as=same_as,
                        ),
                    ]
                    continue
            elif r.problem.startswith("values differ") and shown_differ:
                # no slip recognised: the smallest such case is shown whole, the others
                # by what differs and what the case expects
                lines += [
                    "",
                    _wrap(msg("FAILED: {name}: {problem}", name=r.name, problem=r.problem), "    "),
                ]
                if r.hint:
                    lines.append(_field(msg("hint"), r.hint))
                continue
            shown_differ = shown_differ or r.problem.startswith("values differ")
            lines += ["", msg("FAILED: {name}", name=r.name)]
            for label, text in (
                (msg("input"), r.input),
                (msg("expected"), r.expected),
                (msg("got"), r.got),
                (msg("problem"), r.problem),
                (msg("hint"), r.hint),
            ):
                if text:
                    lines.append(_field(label, text))
        passed = [r.name for r in self.results if r.passed]
        if passed:
            lines += ["", _wrap(msg("Passed: {names}.", names=join(", ", passed)), "    ")]
        if self.see:
            lines += ["", _wrap(msg("See {see}.", see=self.see), "    ")]
        if self.more and self.hinted:
            more = self.more if self.more.endswith(".") else msg("{more}.", more=self.more)
            lines += ["", _wrap(msg("Fuller hint: {more}", more=more), "    ")]
        elif self.more:
            lines += [
                "",
                _wrap(
                    msg(
                        "A fuller hint: {check}({function}, hint=True).",
                        check=self.check,
                        function=self.function,
                    ),
                    "    ",
                ),
            ]
        return "\n".join(localize(line) for line in lines)

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


def nan_aware(diagnose: Diagnose) -> Diagnose:
    """Mark ``diagnose`` as one that may also be called on an output containing nan.

    By default a diagnosis runs only on finite outputs; one whose table of slips holds
    answers with nan (a 0/0 that a slip produces), compared entry by entry with nan equal
    to nan, can name that slip instead of the generic "the output contains nan".
    """
    diagnose.nan_aware = True  # type: ignore[attr-defined]
    return diagnose


def run_checks(
    fn: Callable[..., npt.ArrayLike],
    cases: Sequence[Case],
    *,
    check_name: str,
    diagnose: Diagnose | None = None,
    see: str = "",
    more: str = "",
    hint: bool = False,
) -> CheckReport:
    """Run ``fn`` on every case and collect a :class:`CheckReport`.

    Parameters
    ----------
    fn : callable
        The reader's function, called as ``fn(*case.inputs.values())``. While it runs,
        calls into the book's implementations that :data:`IMPLEMENTATIONS` declares for
        ``check_name`` are recorded (``CaseResult.calls``).
    cases : sequence of Case
        What to run and what to expect.
    check_name : str
        Shown at the top of the report; also the key of :data:`IMPLEMENTATIONS`.
    diagnose : callable, optional
        ``diagnose(case, got) -> list of Finding``, called when the output has the
        right shape, no nan or inf, but wrong values; returns the specific problems
        it recognises (e.g. "the sign is flipped"). The generic "values differ" line
        is shown only if it returns none.
    see : str, optional
        Where the book decides it (:func:`section`), shown under the failures.
    more : str, optional
        A fuller hint, shown under the failures when ``hint`` is true; it stops short of
        the answer.
    hint : bool, default False
        Whether the reader asked for the fuller hint.

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
    ...         hint="the order of a and b does not matter",
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
        hint:     the order of a and b does not matter
    """
    if not callable(fn):
        raise TypeError(
            localize(
                msg(
                    "{check_name} expects your function itself, e.g. "
                    "{check_name}(my_function), not its result; got a {type}",
                    check_name=check_name,
                    type=type(fn).__name__,
                )
            )
        )
    watched = IMPLEMENTATIONS.get(check_name, ())
    results = tuple(_run_case(fn, case, diagnose, watched) for case in cases)
    return CheckReport(
        check=check_name,
        function=_name_of(fn),
        results=results,
        see=see,
        more=more,
        hinted=hint,
    )


def explain(
    report: CheckReport, *, see: str = "", more: str = "", hint: bool = False
) -> CheckReport:
    """``report`` with its pointer, its fuller hint and whether the reader asked for it.

    For checks that assemble their report from several :func:`run_checks` calls; see
    :func:`run_checks` for the three arguments.
    """
    return dataclasses.replace(report, see=see, more=more, hinted=hint)


def recognise(
    got: np.ndarray,
    slips: Sequence[tuple[np.ndarray, Finding]],
    *,
    rtol: float = 1e-6,
    atol: float = 1e-9,
) -> list[Finding]:
    """The finding of the first slip whose answer equals ``got``, as a list of 0 or 1.

    A check's table of slips is a list of ``(what the slip gives, Finding)``; a candidate
    of another shape never matches, and nan matches nan.
    """
    with np.errstate(all="ignore"):
        for candidate, finding in slips:
            candidate = np.asarray(candidate, dtype=np.float64)
            if candidate.shape == got.shape and np.allclose(
                got, candidate, rtol=rtol, atol=atol, equal_nan=True
            ):
                return [finding]
    return []


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
        ``"passed"``, ``"failed"``, ``"not attempted"`` or ``"error"``. "Not attempted"
        covers a name not defined, a function that still raises ``NotImplementedError``,
        and a function that calls the book's own implementation of what the check grades
        (``report.book_calls`` says which; the message names it).
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
            "book_calls": str(counts.get("book_calls", "")),
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
            return SelfCheckResult(
                check_name,
                name,
                ERROR,
                localize(msg("no self-check named {check_name!r}", check_name=check_name)),
            )
        check = found
    else:
        check_name = _name_of(check)
    if name not in namespace:
        return SelfCheckResult(
            check_name,
            name,
            NOT_ATTEMPTED,
            localize(msg("{name} is not defined: not attempted", name=name)),
        )
    try:
        report = check(namespace[name])  # type: ignore[arg-type]
    except Exception as err:
        message = msg(
            "{check_name} raised {type}: {first_line}",
            check_name=check_name,
            type=type(err).__name__,
            first_line=_first_line(err),
        )
        return SelfCheckResult(check_name, name, ERROR, localize(message))
    return SelfCheckResult(check_name, name, report.status, report.message, report)


def _run_case(
    fn: Callable[..., npt.ArrayLike],
    case: Case,
    diagnose: Diagnose | None,
    watched: Sequence[str] = (),
) -> CaseResult:
    """Run one case; never raises because ``fn`` misbehaved."""
    shown_input = join(
        "\n",
        [msg("{k} = {v}", k=k, v=_fmt_array(v, dtype=True)) for k, v in case.inputs.items()],
    )
    expected = np.asarray(case.expected)
    calls: list[str] = []
    size = sum(int(np.size(v)) for v in case.inputs.values())

    def fail(got: str, problem: str, hint: str = case.hint) -> CaseResult:
        return CaseResult(
            case.name,
            False,
            shown_input,
            _fmt_array(expected),
            got,
            problem,
            hint,
            calls=tuple(calls),
            size=size,
        )

    args = [np.array(v, copy=True) for v in case.inputs.values()]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(divide="warn", over="warn", invalid="warn", under="ignore"):
            with watching(watched) as called:
                try:
                    result = fn(*args)
                except Exception as err:
                    error = err
                else:
                    error = None
            calls.extend(called)
            if error is not None:
                return dataclasses.replace(
                    fail(
                        msg(
                            "raised {type}: {first_line}",
                            type=type(error).__name__,
                            first_line=_first_line(error),
                        ),
                        "your function raised",
                    ),
                    raised=type(error).__name__,
                )
    warned = _warning_text(caught)

    changed = [
        k
        for k, a, v in zip(case.inputs, args, case.inputs.values(), strict=True)
        if not np.array_equal(a, v, equal_nan=True)
    ]
    if result is None:
        return fail("None", "your function returned None; did you forget `return`?", "")
    nested = _nested_shape(result)
    if nested != expected.shape and math.prod(nested) > _MAX_CONVERTED:
        # a huge list of the wrong shape: converting it to an array would take seconds
        return fail(
            msg("a {type} of shape {nested}", type=type(result).__name__, nested=nested),
            msg(
                "expected {shape_text}, got shape {nested}",
                shape_text=_shape_text(expected),
                nested=nested,
            ),
            "",
        )
    try:
        got = np.asarray(result)
    except Exception as err:
        return fail(type(result).__name__, msg("could not convert it to an array: {err}", err=err))
    if got.dtype.kind not in "biuf":
        return fail(
            msg("{type} of dtype {got_dtype}", type=type(result).__name__, got_dtype=got.dtype),
            "expected an array of real numbers",
        )
    shown_got = _fmt_array(got)
    if got.shape != expected.shape:
        return fail(
            shown_got,
            msg(
                "expected {shape_text}, got shape {got_shape}",
                shape_text=_shape_text(expected),
                got_shape=got.shape,
            ),
            "",
        )
    if changed:
        names = " and ".join(changed)
        return fail(
            shown_got,
            msg("your function changed its input {names} in place", names=names),
            "the caller's arrays must stay as they were: compute new arrays rather than "
            "writing into an argument",
        )
    got = got.astype(np.float64)
    if np.isnan(got).any() and not np.isnan(expected).any():
        # a table of slips that compares nan with nan may name the slip that gives nan
        nan_aware = getattr(diagnose, "nan_aware", False)
        nan_findings = _diagnosed(diagnose, case, got) if nan_aware else []
        if nan_findings:
            hint = next((f.hint for f in nan_findings if f.hint), case.hint)
            problems = join("; ", [f.problem for f in nan_findings])
            return fail(shown_got, _join(problems, warned), hint)
        return fail(shown_got, _join("the output contains nan", warned))
    rtol, atol = case.tolerances()
    close = np.isclose(got, expected, rtol=rtol, atol=atol)
    if close.all():
        return CaseResult(
            case.name,
            True,
            shown_input,
            _fmt_array(expected),
            shown_got,
            calls=tuple(calls),
            size=size,
        )
    bad_inf = np.isinf(got) & np.isfinite(expected)
    if bad_inf.any():
        i = _index_of(bad_inf)
        return fail(
            shown_got,
            _join(
                msg(
                    "the output is {got}{at} where the answer is finite",
                    got=_fmt_num(got[i]),
                    at=_at(i),
                ),
                warned,
            ),
        )
    findings = _diagnosed(diagnose, case, got)
    if not findings:
        diff = np.where(close, 0.0, np.abs(got - expected))
        i = _index_of(diff == diff.max())
        problem = msg(
            "values differ (rtol={rtol:g}, atol={atol:g}): largest difference {diff}{at}",
            rtol=rtol,
            atol=atol,
            diff=_fmt_num(diff[i]),
            at=_at(i),
        )
        if not got.any() and expected.any():
            problem = join("; ", [problem, "every entry is 0" if got.size > 1 else "it is 0"])
        return fail(shown_got, _join(problem, warned))
    hint = next((f.hint for f in findings if f.hint), case.hint)
    return fail(shown_got, _join(join("; ", [f.problem for f in findings]), warned), hint)


def _diagnosed(diagnose: Diagnose | None, case: Case, got: np.ndarray) -> list[Finding]:
    """The slips ``diagnose`` recognises in ``got`` ([] without a table of slips)."""
    if diagnose is None:
        return []
    with np.errstate(all="ignore"):  # the reader's output may be huge, or nan
        return list(diagnose(case, got))


def _shape_text(expected: np.ndarray) -> str:
    return (
        "a single number, shape ()"
        if expected.ndim == 0
        else msg("shape {expected_shape}", expected_shape=expected.shape)
    )


def _nested_shape(value: object) -> tuple[int, ...]:
    """The shape a list of lists would have as an array, read off its first elements
    without converting it (``()`` for anything that is not a list or a tuple)."""
    shape: list[int] = []
    while isinstance(value, (list, tuple)) and len(shape) < 32:
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return tuple(shape)


def _index_of(mask: np.ndarray) -> tuple[int, ...]:
    """The first index where ``mask`` is True."""
    return tuple(int(k) for k in np.unravel_index(int(np.argmax(mask)), mask.shape))


def _at(index: tuple[int, ...]) -> str:
    if not index:
        return ""
    return (
        msg(" at index {index}", index=index[0])
        if len(index) == 1
        else msg(" at index {index}", index=index)
    )


def _names(names: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    names = list(names)
    if len(names) == 1:
        return names[0]
    return msg("{names} and {last}", names=", ".join(names[:-1]), last=names[-1])


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
    return "RuntimeWarning: " + ", ".join(f'"{m}"' for m in seen) if seen else ""  # numpy's words


def _join(*parts: str) -> str:
    return join("; ", [p for p in parts if p])


def _fmt_num(v: float) -> str:
    return f"{float(v) + 0.0:.6g}"  # + 0.0 turns -0.0 into 0.0


def _fmt_vector(v: np.ndarray) -> str:
    """``[a, b, ...]``; a long vector shows its first 6 and last 3 numbers, and only those
    are formatted (a reader's answer may hold millions)."""
    shown = [*v[:6], None, *v[-3:]] if len(v) > _MAX_SHOWN else list(v)
    items = ["..." if a is None else _fmt_num(float(a)) for a in shown]
    return "[" + ", ".join(items) + "]"


def _fmt_array(a: npt.ArrayLike, *, dtype: bool = False) -> str:
    """Format independently of numpy's print options (the reader may change them).

    Only what is shown is formatted: at most 12 rows of at most 10 numbers, whatever the
    array's size. Booleans show as 0 and 1 (dtype int64).
    """
    arr = np.asarray(a)
    shown_dtype = np.dtype(np.int64) if arr.dtype.kind == "b" else arr.dtype
    if arr.ndim == 0:
        text = _fmt_num(float(arr))
    elif arr.ndim == 1:
        text = _fmt_vector(arr)
    elif arr.ndim == 2 and arr.shape[0] <= _MAX_SHOWN:
        text = "[" + ",\n ".join(_fmt_vector(row) for row in arr) + "]"
    else:
        text = msg("an array of shape {arr_shape}", arr_shape=arr.shape)
    if dtype and shown_dtype != np.float64:
        text = msg("{text} ({dtype})", text=text, dtype=shown_dtype)
    return text


class _ShortRepr(reprlib.Repr):
    """``reprlib``'s bounded repr, with arrays shown as the report shows them."""

    def repr_ndarray(self, x: np.ndarray, level: int) -> str:
        if x.ndim <= 1 and x.size <= _MAX_SHOWN:
            return msg("array({x})", x=_fmt_array(x))
        return msg("an array of shape {x_shape}", x_shape=x.shape)


def _short_repr(value: object, limit: int = 80) -> str:
    """At most ``limit`` characters saying what ``value`` is, formatting only what is shown
    (``repr`` of a huge list, or of an array under the reader's print options, would
    format every element)."""
    repr_ = _ShortRepr()
    repr_.maxstring = repr_.maxother = limit
    with np.printoptions(threshold=_MAX_SHOWN, edgeitems=3):  # other array-likes
        text = repr_.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _field(label: str, text: str) -> str:
    """``    label:    text`` with continuation lines aligned under the text (both in the
    language set)."""
    label = localize(label) + ":"
    prefix = "    " + label + " " * max(1, 10 - width(label))
    indent = " " * width(prefix)
    lines = localize(text).split("\n")
    text = lines[0]
    if len(lines) == 1:  # prose: wrap it
        return _wrap(prefix + text, indent)
    return prefix + ("\n" + indent).join(lines)


def _wrap(text: str, indent: str) -> str:
    """`text` in the language set, wrapped to the report's width."""
    text = localize(text)
    if get_language() != "en":
        return _wrap_wide(text, _WIDTH, indent)
    return textwrap.fill(
        text, _WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )

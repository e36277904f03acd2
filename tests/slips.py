"""Every check's table of slips, checked against its own cases.

A check names a typical wrong answer by recomputing, for each case, what each listed slip
gives and comparing the reader's answer with those (its table of slips, read by a
recogniser: ``helpers.checks.core.recognise`` or a module's ``_recognise`` or
``_first_match``). Two things can go wrong with such a table, and neither shows in a test
that feeds the check one wrong function at a time:

- **a listed slip passes the check**: on every case where it is listed, what it gives is
  the right answer within the case's tolerances (summing over the wrong axis of a
  symmetric matrix, say), so a reader who makes that slip is told "passed";
- **two listed slips cannot be told apart**: on every case where both are listed, they
  give the same answer, so the report always names the first and never the second.

``slip_problems(check)`` finds both, for any check: it runs the check once on a function
that raises (every case runs, none passes), records each case and its ``diagnose``, then
calls ``diagnose(case, case.expected)`` with the recognisers replaced by ones that record
the table they are handed. A diagnosis that names a slip on the right answer itself is
recorded too (it covers the diagnoses that compare inline, without a recogniser).
``assert_slips_told_apart(check)`` fails with what it found.

    from tests.slips import assert_slips_told_apart

    def test_check_x_slips_are_caught_and_told_apart():
        assert_slips_told_apart(check_x)

``tests/test_checks_slips.py`` runs it on every check of ``helpers.checks``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import itertools
import pkgutil
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

import helpers.checks
from helpers.checks import core


@dataclasses.dataclass
class Entry:
    """One line of a table of slips on one case: what the slip gives, and its name."""

    problem: str  # the finding's problem, numbers replaced by '#' (its identity across cases)
    answer: np.ndarray


@dataclasses.dataclass
class Probe:
    """One case of a check and what its diagnosis saw when handed the right answer."""

    case: core.Case
    tables: list[list[Entry]]  # every table a recogniser was handed
    named_on_the_right_answer: list[str]  # what diagnose(case, expected) returned


def _identity(problem: str) -> str:
    return re.sub(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?", "#", problem)


def _entry(answer: Any, finding: core.Finding) -> Entry:
    with np.errstate(all="ignore"):
        return Entry(_identity(finding.problem), np.asarray(answer, dtype=np.float64))


def _pairs(got, slips, *args, **kwargs) -> list[Entry]:
    """The table of ``recognise(got, [(answer, finding), ...])``."""
    return [_entry(answer, finding) for answer, finding in slips]


def _named(got, candidates, *args, **kwargs) -> list[Entry]:
    """The table of cost's ``_first_match(got, {name: (answer, finding)})``."""
    return [_entry(answer, finding) for answer, finding in candidates.values()]


def _variants(got, slips, answer, text, *args, **kwargs) -> list[Entry]:
    """The table of positional's ``_recognise``: each variant of each kind of slip alone.
    (It also tries them two and three at a time, naming the fewest that fit: a pair is
    not a slip of its own, and two slips that undo each other may well pass.)"""
    with np.errstate(all="ignore"):
        return [
            _entry(answer({kind: variant}), text(kind, variant))
            for kind, variants in slips.items()
            for variant in variants[1:]
        ]


# The recognisers of helpers.checks, by the name a module binds them to: how to read the
# table out of their arguments.
RECOGNISERS: dict[str, Callable[..., list[Entry]]] = {
    "recognise": _pairs,
    "_first_match": _named,
}


def _check_modules() -> list[Any]:
    return [
        importlib.import_module(f"helpers.checks.{m.name}")
        for m in pkgutil.iter_modules(helpers.checks.__path__)
    ]


@contextlib.contextmanager
def _recording(tables: list[list[Entry]]) -> Iterator[None]:
    """Every recogniser of every module of helpers.checks records its table in ``tables``."""
    saved = []
    for module in _check_modules():
        for name in ("recognise", "_recognise", "_first_match"):
            original = module.__dict__.get(name)
            if not callable(original):
                continue
            if name == "_recognise":  # a list of pairs, or positional's kinds and variants
                reader = _variants if module.__name__.endswith(".positional") else _pairs
            else:
                reader = RECOGNISERS[name]

            def wrapped(*args, _original=original, _reader=reader, **kwargs):
                tables.append(_reader(*args, **kwargs))
                return _original(*args, **kwargs)

            saved.append((module, name, original))
            setattr(module, name, wrapped)
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


def _raises(*args, **kwargs):
    raise RuntimeError("a function that only raises, to see every case of the check")


def probe(check: Callable[..., Any]) -> list[Probe]:
    """Each case of ``check`` that has a diagnosis, with the tables of slips it reads."""
    seen: list[tuple[core.Case, Any]] = []
    original_run_case = core._run_case

    def run_case(fn, case, diagnose, *args, **kwargs):
        if diagnose is not None:
            seen.append((case, diagnose))
        return original_run_case(fn, case, diagnose, *args, **kwargs)

    core._run_case = run_case
    try:
        check(_raises)
    finally:
        core._run_case = original_run_case
    probes = []
    for case, diagnose in seen:
        tables: list[list[Entry]] = []
        expected = np.asarray(case.expected, dtype=np.float64)
        with _recording(tables), np.errstate(all="ignore"):
            named = list(diagnose(case, expected.copy()))
        probes.append(Probe(case, tables, [_identity(f.problem) for f in named]))
    return probes


def _passes(answer: np.ndarray, case: core.Case) -> bool:
    """Whether ``answer`` passes ``case`` as the core decides it (``_run_case``)."""
    expected = np.asarray(case.expected, dtype=np.float64)
    if answer.shape != expected.shape or (np.isnan(answer).any() and not np.isnan(expected).any()):
        return False
    rtol, atol = case.tolerances()
    with np.errstate(all="ignore"):
        return bool(np.isclose(answer, expected, rtol=rtol, atol=atol).all())


# Two answers the recognisers would take for each other: the loosest tolerance any of them
# uses (helpers.checks.attention's 1e-5 / 1e-8), so that no confusion is missed.
SAME_RTOL, SAME_ATOL = 1e-5, 1e-8


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    with np.errstate(all="ignore"):
        return a.shape == b.shape and bool(
            np.allclose(a, b, rtol=SAME_RTOL, atol=SAME_ATOL, equal_nan=True)
        )


def slip_problems(check: Callable[..., Any], probes: Sequence[Probe] | None = None) -> list[str]:
    """What is wrong with ``check``'s tables of slips, one sentence each ([] if nothing).

    A slip is known by its finding's problem (numbers aside). It passes the check when
    it gives the right answer on every case that lists it; two slips cannot be told apart
    when they give the same answer on every case that lists both.
    """
    probes = probe(check) if probes is None else probes
    name = getattr(check, "__name__", repr(check))
    problems = []
    listed: dict[str, list[bool]] = {}  # slip -> for each case listing it: does it pass?
    together: dict[tuple[str, str], list[bool]] = {}  # pair -> for each case: same answer?
    named_right: dict[str, int] = {}
    for p in probes:
        for problem in p.named_on_the_right_answer:
            named_right[problem] = named_right.get(problem, 0) + 1
        for table in p.tables:
            first: dict[str, Entry] = {}
            for entry in table:
                first.setdefault(entry.problem, entry)
                listed.setdefault(entry.problem, []).append(_passes(entry.answer, p.case))
            for a, b in itertools.combinations(first.values(), 2):
                key = (a.problem, b.problem)  # in the order the recogniser tries them
                together.setdefault(key, []).append(_same(a.answer, b.answer))
    for slip, passes in listed.items():
        if all(passes):
            problems.append(
                f"{name}: the slip '{slip}' passes the check: it gives the right answer on "
                f"every case that lists it ({len(passes)})"
            )
    for (a, b), same in together.items():
        if all(same):
            problems.append(
                f"{name}: the slips '{a}' and '{b}' cannot be told apart: they give the "
                f"same answer on every case that lists both ({len(same)}), so the report "
                f"always names the first"
            )
    with_diagnosis = len(probes)
    for slip, n in named_right.items():
        if n == with_diagnosis and slip not in listed:  # (a listed one is reported above)
            problems.append(
                f"{name}: its diagnosis names '{slip}' on the right answer of every case "
                f"({n}): that slip passes the check"
            )
    return problems


def assert_slips_told_apart(check: Callable[..., Any]) -> None:
    """Fail when a listed slip of ``check`` passes it, or two cannot be told apart."""
    problems = slip_problems(check)
    assert not problems, "\n".join(problems)


def slip_count(probes: Sequence[Probe]) -> int:
    """How many different slips the tables of these probes list."""
    return len({e.problem for p in probes for t in p.tables for e in t})

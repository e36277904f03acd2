"""No listed slip passes its check, and no two listed slips are confused (tests/slips.py).

Every check of ``helpers.checks`` is probed; the checks whose diagnosis reads a table of
slips through a recogniser have both properties checked, the others (which recognise
mistakes by a property of the answer: rows that do not sum to 1, say) have their
diagnosis checked to name nothing on the right answer.
"""

from __future__ import annotations

import numpy as np
import pytest

import helpers.checks
from helpers.checks import core
from helpers.checks.core import Case, Finding, run_checks
from tests.slips import assert_slips_told_apart, probe, slip_count, slip_problems

CHECKS = [name for name in helpers.checks.__all__ if name.startswith("check_")]


@pytest.mark.parametrize("name", CHECKS)
def test_no_slip_passes_and_every_two_are_told_apart(name):
    assert_slips_told_apart(getattr(helpers.checks, name))


# Checks whose tables of slips the probe reads (each through a recogniser). If one of them
# stops being read (a recogniser renamed, a diagnosis rewritten inline), the test above
# would pass without looking: this says so.
READ = [
    "check_attention",
    "check_attention_grad",
    "check_beam_search",
    "check_causal_linear_attention",
    "check_causal_mask",
    "check_chunked_linear_attention",
    "check_concatenated_shift",
    "check_flash1_update",
    "check_k_composition_score",
    "check_kernel_attention",
    "check_left_padded_attention",
    "check_load_balancing_loss",
    "check_masked_attention",
    "check_mlm_corruption",
    "check_next_token_distribution",
    "check_online_softmax_merge",
    "check_position_from_encoding",
    "check_prefix_matching_score",
    "check_previous_token_score",
    "check_rope",
    "check_rope_half",
    "check_rope_layout_conversion",
    "check_rope_layout_inverse",
    "check_self_attention_grad",
    "check_sinusoidal_encoding",
    "check_sinusoidal_shift",
    "check_tiled_attention",
    "check_top_k_gating",
]


@pytest.mark.parametrize("name", READ)
def test_the_probe_reads_the_tables_of_slips(name):
    probes = probe(getattr(helpers.checks, name))
    assert slip_count(probes) >= 2, f"{name}: no table of slips was read"


# A check written the way the contributor first wrote one: the mean of each row of
# attention weights, with a table of slips that holds "the wrong axis" (the mean of each
# column). On square weights that are symmetric, the wrong axis gives the right answer.


def _weights(n: int, m: int, seed: int) -> np.ndarray:
    W = np.random.default_rng(seed).random((n, m))
    return W / W.sum(axis=-1, keepdims=True)


def _row_mean_check(inputs, extra_slips=()):
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        (W,) = case.inputs.values()
        slips = [
            (W.mean(axis=0), Finding("the mean over the wrong axis (each column's)")),
            (W.sum(axis=-1), Finding("the sum of each row, not its mean")),
            *[(slip(W), finding) for slip, finding in extra_slips],
        ]
        return core.recognise(got, slips)  # as a module of helpers.checks calls it

    def check_row_means(fn):
        cases = [Case(name, {"W": W}, W.mean(axis=-1), "") for name, W in inputs]
        return run_checks(fn, cases, check_name="check_row_means", diagnose=diagnose)

    return check_row_means


def test_a_slip_that_gives_the_right_answer_on_every_case_is_found():
    symmetric = np.full((3, 3), 1 / 3)  # every row and every column the same
    doubly = np.array([[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.25, 0.25, 0.5]])
    check = _row_mean_check([("uniform", symmetric), ("symmetric", doubly)])
    problems = slip_problems(check)
    assert any(
        "'the mean over the wrong axis (each column's)' passes the check" in p for p in problems
    )
    with pytest.raises(AssertionError, match="passes the check"):
        assert_slips_told_apart(check)
    # a case with rectangular weights tells the wrong axis from the right one
    fixed = _row_mean_check([("uniform", symmetric), ("3 x 4", _weights(3, 4, 0))])
    assert slip_problems(fixed) == []


def test_two_slips_with_the_same_answer_on_every_case_are_found():
    twice = [(lambda W: W.sum(axis=-1), Finding("the row's total instead of its mean"))]
    check = _row_mean_check([("3 x 4", _weights(3, 4, 0)), ("2 x 5", _weights(2, 5, 1))], twice)
    problems = slip_problems(check)
    assert problems == [
        "check_row_means: the slips 'the sum of each row, not its mean' and "
        "'the row's total instead of its mean' cannot be told apart: they give the same "
        "answer on every case that lists both (2), so the report always names the first"
    ]


def test_a_diagnosis_that_names_a_slip_on_the_right_answer_is_found():
    def diagnose(case, got):  # compares inline, with no recogniser to read
        return [Finding("the rows are not normalised")] if got.sum() > 0 else []

    def check_row_means(fn):
        cases = [Case("3 x 4", {"W": _weights(3, 4, 0)}, _weights(3, 4, 0).mean(axis=-1), "")]
        return run_checks(fn, cases, check_name="check_row_means", diagnose=diagnose)

    assert slip_problems(check_row_means) == [
        "check_row_means: its diagnosis names 'the rows are not normalised' on the right "
        "answer of every case (1): that slip passes the check"
    ]


def test_the_probe_leaves_the_recognisers_as_they_were():
    import helpers.checks.attention as attention

    before = (core.recognise, core._run_case, attention._recognise)
    probe(helpers.checks.check_attention)
    assert (core.recognise, core._run_case, attention._recognise) == before

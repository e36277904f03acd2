"""Tests of chapter 7's self-checks: right answers pass, typical wrong answers are named."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.checks import (
    check_beam_search,
    check_load_balancing_loss,
    check_mlm_corruption,
    check_next_token_distribution,
    check_top_k_gating,
)
from tests.report_text import assert_all_passed, assert_refused, failed, flat

# ---------------------------------------------------------------------------
# Answers as a reader would write them; keywords reproduce the usual slips
# ---------------------------------------------------------------------------


def reader_top_k(router_logits, k, *, slip=None):
    h = np.asarray(router_logits, dtype=float)
    idx = np.argsort(h if slip == "smallest" else -h, axis=-1)[..., :k]
    top = np.take_along_axis(h, idx, -1)
    gates = np.zeros_like(h)
    if slip == "no renormalisation":
        p = np.exp(h - h.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
        np.put_along_axis(gates, idx, np.take_along_axis(p, idx, -1), -1)
        return gates
    if slip == "no zeroing":
        p = np.exp(h - h.max(-1, keepdims=True))
        return p / p.sum(-1, keepdims=True)
    if slip == "equal":
        np.put_along_axis(gates, idx, 1.0 / k, -1)
        return gates
    if slip == "no max shift":
        e = np.exp(top)
    else:
        e = np.exp(top - top.max(-1, keepdims=True))
    np.put_along_axis(gates, idx, e / e.sum(-1, keepdims=True), -1)
    return gates, idx


def reader_balance(router_probs, expert_indices, num_experts, *, slip=None):
    T, k = expert_indices.shape
    counts = np.bincount(expert_indices.ravel(), minlength=num_experts)
    f = counts / (T * k)
    P = router_probs.mean(0)
    if slip == "no k":
        f = counts / T
    if slip == "no N":
        return float(f @ P)
    if slip == "f from P":
        f = P
    return num_experts * float(f @ P)


def reader_mlm(input_ids, u_select, u_kind, random_ids, mask_token_id, *, slip=None):
    selected = u_select < 0.15
    out = input_ids.copy()
    if slip == "all masked":
        out[selected] = mask_token_id
    else:
        out[selected & (u_kind < 0.8)] = mask_token_id
        lo, hi = (0.9, 1.01) if slip == "swapped" else (0.8, 0.9)
        if slip == "80/10 swapped":  # 10% [MASK], 80% random
            out = input_ids.copy()
            out[selected & (u_kind < 0.1)] = mask_token_id
            lo, hi = 0.1, 0.9
        swap = selected & (u_kind >= lo) & (u_kind < hi)
        out[swap] = random_ids[swap]
    labels = (
        input_ids.copy() if slip == "labels everywhere" else np.where(selected, input_ids, -100)
    )
    return out, labels


def reader_next(logits, temperature, top_k, *, slip=None):
    z = np.asarray(logits, float)
    z = z * temperature if slip == "multiply" else z / temperature
    if slip == "divide probs":
        z = np.asarray(logits, float)
    kk = top_k
    if top_k is not None and slip in ("k-1", "k+1"):
        kk = top_k - 1 if slip == "k-1" else top_k + 1
    if kk is not None and slip != "zero after":
        kth = np.sort(z, axis=-1)[..., -kk, None]
        z = np.where(z >= kth, z, -np.inf)
    e = np.exp(z - z.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    if slip == "zero after" and top_k is not None:
        kth = np.sort(z, axis=-1)[..., -top_k, None]
        p = np.where(z >= kth, p, 0.0)
    if slip == "divide probs":
        p = p / temperature
    return p


# ---------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------


def test_check_top_k_gating_passes_the_right_answer_and_refuses_the_books():
    assert_all_passed(check_top_k_gating(reader_top_k))
    from helpers import top_k_gating

    assert_refused(check_top_k_gating(top_k_gating), "helpers.moe.top_k_gating")


@pytest.mark.parametrize(
    ("slip", "phrase"),
    [
        ("no renormalisation", "not renormalised"),
        ("no zeroing", "nothing outside the top k was zeroed"),
        ("equal", "equal gates 1/k"),
        ("smallest", "the k SMALLEST logits were selected"),
        ("no max shift", "nan"),
    ],
)
def test_check_top_k_gating_names_the_slip(slip, phrase):
    report = check_top_k_gating(lambda h, k: reader_top_k(h, k, slip=slip))
    assert not report
    assert phrase in " ".join(failed(report).values())


def test_check_load_balancing_loss():
    assert_all_passed(check_load_balancing_loss(reader_balance))
    from helpers import load_balancing_loss

    assert_refused(
        check_load_balancing_loss(load_balancing_loss), "helpers.moe.load_balancing_loss"
    )
    for slip, phrase in [
        ("no k", "k times too large"),
        ("no N", "factor N"),
        ("f from P", "N Σ P_i²"),
    ]:
        report = check_load_balancing_loss(
            lambda p, i, n, slip=slip: reader_balance(p, i, n, slip=slip)
        )
        assert not report, slip
        assert phrase in " ".join(failed(report).values()), slip


def test_check_mlm_corruption():
    assert_all_passed(check_mlm_corruption(reader_mlm))
    for slip, phrase in [
        ("all masked", "every selected token became [MASK]"),
        ("labels everywhere", "labels are set at every position"),
        ("swapped", "the random and the unchanged branches are exchanged"),
        ("80/10 swapped", "the 80% and 10% branches are exchanged"),
    ]:
        report = check_mlm_corruption(lambda *a, slip=slip: reader_mlm(*a, slip=slip))
        assert not report, slip
        assert phrase in " ".join(failed(report).values()), slip


def test_check_next_token_distribution():
    assert_all_passed(check_next_token_distribution(reader_next))
    from helpers import next_token_distribution

    def reference(z, t, k):
        return next_token_distribution(z, temperature=t, top_k=k)

    assert_refused(
        check_next_token_distribution(reference), "helpers.models.next_token_distribution"
    )
    for slip, phrase in [
        ("multiply", "multiplied by τ"),
        ("zero after", "without renormalising"),
        ("k-1", "k - 1 tokens"),
        ("k+1", "k + 1 tokens"),
        ("divide probs", "probabilities were divided by τ"),
    ]:
        report = check_next_token_distribution(lambda *a, slip=slip: reader_next(*a, slip=slip))
        assert not report, slip
        assert phrase in " ".join(failed(report).values()), slip


def test_checks_refuse_a_result_instead_of_a_function():
    with pytest.raises(TypeError, match="expects your function itself"):
        check_top_k_gating(np.zeros(3))
    report = check_top_k_gating(lambda h, k: None)
    assert "did you forget `return`" in flat(report)


def reader_beam(
    next_log_probs,
    prompt_ids,
    num_tokens,
    beam_width,
    eos_id=None,
    length_penalty=1.0,
    *,
    slip=None,
):
    """Beam search as a reader writes it; ``slip`` reproduces one usual mistake."""
    n0 = len(prompt_ids)
    beams, scores = np.asarray(prompt_ids)[None, :], np.zeros(1)
    done, done_scores, done_ranks = [], [], []
    ending = eos_id is not None and slip != "continued"
    for t in range(1, num_tokens + 1):
        logp = next_log_probs(beams)
        total = scores[:, None] + logp
        rank = logp if slip == "last step" else total
        width = 1 if slip == "greedy" else beam_width
        order = np.argsort(-rank.ravel(), kind="stable")
        beam, token = np.divmod(order, logp.shape[1])
        seqs = np.concatenate([beams[beam], token[:, None]], axis=1)
        flat = total.ravel()[order]
        is_end = (token == eos_id) if ending else np.zeros(len(token), bool)
        last = t == num_tokens
        for i in range(len(order)):
            top = i < width
            early = is_end[i] and (top or slip == "every end token") and slip != "dropped"
            if early or (last and top):
                L = {"prompt counted": n0 + t, "end token not counted": t - 1}.get(slip, t)
                a = 0.0 if eos_id is None or slip == "no normalisation" else length_penalty
                done.append(seqs[i])
                done_scores.append(flat[i] / L**a if a else flat[i])
                done_ranks.append(
                    rank.ravel()[order[i]] if slip == "last step" else done_scores[-1]
                )
        keep = np.argsort(-np.array(done_ranks), kind="stable")[:width]
        done, done_scores = [done[k] for k in keep], [done_scores[k] for k in keep]
        done_ranks = [done_ranks[k] for k in keep]
        if last or (ending and len(done) == width and slip != "no early stop"):
            break
        pool = np.arange(min(width, len(order))) if slip == "shrinks" else np.arange(len(order))
        live = pool[~is_end[pool]][:width]
        beams, scores = seqs[live], flat[live]
    n = n0 + num_tokens if slip == "pad to num_tokens" else max(len(s) for s in done)
    fill = -1 if slip == "pad with -1" else (eos_id or 0)
    tokens = np.array([np.append(s, [fill] * (n - len(s))) for s in done])
    out = np.array(done_scores)
    return tokens, np.exp(out) if slip == "probabilities" else out


def old_reader_beam(next_log_probs, prompt_ids, num_tokens, beam_width):
    """The exercise's earlier form, without an end token."""
    return reader_beam(next_log_probs, prompt_ids, num_tokens, beam_width)


def test_check_beam_search_passes_the_right_answers():
    from helpers import beam_search

    def helper(f, p, t, w, eos_id=None, length_penalty=1.0):
        extra = {} if eos_id is None else {"eos_id": eos_id, "length_penalty": length_penalty}
        return beam_search(f, p, t, beam_width=w, **extra)

    assert_all_passed(check_beam_search(reader_beam))
    assert_refused(check_beam_search(helper), "helpers.models.beam_search")
    # a hypothesis may also be padded to num_tokens (with the end token)
    assert_all_passed(
        check_beam_search(lambda *a, **k: reader_beam(*a, **k, slip="pad to num_tokens"))
    )


NO_END_CASES = 4  # the check's cases without an end token come first, then 5 with one


@pytest.mark.parametrize(
    ("slip", "phrase", "n_failed"),
    [
        ("greedy", "this is greedy decoding", 4),
        ("last step", "log-probability alone", 4),
        ("probabilities", "the scores are probabilities", 9),
        ("no normalisation", "the length_penalty was not applied", 4),
        ("prompt counted", "counts the prompt too", 4),
        ("end token not counted", "leaves out the end token", 4),
        ("continued", "a finished hypothesis was extended", 5),
        ("dropped", "a hypothesis that ended before the last step was lost", 5),
        ("shrinks", "fewer than beam_width running hypotheses", 2),
        ("every end token", "ranked below the beam_width best finished a hypothesis", 3),
        ("no early stop", "went on after beam_width hypotheses had ended", 2),
    ],
)
def test_check_beam_search_names_the_slip(slip, phrase, n_failed):
    report = check_beam_search(lambda *a, **k: reader_beam(*a, **k, slip=slip))
    problems = failed(report)
    assert len(problems) >= n_failed, (slip, problems)
    assert all(phrase in text for text in problems.values()), (slip, problems)
    if slip not in ("greedy", "last step", "probabilities"):  # an end-token slip
        passed = {r.name for r in report.results if r.passed}
        assert len(passed) >= NO_END_CASES  # the cases without an end token still pass


def test_check_beam_search_cases_tell_every_slip_apart():
    # What the docstring promises: on each case, the slips that get it wrong all give
    # different answers, so a diagnosis is never a guess between two slips. And every
    # slip is caught by at least two cases.
    from helpers.checks.models import _BEAM_SLIPS, _beam_cases, _beam_row, _close

    caught = dict.fromkeys(_BEAM_SLIPS, 0)
    for case in _beam_cases():
        inputs = case.inputs
        args = [inputs[k] for k in ("table", "prompt_ids")]
        args += [int(inputs["num_tokens"]), int(inputs["beam_width"])]
        args += (
            [int(inputs["eos_id"]), float(inputs["length_penalty"])] if "eos_id" in inputs else []
        )
        rows = {slip: _beam_row(*args, slip=slip) for slip in _BEAM_SLIPS}
        assert _close(case.expected, _beam_row(*args)), case.name  # the plain one is right
        wrong = [slip for slip, row in rows.items() if not _close(case.expected, row)]
        for a, b in ((a, b) for a in wrong for b in wrong if a < b):
            assert not _close(rows[a], rows[b]), (case.name, a, b)
        for slip in wrong:
            caught[slip] += 1
    assert min(caught.values()) >= 2, caught


def test_check_beam_search_shows_no_answer_in_its_hints():
    # Every hint diagnoses; none shows code or a formula (no brackets, call or operator).
    from helpers.checks.models import _BEAM_FINDINGS, _beam_cases

    hints = [f.hint for f in _BEAM_FINDINGS.values()] + [c.hint for c in _beam_cases()]
    for hint in hints:
        assert not any(mark in hint for mark in ("(", "[", "=", "*", "np.", "/", "+")), hint
    report = check_beam_search(lambda *a, **k: reader_beam(*a, **k, slip="continued"))
    assert {r.hint for r in report.results if not r.passed} <= set(hints)


def test_check_beam_search_recognises_other_padding():
    report = check_beam_search(lambda *a, **k: reader_beam(*a, **k, slip="pad with -1"))
    problems = failed(report)
    assert problems and all("do not hold eos_id" in text for text in problems.values())


def test_check_beam_search_reports_the_missing_end_token_arguments():
    report = check_beam_search(old_reader_beam)
    problems = failed(report)
    assert len(problems) == 5 and len(report.results) == NO_END_CASES + 5
    assert "unexpected keyword argument 'eos_id'" in flat(report)


def test_check_beam_search_passes_python_numbers():
    seen = []

    def spy(next_log_probs, prompt_ids, num_tokens, beam_width, eos_id=None, length_penalty=1.0):
        seen.append(tuple(type(x) for x in (num_tokens, beam_width, eos_id, length_penalty)))
        return reader_beam(
            next_log_probs, prompt_ids, num_tokens, beam_width, eos_id, length_penalty
        )

    assert_all_passed(check_beam_search(spy))
    assert set(seen[:NO_END_CASES]) == {(int, int, type(None), float)}
    assert set(seen[NO_END_CASES:]) == {(int, int, int, float)}


def test_check_beam_search_reports_a_stub_as_not_attempted():
    def my_beam_search(
        next_log_probs, prompt_ids, num_tokens, beam_width, eos_id=None, length_penalty=1.0
    ):
        raise NotImplementedError

    assert check_beam_search(my_beam_search).status == "not attempted"

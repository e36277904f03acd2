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


def reader_beam(next_log_probs, prompt_ids, num_tokens, beam_width, *, slip=None):
    beams = np.asarray(prompt_ids)[None, :]
    scores = np.zeros(1)
    for _ in range(num_tokens):
        logp = next_log_probs(beams)
        total = scores[:, None] + logp
        rank = logp if slip == "last step" else total
        width = 1 if slip == "greedy" else beam_width
        best = np.argsort(-rank.ravel(), kind="stable")[:width]
        beam, token = np.divmod(best, logp.shape[1])
        beams = np.concatenate([beams[beam], token[:, None]], axis=1)
        scores = total.ravel()[best]
    return beams, np.exp(scores) if slip == "probabilities" else scores


def test_check_beam_search():
    from helpers import beam_search

    assert_all_passed(check_beam_search(reader_beam))
    assert_refused(
        check_beam_search(lambda f, p, t, w: beam_search(f, p, t, beam_width=w)),
        "helpers.models.beam_search",
    )
    for slip, phrase, n_failed in [
        ("greedy", "this is greedy decoding", 3),
        ("last step", "log-probability alone", 3),
        ("probabilities", "the scores are probabilities", 4),
    ]:
        report = check_beam_search(lambda *a, slip=slip: reader_beam(*a, slip=slip))
        problems = failed(report)
        assert problems, slip
        assert all(phrase in text for text in problems.values()), (slip, problems)
        assert len(problems) >= n_failed, slip


def test_check_beam_search_reports_a_stub_as_not_attempted():
    def my_beam_search(next_log_probs, prompt_ids, num_tokens, beam_width):
        raise NotImplementedError

    assert check_beam_search(my_beam_search).status == "not attempted"

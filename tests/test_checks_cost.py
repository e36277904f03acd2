"""Tests of chapter 5's self-checks: right answers pass, typical wrong answers are named."""

from __future__ import annotations

import numpy as np
import pytest

import helpers
from helpers import checks
from helpers.checks import (
    check_causal_linear_attention,
    check_kv_cache_bytes,
    check_online_softmax_merge,
    check_tiled_attention,
)
from tests.report_text import assert_all_passed, assert_refused, failed, flat

# ---------------------------------------------------------------------------
# check_online_softmax_merge
# ---------------------------------------------------------------------------


def merge_right(mu1, ell1, mu2, ell2):
    mu = np.maximum(mu1, mu2)
    safe = np.where(np.isinf(mu), 0.0, mu)
    return mu, np.exp(mu1 - safe) * ell1 + np.exp(mu2 - safe) * ell2


def merge_logaddexp(mu1, ell1, mu2, ell2):
    """Another right answer: through the log-sum-exp of each block."""
    mu = np.maximum(mu1, mu2)
    with np.errstate(divide="ignore"):
        lse = np.logaddexp(mu1 + np.log(ell1), mu2 + np.log(ell2))
    safe = np.where(np.isinf(mu), 0.0, mu)
    return mu, np.where(np.isinf(lse), 0.0, np.exp(lse - safe))


@pytest.mark.parametrize("fn", [merge_right, merge_logaddexp])
def test_merge_right_answers_pass(fn):
    assert_all_passed(check_online_softmax_merge(fn))


def test_merge_helper_is_refused():
    def via_helper(mu1, ell1, mu2, ell2):
        return helpers.online_softmax_merge((mu1, ell1), (mu2, ell2))

    assert_refused(check_online_softmax_merge(via_helper), "helpers.flash.online_softmax_merge")


@pytest.mark.parametrize(
    ("fn", "problem"),
    [
        (lambda mu1, l1, mu2, l2: (np.maximum(mu1, mu2), l1 + l2), "added without rescaling"),
        (
            lambda mu1, l1, mu2, l2: (
                np.maximum(mu1, mu2),
                np.exp(np.maximum(mu1, mu2) - mu1) * l1 + np.exp(np.maximum(mu1, mu2) - mu2) * l2,
            ),
            "the wrong sign",
        ),
        (lambda mu1, l1, mu2, l2: (np.maximum(mu1, mu2), np.maximum(l1, l2)), "larger of the two"),
        (lambda mu1, l1, mu2, l2: (mu1 + mu2, merge_right(mu1, l1, mu2, l2)[1]), "mu is mu1 + mu2"),
        (lambda mu1, l1, mu2, l2: (mu1, l1), "the second block is ignored"),
    ],
)
def test_merge_wrong_answers_are_named(fn, problem):
    report = check_online_softmax_merge(fn)
    assert not report
    assert any(problem in p for p in failed(report).values()), flat(report)


def test_merge_nan_for_two_empty_blocks_is_explained():
    def naive(mu1, ell1, mu2, ell2):
        mu = np.maximum(mu1, mu2)
        return mu, np.exp(mu1 - mu) * ell1 + np.exp(mu2 - mu) * ell2

    report = check_online_softmax_merge(naive)
    assert list(failed(report)) == ["empty blocks (mu = -inf, ell = 0)"]
    assert "nan where both blocks are empty" in flat(report)
    assert "where the union is empty there is nothing to rescale" in flat(report)


def test_merge_must_return_a_pair():
    report = check_online_softmax_merge(lambda mu1, l1, mu2, l2: np.maximum(mu1, mu2))
    assert not report and "expected a pair (mu, ell)" in flat(report)


# ---------------------------------------------------------------------------
# check_tiled_attention
# ---------------------------------------------------------------------------


def tiled_right(Q, K, V, block_size):
    n, m = Q.shape[0], K.shape[0]
    out = np.empty((n, V.shape[1]))
    for q0 in range(0, n, block_size):
        Qb = Q[q0 : q0 + block_size] / np.sqrt(Q.shape[1])
        mu, ell = np.full(len(Qb), -np.inf), np.zeros(len(Qb))
        U = np.zeros((len(Qb), V.shape[1]))
        for k0 in range(0, m, block_size):
            S = Qb @ K[k0 : k0 + block_size].T
            new = np.maximum(mu, S.max(axis=1))
            P = np.exp(S - new[:, None])
            f = np.exp(mu - new)
            ell, U, mu = f * ell + P.sum(axis=1), f[:, None] * U + P @ V[k0 : k0 + block_size], new
        out[q0 : q0 + len(Qb)] = U / ell[:, None]
    return out


def test_tiled_right_answers_pass():
    assert_all_passed(check_tiled_attention(tiled_right))

    def via_helper(Q, K, V, block_size):
        return helpers.flash_attention(Q, K, V, block_q=block_size, block_k=block_size)[0]

    assert_refused(check_tiled_attention(via_helper), "helpers.flash.flash_attention")


def tiled_slip(slip):
    def fn(Q, K, V, block_size):
        n, m = Q.shape[0], K.shape[0]
        c = 1.0 if slip == "no scale" else 1 / np.sqrt(Q.shape[1])
        m_used = (m // block_size) * block_size if slip == "drop" else m
        out = np.empty((n, V.shape[1]))
        for q0 in range(0, n, block_size):
            Qb = Q[q0 : q0 + block_size] * c
            mu, ell = np.full(len(Qb), -np.inf), np.zeros(len(Qb))
            U = np.zeros((len(Qb), V.shape[1]))
            parts = []
            for k0 in range(0, m_used, block_size):
                S = Qb @ K[k0 : min(k0 + block_size, m_used)].T
                Vc = V[k0 : min(k0 + block_size, m_used)]
                if slip == "blockwise":
                    P = np.exp(S - S.max(axis=1, keepdims=True))
                    parts.append(P / P.sum(axis=1, keepdims=True) @ Vc)
                    continue
                new = np.maximum(mu, S.max(axis=1))
                P = np.exp(S - new[:, None])
                f = np.ones_like(mu) if slip == "no rescale" else np.exp(mu - new)
                f_ell = np.ones_like(mu) if slip == "output only" else f
                f_U = np.ones_like(mu) if slip == "sum only" else f
                ell, U, mu = f_ell * ell + P.sum(axis=1), f_U[:, None] * U + P @ Vc, new
            out[q0 : q0 + len(Qb)] = np.mean(parts, axis=0) if parts else U / ell[:, None]
        return out

    return fn


@pytest.mark.parametrize(
    ("slip", "problem"),
    [
        ("no rescale", "not rescaled when the running maximum grows"),
        (
            "sum only",
            "the running sum ell is rescaled when the running maximum grows, but the "
            "running output U is not",
        ),
        (
            "output only",
            "the running output U is rescaled when the running maximum grows, but "
            "the running sum ell is not",
        ),
        ("blockwise", "normalised on its own"),
        ("no scale", "not divided by sqrt(d_k)"),
        ("drop", "last, partial block of keys is left out"),
    ],
)
def test_tiled_wrong_answers_are_named(slip, problem):
    with np.errstate(all="ignore"):
        report = check_tiled_attention(tiled_slip(slip))
    assert not report
    assert any(problem in p for p in failed(report).values()), flat(report)


def test_tiled_forming_the_whole_matrix_fails_the_memory_case():
    def whole(Q, K, V, block_size):
        return helpers.scaled_dot_product_attention(Q, K, V)[0]

    report = check_tiled_attention(whole)
    assert list(failed(report)) == ["no n x m matrix: n = m = 2048"]
    assert "MiB" in failed(report)["no n x m matrix: n = m = 2048"]


def test_tiled_overflow_is_caught():
    def no_max(Q, K, V, block_size):  # a plain exp, no running maximum
        E = np.exp(Q @ K.T / np.sqrt(Q.shape[1]))
        return E @ V / E.sum(axis=1, keepdims=True)

    with np.errstate(all="ignore"):
        report = check_tiled_attention(no_max)
    assert "scores near 1e4 (a plain exp overflows)" in failed(report)


# ---------------------------------------------------------------------------
# check_causal_linear_attention
# ---------------------------------------------------------------------------


def elu1(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def causal_linear_right(Q, K, V):
    Qf, Kf = elu1(Q), elu1(K)
    H = np.cumsum(Kf[:, :, None] * V[:, None, :], axis=0)
    z = np.cumsum(Kf, axis=0)
    return np.einsum("nf,nfv->nv", Qf, H) / np.einsum("nf,nf->n", Qf, z)[:, None]


def causal_linear_loop(Q, K, V):
    H, z = np.zeros((Q.shape[1], V.shape[1])), np.zeros(Q.shape[1])
    out = np.empty((Q.shape[0], V.shape[1]))
    for i in range(Q.shape[0]):
        f = elu1(K[i])
        H, z = H + np.outer(f, V[i]), z + f
        out[i] = elu1(Q[i]) @ H / (elu1(Q[i]) @ z)
    return out


@pytest.mark.parametrize("fn", [causal_linear_right, causal_linear_loop])
def test_causal_linear_right_answers_pass(fn):
    assert_all_passed(check_causal_linear_attention(fn))


def test_causal_linear_helper_is_refused():
    assert_refused(
        check_causal_linear_attention(
            lambda Q, K, V: helpers.linear_attention(Q, K, V, causal=True)
        ),
        "helpers.linear_attention.linear_attention",
    )


def _variant(Q, K, V, *, phi=elu1, num="causal", den="causal", exclusive=False, normalise=True):
    Qf, Kf = phi(Q), phi(K)
    H = np.cumsum(Kf[:, :, None] * V[:, None, :], axis=0)
    z = np.cumsum(Kf, axis=0)
    if exclusive:
        H = np.concatenate([np.zeros_like(H[:1]), H[:-1]])
        z = np.concatenate([np.zeros_like(z[:1]), z[:-1]])
    if num == "all":
        H = np.broadcast_to(H[-1], H.shape)
    if den == "all":
        z = np.broadcast_to(z[-1], z.shape)
    top = np.einsum("nf,nfv->nv", Qf, H)
    return top / np.einsum("nf,nf->n", Qf, z)[:, None] if normalise else top


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"num": "all", "den": "all"}, "the sums are not causal"),
        ({"exclusive": True}, "stop before the query's own key"),
        ({"normalise": False}, "not divided by phi(q_i) . z_i"),
        ({"phi": lambda x: np.maximum(x, 0.0) + 1.0}, "relu(x) + 1"),
        ({"den": "all"}, "numerator is causal but the denominator"),
        ({"num": "all"}, "denominator is causal but the numerator"),
    ],
)
def test_causal_linear_wrong_answers_are_named(kwargs, problem):
    with np.errstate(all="ignore"):
        report = check_causal_linear_attention(lambda Q, K, V: _variant(Q, K, V, **kwargs))
    assert not report
    assert any(problem in p for p in failed(report).values()), flat(report)


def test_causal_linear_quadratic_form_fails_the_memory_case():
    def masked_quadratic(Q, K, V):
        kern = elu1(Q) @ elu1(K).T * np.tri(Q.shape[0])
        return kern @ V / kern.sum(axis=1, keepdims=True)

    report = check_causal_linear_attention(masked_quadratic)
    assert list(failed(report)) == ["no n x n matrix: n = 2048"]


# ---------------------------------------------------------------------------
# check_kv_cache_bytes
# ---------------------------------------------------------------------------


def test_kv_right_answers_pass():
    assert_all_passed(
        check_kv_cache_bytes(lambda L, h_kv, d, n, b, nb: 2 * L * n * h_kv * d * b * nb)
    )
    assert_refused(
        check_kv_cache_bytes(
            lambda L, h_kv, d, n, b, nb: helpers.kv_cache_bytes(
                n, num_layers=L, num_kv_heads=h_kv, d_head=d, batch=b, bytes_per_entry=nb
            )
        ),
        "helpers.cost.kv_cache_bytes",
    )


@pytest.mark.parametrize(
    ("fn", "problem"),
    [
        (lambda L, h_kv, d, n, b, nb: L * n * h_kv * d * b * nb, "the factor 2 is missing"),
        (lambda L, h_kv, d, n, b, nb: 16 * L * n * h_kv * d * b * nb, "in bits"),
        (lambda L, h_kv, d, n, b, nb: 2 * n * h_kv * d * b * nb, "number of layers is missing"),
        (lambda L, h_kv, d, n, b, nb: 2 * L * n * h_kv * d * nb, "batch size is missing"),
        (lambda L, h_kv, d, n, b, nb: 2 * L * n * h_kv * d * b, "bytes_per_number is missing"),
    ],
)
def test_kv_wrong_answers_are_named(fn, problem):
    report = check_kv_cache_bytes(fn)
    assert not report
    assert any(problem in p for p in failed(report).values()), flat(report)


def test_kv_query_heads_in_place_of_kv_heads_is_named():
    heads = {12: 12, 32: 32, 24: 16, 80: 64}  # the cases' models: layers -> query heads

    def with_query_heads(L, h_kv, d, n, b, nb):
        h = heads[L]
        return 2 * L * n * h * d * b * nb

    report = check_kv_cache_bytes(with_query_heads)
    assert not report
    assert all("query heads" in p for p in failed(report).values()), flat(report)


def test_checks_refuse_a_result_instead_of_a_function():
    for check in (
        check_online_softmax_merge,
        check_tiled_attention,
        check_causal_linear_attention,
        check_kv_cache_bytes,
    ):
        with pytest.raises(TypeError, match="your function itself"):
            check(np.zeros(3))


def exclusive_with_epsilon(Q, K, V):
    """Exclusive prefix sums (j < i), the first row's 0 / 0 hidden by an epsilon."""
    Qf, Kf = elu1(Q), elu1(K)
    KV = Kf[:, :, None] * V[:, None, :]
    H, z = np.cumsum(KV, axis=0) - KV, np.cumsum(Kf, axis=0) - Kf
    return np.einsum("nf,nfv->nv", Qf, H) / (np.einsum("nf,nf->n", Qf, z)[:, None] + 1e-6)


def exclusive_loop(Q, K, V):
    """A running state used for query i before token i is added to it."""
    H, z = np.zeros((Q.shape[1], V.shape[1])), np.zeros(Q.shape[1])
    out = np.zeros((Q.shape[0], V.shape[1]))
    for i in range(Q.shape[0]):
        if i > 0:
            out[i] = elu1(Q[i]) @ H / (elu1(Q[i]) @ z)
        f = elu1(K[i])
        H, z = H + np.outer(f, V[i]), z + f
    return out


@pytest.mark.parametrize("fn", [exclusive_with_epsilon, exclusive_loop])
def test_exclusive_prefix_sums_with_a_patched_first_row_are_named(fn):
    report = check_causal_linear_attention(fn)
    problems_by_case = failed(report)
    assert sorted(problems_by_case) == [
        "a single token",
        "n = 40, d = 8, d_v = 5",
        "n = 6, d = 4",
        "no n x n matrix: n = 2048",
    ]
    for problem in problems_by_case.values():
        assert "the sums stop before the query's own key (j < i)" in problem
        assert "was patched" in problem
    assert "each token's own key belongs to the sums it uses" in flat(report)


# ---------------------------------------------------------------------------
# check_flash1_update (exercise 5.3)
# ---------------------------------------------------------------------------


def flash1_update(out, ell, mu, Q, K_c, V_c):
    """A reader's answer: merge the block into the state, the output kept normalised."""
    S = Q @ K_c.T / np.sqrt(Q.shape[1])  # (n, b)
    mu_new = np.maximum(mu, S.max(axis=1))
    P = np.exp(S - mu_new[:, None])
    c = np.exp(mu - mu_new)  # 0 on the first block
    ell_new = c * ell + P.sum(axis=1)
    return ((c * ell)[:, None] * out + P @ V_c) / ell_new[:, None], ell_new, mu_new


def flash1_by_merge(out, ell, mu, Q, K_c, V_c):
    """Another: the block's own (mu, ell, o), merged by the chapter's proposition."""
    S = Q @ K_c.T / np.sqrt(Q.shape[1])
    mu_b = S.max(axis=1)
    E = np.exp(S - mu_b[:, None])
    ell_b, o_b = E.sum(axis=1), E @ V_c / E.sum(axis=1, keepdims=True)
    mu_new = np.maximum(mu, mu_b)
    w_old, w_b = np.exp(mu - mu_new) * ell, np.exp(mu_b - mu_new) * ell_b
    return (w_old[:, None] * out + w_b[:, None] * o_b) / (w_old + w_b)[:, None], w_old + w_b, mu_new


def test_check_flash1_update_passes_right_answers():
    for fn in (flash1_update, flash1_by_merge):
        assert_all_passed(checks.check_flash1_update(fn))


def test_the_flash1_loop_order_gives_attention():
    rng = np.random.default_rng(3)
    Q, K, V = rng.normal(size=(10, 8)), rng.normal(size=(23, 8)), rng.normal(size=(23, 3))
    out, ell, mu = np.zeros((10, 3)), np.zeros(10), np.full(10, -np.inf)
    for k0 in range(0, 23, 5):  # the key blocks outside
        for q0 in range(0, 10, 4):  # the query blocks inside, each reading its own state
            rows = slice(q0, q0 + 4)
            out[rows], ell[rows], mu[rows] = flash1_update(
                out[rows], ell[rows], mu[rows], Q[rows], K[k0 : k0 + 5], V[k0 : k0 + 5]
            )
    out, _ = helpers.scaled_dot_product_attention(Q, K, V)
    np.testing.assert_allclose(out, out, atol=1e-12)
    np.testing.assert_allclose(mu + np.log(ell), helpers.logsumexp(Q @ K.T / np.sqrt(8)))


@pytest.mark.parametrize(
    ("slip", "problem"),
    [
        ("U", "the output is not divided by the new ell"),
        ("no ell", "not multiplied by its ell"),
        ("not rescaled", "multiplied by its ell but not rescaled"),
        ("ell not rescaled", "the running sum is not rescaled"),
        ("block max", "the new maximum is the block's own"),
        ("block average", "normalised on its own and averaged"),
        ("no scale", "not divided by sqrt(d_k)"),
        ("unchanged", "the state came back unchanged"),
    ],
)
def test_check_flash1_update_names_each_slip(slip, problem):
    from helpers.checks.cost import _flash1_step

    def wrong(out, ell, mu, Q, K_c, V_c):
        return _flash1_step(out, ell, mu, Q, K_c, V_c, slip)

    with np.errstate(all="ignore"):
        report = checks.check_flash1_update(wrong)
    problems = failed(report)
    assert problems and any(problem in p for p in problems.values())
    assert all(problem in p or "nan" in p for p in problems.values())


def test_check_flash1_update_names_a_result_that_is_not_a_state():
    report = checks.check_flash1_update(lambda out, ell, mu, Q, K_c, V_c: out)
    assert not report and "expected a tuple (out, ell, mu)" in flat(report)


# ---------------------------------------------------------------------------
# check_chunked_linear_attention (exercise 5.4)
# ---------------------------------------------------------------------------


def elu1(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def chunked(Q, K, V, chunk, *, phi_queries=True):
    """A reader's answer: the state of the earlier chunks, a masked C x C form inside."""
    H, z = np.zeros((Q.shape[1], V.shape[1])), np.zeros(Q.shape[1])
    out = np.empty((Q.shape[0], V.shape[1]))
    for c0 in range(0, Q.shape[0], chunk):
        q = elu1(Q[c0 : c0 + chunk]) if phi_queries else Q[c0 : c0 + chunk]
        k, v = elu1(K[c0 : c0 + chunk]), V[c0 : c0 + chunk]
        W = np.tril(q @ k.T)  # (C, C), j <= i
        out[c0 : c0 + len(q)] = (q @ H + W @ v) / (q @ z + W.sum(axis=1))[:, None]
        H, z = H + k.T @ v, z + k.sum(axis=0)
    return out


def chunked_by_blocks(Q, K, V, chunk):
    """Another: each chunk's block of the masked kernel matrix, earlier chunks as a sum."""
    out = []
    for c0 in range(0, Q.shape[0], chunk):
        q = elu1(Q[c0 : c0 + chunk])
        k_before, k_in = elu1(K[:c0]), elu1(K[c0 : c0 + chunk])
        W_in = np.tril(q @ k_in.T)
        top = q @ (k_before.T @ V[:c0]) + W_in @ V[c0 : c0 + chunk]
        out.append(top / (q @ k_before.sum(axis=0) + W_in.sum(axis=1))[:, None])
    return np.concatenate(out)


def test_check_chunked_linear_attention_passes_right_answers():
    for fn in (chunked, chunked_by_blocks):
        assert_all_passed(checks.check_chunked_linear_attention(fn))


def test_chunks_of_any_size_give_causal_linear_attention():
    rng = np.random.default_rng(2)
    Q, K, V = rng.normal(size=(30, 5)), rng.normal(size=(30, 5)), rng.normal(size=(30, 3))
    ref = helpers.linear_attention(Q, K, V, causal=True)
    for chunk in (1, 2, 7, 30, 64):
        np.testing.assert_allclose(chunked(Q, K, V, chunk), ref, atol=1e-12)


@pytest.mark.parametrize(
    ("slip", "problem"),
    [
        ("state first", "counted a second time"),
        ("not causal inside", "every query uses every key of the chunk"),
        ("strict inside", "leaves out its own key"),  # the first token sees no key: 0 / 0
        ("no inside", "the keys of the query's own chunk are left out"),  # nan there too
        ("no state update", "the running state is never updated"),
        ("no denominator", "not divided by the sum of its weights"),
        ("last chunk dropped", "the last, partial chunk is left out"),
        ("no phi on the queries", "applied to the keys but not to the queries"),
        ("no phi on the keys", "applied to the queries but not to the keys"),
        ("no phi", "no feature map"),
    ],
)
def test_check_chunked_linear_attention_names_each_slip(slip, problem):
    from helpers.checks.cost import _chunked_variant

    with np.errstate(all="ignore"):
        report = checks.check_chunked_linear_attention(
            lambda Q, K, V, chunk: _chunked_variant(Q, K, V, chunk, slip)
        )
    problems = failed(report)
    # with chunks of one token, leaving out the chunk's keys is leaving out the query's own
    same = {"chunks of 1 (the running state)"} if slip == "no inside" else set()
    assert problems and all(problem in p for name, p in problems.items() if name not in same)


def test_a_reader_who_forgets_phi_on_the_queries_is_told_so():
    def no_phi_on_queries(Q, K, V, chunk):  # written by hand, as a reader would
        return chunked(Q, K, V, chunk, phi_queries=False)

    problems = failed(checks.check_chunked_linear_attention(no_phi_on_queries))
    assert problems and all("not to the queries" in p for p in problems.values())


def test_the_books_linear_attention_is_refused_in_chunks_too():
    def via_helper(Q, K, V, chunk):
        return helpers.linear_attention(Q, K, V, causal=True)

    report = checks.check_chunked_linear_attention(via_helper)
    assert_refused(report, "helpers.linear_attention.linear_attention")
    assert len(report.results) == 6  # the memory case ran too, and it is refused with the rest


def test_check_chunked_linear_attention_catches_a_state_per_token():
    def prefix_sums(Q, K, V, chunk):  # the chapter's cumsum: an (n, d, d_v) array
        Qf, Kf = elu1(Q), elu1(K)
        H = np.cumsum(Kf[:, :, None] * V[:, None, :], axis=0)
        z = np.cumsum(Kf, axis=0)
        return np.einsum("nf,nfv->nv", Qf, H) / np.einsum("nf,nf->n", Qf, z)[:, None]

    problems = failed(checks.check_chunked_linear_attention(prefix_sums))
    assert list(problems) == ["no n x n matrix, no state per token: n = 2048, chunks of 64"]
    assert "MiB" in next(iter(problems.values()))


def test_check_chunked_linear_attention_catches_the_quadratic_form():
    def quadratic(Q, K, V, chunk):  # one chunk of n: the masked n x n kernel matrix
        W = np.tril(elu1(Q) @ elu1(K).T)  # (n, n)
        return W @ V / W.sum(axis=1, keepdims=True)

    problems = failed(checks.check_chunked_linear_attention(quadratic))
    assert list(problems) == ["no n x n matrix, no state per token: n = 2048, chunks of 64"]

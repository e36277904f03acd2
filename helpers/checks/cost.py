"""Self-checks of chapter 5 (the cost of attention), built on :mod:`helpers.checks.core`.

Four checks, one per exercise: the merge rule of the online softmax, a tiled forward
pass (whose peak memory is measured too), causal linear attention as a running sum,
and the bytes of a key/value cache. When an answer is wrong, the diagnosis recomputes
it with each usual slip and names the one that reproduces the reader's numbers.
"""

from __future__ import annotations

import math
import tracemalloc
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from helpers.attention import scaled_dot_product_attention
from helpers.checks.core import Case, CheckReport, Diagnose, Finding
from helpers.checks.multihead import _append, _run, _Spec, _Unusable

__all__ = [
    "check_causal_linear_attention",
    "check_chunked_linear_attention",
    "check_flash1_update",
    "check_kv_cache_bytes",
    "check_online_softmax_merge",
    "check_tiled_attention",
]

_SLIP_RTOL, _SLIP_ATOL = 1e-6, 1e-9


def _first_match(
    got: np.ndarray, candidates: dict[str, tuple[np.ndarray, Finding]]
) -> list[Finding]:
    """The finding of the first candidate answer equal to ``got``, or []."""
    with np.errstate(all="ignore"):
        for answer, finding in candidates.values():
            if answer.shape == got.shape and np.allclose(
                got, answer, rtol=_SLIP_RTOL, atol=_SLIP_ATOL, equal_nan=True
            ):
                return [finding]
    return []


# ---------------------------------------------------------------------------
# check_online_softmax_merge
# ---------------------------------------------------------------------------

_MERGE_FORMULA = (
    "mu = max(mu1, mu2) and ell = exp(mu1 - mu) * ell1 + exp(mu2 - mu) * ell2, entry by entry"
)

_EMPTY_HINT = (
    "where both blocks are empty, mu1 - mu is -inf - (-inf) = nan: shift by a finite number "
    "there, e.g. safe = np.where(np.isinf(mu), 0.0, mu), so that exp(-inf) * 0 gives 0"
)


def _merge_reference(mu1, l1, mu2, l2) -> np.ndarray:
    mu = np.maximum(mu1, mu2)
    safe = np.where(np.isinf(mu), 0.0, mu)
    return np.stack([mu, np.exp(mu1 - safe) * l1 + np.exp(mu2 - safe) * l2])


def _merge_pick(result: object) -> np.ndarray:
    if not isinstance(result, tuple | list) or len(result) != 2:
        raise _Unusable(
            type(result).__name__,
            "expected a pair (mu, ell)",
            "return both: return mu, ell",
        )
    try:
        mu, ell = (np.asarray(r, dtype=np.float64) for r in result)
        return np.stack([mu, ell])
    except (TypeError, ValueError) as err:
        raise _Unusable(
            repr(result)[:80], f"could not read (mu, ell) as arrays: {err}", ""
        ) from err


def _merge_diagnose(mu1, l1, mu2, l2) -> Diagnose:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        mu = np.maximum(mu1, mu2)
        with np.errstate(all="ignore"):
            candidates = {
                "no rescale": (
                    np.stack([mu, l1 + l2]),
                    Finding(
                        "the sums are added without rescaling: each block's sum was taken "
                        "relative to its own maximum, so it must be multiplied by exp(mu_b - mu)",
                        _MERGE_FORMULA,
                    ),
                ),
                "wrong sign": (
                    np.stack([mu, np.exp(mu - mu1) * l1 + np.exp(mu - mu2) * l2]),
                    Finding(
                        "the sums are rescaled by exp(mu - mu_b), the wrong sign: the factor "
                        "exp(mu_b - mu) is at most 1",
                        _MERGE_FORMULA,
                    ),
                ),
                "larger sum": (
                    np.stack([mu, np.maximum(l1, l2)]),
                    Finding(
                        "ell is the larger of the two sums; it is their rescaled sum",
                        _MERGE_FORMULA,
                    ),
                ),
                "sum of maxima": (
                    np.stack([mu1 + mu2, _merge_reference(mu1, l1, mu2, l2)[1]]),
                    Finding("mu is mu1 + mu2; it is the larger of the two", _MERGE_FORMULA),
                ),
            }
        found = _first_match(got, candidates)
        if not found and np.isnan(got).any():
            found = [
                Finding(
                    "nan where both blocks are empty (mu1 = mu2 = -inf): -inf - (-inf) is nan",
                    "where mu is -inf, shift by 0 instead (np.where(np.isinf(mu), 0.0, mu)): "
                    "exp(-inf) * 0 is then 0",
                )
            ]
        return found

    return diagnose


def check_online_softmax_merge(
    fn: Callable[
        [np.ndarray, np.ndarray, np.ndarray, np.ndarray], tuple[npt.ArrayLike, npt.ArrayLike]
    ],
) -> CheckReport:
    """Check the reader's merge of two blocks' running maxima and sums (the online softmax).

    Parameters
    ----------
    fn : callable
        ``fn(mu1, ell1, mu2, ell2) -> (mu, ell)`` on arrays of shape ``(n,)``: one entry
        per row, ``mu_b`` the largest score of block ``b`` and ``ell_b`` the sum of
        ``exp(s - mu_b)`` over it; an empty block has ``mu = -inf``, ``ell = 0``.

    Returns
    -------
    CheckReport
        Truthy iff every case matches the merge rule. The report recognises sums added
        without rescaling, the rescaling with the wrong sign, the larger sum in place of
        the sum, the sum of the maxima, and ``nan`` for two empty blocks.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_online_softmax_merge
    >>> def no_rescale(mu1, ell1, mu2, ell2):
    ...     return np.maximum(mu1, mu2), ell1 + ell2
    >>> report = check_online_softmax_merge(no_rescale)
    >>> bool(report), report.failures[0].problem.split(":")[0]
    (False, 'the sums are added without rescaling')
    """
    rng = np.random.default_rng(5)
    layouts = []
    s1, s2 = rng.normal(size=(4, 6)) * 2, rng.normal(size=(4, 9)) * 2
    layouts.append(("two blocks of ordinary scores", s1, s2))
    layouts.append(("scores near 1e4 (a plain exp overflows)", s1 + 1e4, s2 + 9990.0))
    layouts.append(("one block far larger than the other", s1 - 500.0, s2))
    stats = []
    for name, a, b in layouts:
        mu1, mu2 = a.max(axis=1), b.max(axis=1)
        l1 = np.exp(a - mu1[:, None]).sum(axis=1)
        l2 = np.exp(b - mu2[:, None]).sum(axis=1)
        stats.append((name, mu1, l1, mu2, l2))
    inf = np.inf
    stats.append(
        (
            "empty blocks (mu = -inf, ell = 0)",
            np.array([-inf, 1.5, -inf]),
            np.array([0.0, 2.0, 0.0]),
            np.array([0.3, -inf, -inf]),
            np.array([3.0, 0.0, 0.0]),
        )
    )
    specs = []
    for name, mu1, l1, mu2, l2 in stats:
        expected = _merge_reference(mu1, l1, mu2, l2)
        hint = _EMPTY_HINT if "empty" in name else _MERGE_FORMULA
        specs.append(
            _Spec(
                Case(name, {"mu1": mu1, "ell1": l1, "mu2": mu2, "ell2": l2}, expected, hint),
                lambda *arrays: arrays,
                f"mu1, ell1, mu2, ell2: arrays of shape {mu1.shape} (output shown as [mu, ell])",
                _merge_diagnose(mu1, l1, mu2, l2),
                pick=_merge_pick,
            )
        )
    return _run(fn, "check_online_softmax_merge", specs)


# ---------------------------------------------------------------------------
# check_tiled_attention
# ---------------------------------------------------------------------------

_TILED_FORMULA = (
    "for each block of queries keep mu (running max), ell (running sum) and U (running "
    "output); for each block of keys: S = Qb Kc^T / sqrt(d_k), mu' = max(mu, rowmax S), "
    "P = exp(S - mu'), ell = exp(mu - mu') ell + rowsum P, U = exp(mu - mu') U + P Vc; "
    "finally O = U / ell"
)

# The largest peak allowed in the memory case, as a share of one n x m float64 matrix.
_MEMORY_SHARE = 0.25


def _tiled_variant(Q, K, V, block: int, slip: str) -> np.ndarray:
    n, m = Q.shape[0], K.shape[0]
    scale = 1.0 if slip == "no scale" else 1 / math.sqrt(Q.shape[1])
    out = np.empty((n, V.shape[1]))
    m_used = (m // block) * block if slip == "last block dropped" else m
    for q0 in range(0, n, block):
        Qb = Q[q0 : q0 + block] * scale
        mu, ell = np.full(len(Qb), -np.inf), np.zeros(len(Qb))
        U = np.zeros((len(Qb), V.shape[1]))
        outs = []
        for k0 in range(0, m_used, block):
            S = Qb @ K[k0 : min(k0 + block, m_used)].T
            Vc = V[k0 : min(k0 + block, m_used)]
            if slip == "blockwise softmax":
                P = np.exp(S - S.max(axis=1, keepdims=True))
                outs.append(P / P.sum(axis=1, keepdims=True) @ Vc)
                continue
            mu_new = np.maximum(mu, S.max(axis=1))
            P = np.exp(S - mu_new[:, None])
            factor = np.ones_like(mu) if slip == "no rescale" else np.exp(mu - mu_new)
            ell_factor = np.ones_like(mu) if slip == "output only" else factor
            U_factor = np.ones_like(mu) if slip == "sum only" else factor
            ell = ell_factor * ell + P.sum(axis=1)
            U = U_factor[:, None] * U + P @ Vc
            mu = mu_new
        out[q0 : q0 + len(Qb)] = np.mean(outs, axis=0) if outs else U / ell[:, None]
    return out


def _tiled_diagnose(Q, K, V, block: int) -> Diagnose:
    texts = {
        "no rescale": (
            "the running sum and output are not rescaled when the running maximum grows: "
            "earlier blocks keep terms exp(s - old max)",
            "multiply ell and U by exp(mu - mu_new) before adding the new block",
        ),
        "sum only": (
            "the running sum ell is rescaled when the running maximum grows, but the running "
            "output U is not: the earlier blocks' terms in U stay relative to the old maximum",
            "rescale both by the same factor: U = exp(mu - mu_new)[:, None] * U + P @ Vc",
        ),
        "output only": (
            "the running output U is rescaled when the running maximum grows, but the running "
            "sum ell is not: the earlier blocks' terms in ell stay relative to the old maximum",
            "rescale both by the same factor: ell = exp(mu - mu_new) * ell + P.sum(axis=1)",
        ),
        "blockwise softmax": (
            "each block of keys is normalised on its own and the block outputs averaged: "
            "a block's weights must be relative to the whole row",
            _TILED_FORMULA,
        ),
        "no scale": ("the scores are not divided by sqrt(d_k)", "S = Qb @ Kc.T / np.sqrt(d_k)"),
        "last block dropped": (
            "the last, partial block of keys is left out (m is not a multiple of block_size)",
            "loop with range(0, m, block_size) and slice K[k0 : k0 + block_size]",
        ),
    }

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        with np.errstate(all="ignore"):
            candidates = {
                slip: (_tiled_variant(Q, K, V, block, slip), Finding(*text))
                for slip, text in texts.items()
            }
        return _first_match(got, candidates)

    return diagnose


def _memory_case(
    fn: Callable[..., object],
    check_name: str,
    case: Case,
    block: int | None,
    shown: str,
    n: int,
    diagnose: Diagnose | None = None,
    limit: float | None = None,
) -> CheckReport:
    """Run ``fn`` on ``case`` under tracemalloc; fail if its peak is near an n x n matrix.

    ``limit`` (bytes) defaults to a quarter of one n x n float64 matrix.
    """
    limit = _MEMORY_SHARE * n * n * 8 if limit is None else limit
    peaks: list[int] = []

    def measured(*args: object) -> object:
        was_tracing = tracemalloc.is_tracing()
        if not was_tracing:
            tracemalloc.start()
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        try:
            result = fn(*args)
            peaks.append(tracemalloc.get_traced_memory()[1] - start)
        finally:
            if not was_tracing:
                tracemalloc.stop()
        return result

    measured.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def pick(result: object) -> object:
        peak = peaks[-1] if peaks else 0
        if peak > limit:
            raise _Unusable(
                f"the right output, with a peak of {peak / 2**20:.1f} MiB",
                f"your function allocated {peak / 2**20:.1f} MiB at n = {n}; one n x n "
                f"float64 matrix is {n * n * 8 / 2**20:.0f} MiB, and the point is to need far "
                f"less (at most {limit / 2**20:.0f} MiB is allowed)",
                "never build the whole n x n matrix: keep one tile of scores at a time (tiled "
                "attention), or running sums (linear attention)",
            )
        return result

    arrange = _append(block) if block is not None else (lambda *arrays: arrays)
    return _run(measured, check_name, [_Spec(case, arrange, shown, diagnose, pick=pick)])


def check_tiled_attention(fn: Callable[..., npt.ArrayLike]) -> CheckReport:
    """Check the reader's tiled attention: exact output, one tile of scores at a time.

    Parameters
    ----------
    fn : callable
        ``fn(Q, K, V, block_size) -> output`` with ``Q (n, d_k)``, ``K (m, d_k)``,
        ``V (m, d_v)`` and a Python int ``block_size``; the output ``(n, d_v)`` must equal
        ``softmax(Q K^T / sqrt(d_k)) V``.

    Returns
    -------
    CheckReport
        Truthy iff every case matches :func:`helpers.scaled_dot_product_attention` and,
        at ``n = m = 2048``, the function's peak memory (measured with ``tracemalloc``)
        stays below a quarter of one ``n x m`` float64 matrix. The report recognises a
        running sum and output that are not rescaled, or only one of the two rescaled,
        blocks normalised on their own, a missing ``1/sqrt(d_k)`` and a dropped last block.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers import scaled_dot_product_attention
    >>> from helpers.checks import check_tiled_attention
    >>> def not_tiled(Q, K, V, block_size):
    ...     return scaled_dot_product_attention(Q, K, V)[0]
    >>> report = check_tiled_attention(not_tiled)
    >>> [r.name for r in report.failures]
    ['no n x m matrix: n = m = 2048']
    """
    rng = np.random.default_rng(7)
    layouts = [
        ("n = m = 64, blocks of 16", 64, 64, 16, 8, 1.0),
        ("n = 50, m = 70: sizes not multiples of 16", 50, 70, 16, 8, 1.0),
        ("one block larger than the sequence", 10, 12, 64, 4, 1.0),
        ("scores near 1e4 (a plain exp overflows)", 20, 40, 8, 4, 60.0),
    ]
    specs = []
    for name, n, m, block, d, spread in layouts:
        Q = rng.normal(size=(n, d)) * spread
        K, V = rng.normal(size=(m, d)) * spread, rng.normal(size=(m, 3))
        expected = scaled_dot_product_attention(Q, K, V)[0]
        specs.append(
            _Spec(
                Case(name, {"Q": Q, "K": K, "V": V}, expected, _TILED_FORMULA),
                _append(block),
                f"Q: {Q.shape}, K: {K.shape}, V: {V.shape}; block_size = {block}",
                _tiled_diagnose(Q, K, V, block),
            )
        )
    n_big, block_big = 2048, 128
    Qb, Kb, Vb = (rng.normal(size=(n_big, 4)) for _ in range(3))
    expected_big = scaled_dot_product_attention(Qb, Kb, Vb)[0]
    report = _run(fn, "check_tiled_attention", specs)
    memory = _memory_case(
        fn,
        "check_tiled_attention",
        Case(
            f"no n x m matrix: n = m = {n_big}",
            {"Q": Qb, "K": Kb, "V": Vb},
            expected_big,
            _TILED_FORMULA,
        ),
        block_big,
        f"Q, K, V: ({n_big}, 4) each; block_size = {block_big}; peak memory measured",
        n_big,
        _tiled_diagnose(Qb, Kb, Vb, block_big),
    )
    return CheckReport(
        check="check_tiled_attention",
        function=report.function,
        results=report.results + memory.results,
    )


# ---------------------------------------------------------------------------
# check_causal_linear_attention
# ---------------------------------------------------------------------------

_LINEAR_FORMULA = (
    "o_i = phi(q_i) H_i / (phi(q_i) . z_i) with H_i = sum_{j <= i} phi(k_j)^T v_j and "
    "z_i = sum_{j <= i} phi(k_j), phi(x) = elu(x) + 1 entry by entry"
)


def _elu1(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def _relu1(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0) + 1.0


def _causal_linear(
    Q, K, V, *, phi=_elu1, num="causal", den="causal", exclusive=False, normalise=True
):
    Qf, Kf = phi(Q), phi(K)
    H = np.cumsum(Kf[:, :, None] * V[:, None, :], axis=0)
    z = np.cumsum(Kf, axis=0)
    if exclusive:  # sums over j < i
        H = np.concatenate([np.zeros_like(H[:1]), H[:-1]])
        z = np.concatenate([np.zeros_like(z[:1]), z[:-1]])
    if num == "all":
        H = np.broadcast_to(H[-1], H.shape)
    if den == "all":
        z = np.broadcast_to(z[-1], z.shape)
    top = np.einsum("nf,nfv->nv", Qf, H)
    if not normalise:
        return top
    return top / np.einsum("nf,nf->n", Qf, z)[:, None]


def _linear_diagnose(Q, K, V) -> Diagnose:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        with np.errstate(all="ignore"):
            candidates = {
                "not causal": (
                    _causal_linear(Q, K, V, num="all", den="all"),
                    Finding(
                        "every query uses every key: the sums are not causal",
                        "sum over j <= i only: np.cumsum along the positions",
                    ),
                ),
                "exclusive": (
                    _causal_linear(Q, K, V, exclusive=True),
                    Finding(
                        "the sums stop before the query's own key (j < i); token i may attend "
                        "to itself",
                        "add phi(k_i)^T v_i to the state before using it for query i",
                    ),
                ),
                "no denominator": (
                    _causal_linear(Q, K, V, normalise=False),
                    Finding(
                        "the output is not divided by phi(q_i) . z_i, so the weights do not "
                        "sum to 1",
                        _LINEAR_FORMULA,
                    ),
                ),
                "relu + 1": (
                    _causal_linear(Q, K, V, phi=_relu1),
                    Finding(
                        "the feature map is relu(x) + 1; the exercise uses elu(x) + 1 "
                        "(x + 1 for x > 0, exp(x) otherwise)",
                        "phi = np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))",
                    ),
                ),
                "causal numerator only": (
                    _causal_linear(Q, K, V, den="all"),
                    Finding(
                        "the numerator is causal but the denominator sums over every key",
                        "both sums run over j <= i",
                    ),
                ),
                "causal denominator only": (
                    _causal_linear(Q, K, V, num="all"),
                    Finding(
                        "the denominator is causal but the numerator sums over every key",
                        "both sums run over j <= i",
                    ),
                ),
            }
        found = _first_match(got, candidates)
        exclusive = candidates["exclusive"][0]
        if not found and got.shape == exclusive.shape and len(got) > 0:
            with np.errstate(all="ignore"):
                rest = np.allclose(got[1:], exclusive[1:], rtol=1e-5, atol=1e-6)
            # one token: nothing but the first row, which such sums leave 0 or nan
            empty_first = bool(np.all(got[0] == 0) or np.isnan(got[0]).all())
            if rest and (len(got) > 1 or empty_first):  # the first row's 0 / 0 patched
                found = [
                    Finding(
                        "the sums stop before the query's own key (j < i): rows 2 onwards are "
                        "those of exclusive prefix sums, and the first row, which sees no key "
                        "at all, was patched; token i may attend to itself",
                        "add phi(k_i)^T v_i and phi(k_i) to the state before using it for "
                        "query i: np.cumsum gives the inclusive sums directly",
                    )
                ]
        return found

    return diagnose


def _exclusive_pick(Q, K, V) -> Callable[[object], object]:
    """Recognise sums over j < i, which make the first row 0 / 0 (nan) before the core sees it."""
    with np.errstate(all="ignore"):
        exclusive = _causal_linear(Q, K, V, exclusive=True)

    def pick(result: object) -> object:
        try:
            got = np.asarray(result, dtype=np.float64)
        except (TypeError, ValueError):
            return result
        if (
            got.shape == exclusive.shape
            and np.isnan(got[0]).all()
            and np.allclose(got[1:], exclusive[1:], rtol=_SLIP_RTOL, atol=_SLIP_ATOL)
        ):
            raise _Unusable(
                "nan in the first row, the sums over j < i in the others",
                "the sums stop before the query's own key (j < i), so the first token sees no "
                "key at all (0 / 0); token i may attend to itself",
                "add phi(k_i)^T v_i to the state before using it for query i",
            )
        return result

    return pick


def check_causal_linear_attention(fn: Callable[..., npt.ArrayLike]) -> CheckReport:
    """Check the reader's causal linear attention with the feature map elu + 1.

    Parameters
    ----------
    fn : callable
        ``fn(Q, K, V) -> output`` with ``Q``, ``K`` of shape ``(n, d)`` and ``V`` of
        shape ``(n, d_v)``, computing
        ``o_i = phi(q_i) H_i / (phi(q_i) . z_i)``, ``H_i = sum_{j <= i} phi(k_j)^T v_j``,
        ``z_i = sum_{j <= i} phi(k_j)`` and ``phi(x) = elu(x) + 1``.

    Returns
    -------
    CheckReport
        Truthy iff every case matches, including one at ``n = 2048`` where the peak
        memory must stay below a quarter of an ``n x n`` float64 matrix. The report
        recognises non-causal sums, sums over ``j < i`` (with or without a patched
        first row), a missing denominator, relu + 1,
        and a numerator and denominator of which only one is causal.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_causal_linear_attention
    >>> def not_causal(Q, K, V):
    ...     phi = lambda x: np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))
    ...     Qf, Kf = phi(Q), phi(K)
    ...     return Qf @ (Kf.T @ V) / (Qf @ Kf.sum(axis=0))[:, None]
    >>> report = check_causal_linear_attention(not_causal)
    >>> report.failures[0].problem.split(":")[0]
    'every query uses every key'
    """
    rng = np.random.default_rng(11)
    layouts = [
        ("n = 6, d = 4", 6, 4, 2),
        ("n = 40, d = 8, d_v = 5", 40, 8, 5),
        ("a single token", 1, 3, 2),
    ]
    specs = []
    for name, n, d, d_v in layouts:
        Q, K, V = rng.normal(size=(n, d)), rng.normal(size=(n, d)), rng.normal(size=(n, d_v))
        specs.append(
            _Spec(
                Case(name, {"Q": Q, "K": K, "V": V}, _causal_linear(Q, K, V), _LINEAR_FORMULA),
                lambda *arrays: arrays,
                f"Q: {Q.shape}, K: {K.shape}, V: {V.shape}",
                _linear_diagnose(Q, K, V),
                pick=_exclusive_pick(Q, K, V),
            )
        )
    report = _run(fn, "check_causal_linear_attention", specs)
    n_big = 2048
    Qb, Kb, Vb = (rng.normal(size=(n_big, 4)) for _ in range(3))
    memory = _memory_case(
        fn,
        "check_causal_linear_attention",
        Case(
            f"no n x n matrix: n = {n_big}",
            {"Q": Qb, "K": Kb, "V": Vb},
            _causal_linear(Qb, Kb, Vb),
            _LINEAR_FORMULA,
        ),
        None,
        f"Q, K, V: ({n_big}, 4) each; peak memory measured",
        n_big,
        _linear_diagnose(Qb, Kb, Vb),
    )
    return CheckReport(
        check="check_causal_linear_attention",
        function=report.function,
        results=report.results + memory.results,
    )


# ---------------------------------------------------------------------------
# check_kv_cache_bytes
# ---------------------------------------------------------------------------

_KV_FORMULA = (
    "bytes = 2 (keys and values) * num_layers * n * num_kv_heads * d_head * batch * "
    "bytes_per_number"
)


def _kv_diagnose(L: int, h_kv: int, d_head: int, n: int, b: int, nbytes: int, h: int) -> Diagnose:
    right = 2 * L * n * h_kv * d_head * b * nbytes

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        candidates = {
            "no 2": (right // 2, "the factor 2 is missing: the cache holds keys and values"),
            "bits": (right * 8, "the result is in bits (times 8); bytes_per_number is in bytes"),
            "layers": (right // L, "the number of layers is missing: every layer has its cache"),
            "batch": (right // b, "the batch size is missing: every sequence has its cache"),
            "bytes": (
                right // nbytes,
                "bytes_per_number is missing: this is a count of numbers, not of bytes",
            ),
        }
        candidates = {
            "query heads": (
                2 * L * n * h * d_head * b * nbytes,
                f"the query heads ({h}) are used instead of the key/value heads ({h_kv}): with "
                "grouped-query attention only the key/value heads are cached",
            ),
            **candidates,
        }
        value = float(np.asarray(got).reshape(-1)[0])
        for expected, text in candidates.values():
            if expected != right and math.isclose(value, expected, rel_tol=1e-9):
                return [Finding(text, _KV_FORMULA)]
        return []

    return diagnose


def check_kv_cache_bytes(fn: Callable[[int, int, int, int, int, int], object]) -> CheckReport:
    """Check the reader's size of a key/value cache, in bytes.

    Parameters
    ----------
    fn : callable
        ``fn(num_layers, num_kv_heads, d_head, n, batch, bytes_per_number) -> bytes``,
        called with Python ints: ``2 * num_layers * n * num_kv_heads * d_head * batch *
        bytes_per_number``.

    Returns
    -------
    CheckReport
        Truthy iff every case matches. The report recognises a missing factor 2, bits
        for bytes, a missing factor of layers, batch or bytes, and the query heads used
        in place of the key/value heads.

    Examples
    --------
    >>> from helpers.checks import check_kv_cache_bytes
    >>> report = check_kv_cache_bytes(lambda L, h_kv, d, n, b, nb: L * n * h_kv * d * b * nb)
    >>> report.failures[0].problem.split(":")[0]
    'the factor 2 is missing'
    """
    # (name, num_layers, num_kv_heads, d_head, n, batch, bytes, query heads of the model)
    layouts = [
        ("GPT-2 small's shape: 12 layers, 12 heads of 64, float32", 12, 12, 64, 1024, 1, 4, 12),
        (
            "grouped-query: 32 layers, 8 of 32 heads kept, float16, batch 4",
            32,
            8,
            128,
            8192,
            4,
            2,
            32,
        ),
        ("multi-query: one key/value head, 24 layers, bfloat16", 24, 1, 128, 2048, 16, 2, 16),
        ("80 layers, 16 of 64 heads kept, 4096 tokens", 80, 16, 128, 4096, 3, 2, 64),
    ]
    specs = []
    for name, L, h_kv, d, n, b, nb, h in layouts:
        expected = np.array(float(2 * L * n * h_kv * d * b * nb))
        specs.append(
            _Spec(
                Case(name, {}, expected, _KV_FORMULA, rtol=1e-12, atol=0.5),
                _append(L, h_kv, d, n, b, nb),
                f"num_layers = {L}, num_kv_heads = {h_kv}, d_head = {d}, n = {n}, batch = {b}, "
                f"bytes_per_number = {nb} (the model has {h} query heads)",
                _kv_diagnose(L, h_kv, d, n, b, nb, h),
                exact_integer=True,
            )
        )
    return _run(fn, "check_kv_cache_bytes", specs)


# ---------------------------------------------------------------------------
# check_flash1_update (exercise 5.3: FlashAttention's first loop order)
# ---------------------------------------------------------------------------

_FLASH1_FORMULA = (
    "S = Q K_c^T / sqrt(d_k), mu' = max(mu, rowmax S), P = exp(S - mu'), c = exp(mu - mu'), "
    "ell' = c ell + rowsum P, out' = (c ell out + P V_c) / ell': the old output is normalised, "
    "so c ell out is its unnormalised sum relative to the new maximum"
)
_FLASH1_PARTS = ("out", "ell", "mu")


def _flash1_step(out, ell, mu, Q, K_c, V_c, slip: str = "") -> tuple[np.ndarray, ...]:
    """The right update, or one with ``slip``."""
    scale = 1.0 if slip == "no scale" else 1 / math.sqrt(Q.shape[1])
    S = Q @ K_c.T * scale  # (n, b)
    mu_new = S.max(axis=1) if slip == "block max" else np.maximum(mu, S.max(axis=1))
    with np.errstate(all="ignore"):
        P = np.exp(S - mu_new[:, None])
        c = np.exp(mu - mu_new)  # 0 for the empty state (mu = -inf)
        if slip == "block max":
            c = np.where(np.isneginf(mu), 0.0, np.exp(mu - mu_new))
        ell_c = np.ones_like(c) if slip == "ell not rescaled" else c
        ell_new = ell_c * ell + P.sum(axis=1)
        old = {
            "U": c[:, None] * out,
            "no ell": c[:, None] * out,
            "not rescaled": ell[:, None] * out,
        }.get(slip, (c * ell)[:, None] * out)
        if slip == "U":
            return old + P @ V_c, ell_new, mu_new
        if slip == "block average":
            fresh = P / P.sum(axis=1, keepdims=True) @ V_c
            return np.where(ell[:, None] > 0, (out + fresh) / 2, fresh), ell_new, mu_new
        return (old + P @ V_c) / ell_new[:, None], ell_new, mu_new


_FLASH1_SLIPS = {
    "U": (
        "the output is not divided by the new ell: this is FlashAttention-2's unnormalised "
        "running output U, while this loop order keeps the output normalised after every block",
        "return out' = (exp(mu - mu') * ell * out + P @ V_c) / ell'",
    ),
    "no ell": (
        "the old output is rescaled by exp(mu - mu') but not multiplied by its ell: out is "
        "normalised, so its unnormalised sum is ell * out",
        "out' = (exp(mu - mu') * ell * out + P @ V_c) / ell'",
    ),
    "not rescaled": (
        "the old output is multiplied by its ell but not rescaled by exp(mu - mu') when the "
        "running maximum grows",
        "out' = (exp(mu - mu') * ell * out + P @ V_c) / ell'",
    ),
    "ell not rescaled": (
        "the running sum is not rescaled: ell' = ell + rowsum P keeps the old terms relative "
        "to the old maximum",
        "ell' = exp(mu - mu') * ell + P.sum(axis=1)",
    ),
    "block max": (
        "the new maximum is the block's own, not max(mu, rowmax S): the running maximum can "
        "only grow",
        "mu' = np.maximum(mu, S.max(axis=1))",
    ),
    "block average": (
        "the block is normalised on its own and averaged with the old output: a block's "
        "weight must be its share of the whole row, ell_block / ell'",
        _FLASH1_FORMULA,
    ),
    "no scale": ("the scores are not divided by sqrt(d_k)", "S = Q @ K_c.T / np.sqrt(d_k)"),
}


def _flash1_diagnose(part: int) -> Diagnose:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        args = [np.asarray(case.inputs[k]) for k in ("out", "ell", "mu", "Q", "K_c", "V_c")]
        candidates = {
            slip: (_flash1_step(*args, slip)[part], Finding(*text))
            for slip, text in _FLASH1_SLIPS.items()
        }
        return _first_match(got, candidates)

    return diagnose


def _flash1_pick(part: int) -> Callable[[object], object]:
    def pick(result: object) -> object:
        if isinstance(result, (tuple, list)) and len(result) == 3:
            return result[part]
        raise _Unusable(
            type(result).__name__,
            "expected a tuple (out, ell, mu) of the new state",
            "return out_new, ell_new, mu_new",
        )

    return pick


def _flash1_state(Q, K, V, blocks: int, size: int):
    """The state after ``blocks`` key blocks of ``size`` keys, and the next block."""
    n, d_v = Q.shape[0], V.shape[1]
    out, ell, mu = np.zeros((n, d_v)), np.zeros(n), np.full(n, -np.inf)
    for b in range(blocks):
        block = slice(b * size, (b + 1) * size)
        out, ell, mu = _flash1_step(out, ell, mu, Q, K[block], V[block])
    return out, ell, mu, K[blocks * size :], V[blocks * size :]


def check_flash1_update(fn: Callable[..., object]) -> CheckReport:
    """Check the reader's key-block step of FlashAttention's first loop order.

    Parameters
    ----------
    fn : callable
        ``fn(out, ell, mu, Q, K_c, V_c) -> (out_new, ell_new, mu_new)``: ``out (n, d_v)`` is the
        normalised attention output of the queries ``Q (n, d_k)`` over the keys seen so
        far, ``ell (n,)`` and ``mu (n,)`` their running sum and maximum of the scaled
        scores (``out = 0``, ``ell = 0``, ``mu = -inf`` before any key); ``K_c (b, d_k)``
        and ``V_c (b, d_v)`` are the next block of keys and values. Returns the state over
        the keys seen so far and this block, ``out_new`` normalised.

    Returns
    -------
    CheckReport
        Truthy iff ``out_new`` matches in every case (the first block, a block that raises
        the maximum and one that does not, scores near ``1e4``, cross shapes) and
        ``ell_new``, ``mu_new`` in two. The report recognises FlashAttention-2's
        unnormalised output, the old output not multiplied by its ``ell`` or not
        rescaled, ``ell`` not rescaled, the block's own maximum, each block normalised
        and averaged, and a missing ``1/sqrt(d_k)``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_flash1_update
    >>> def unnormalised(out, ell, mu, Q, K_c, V_c):  # FlashAttention-2's U: a slip here
    ...     S = Q @ K_c.T / np.sqrt(Q.shape[1])
    ...     mu_new = np.maximum(mu, S.max(axis=1))
    ...     P, c = np.exp(S - mu_new[:, None]), np.exp(mu - mu_new)
    ...     return c[:, None] * out + P @ V_c, c * ell + P.sum(axis=1), mu_new
    >>> report = check_flash1_update(unnormalised)
    >>> bool(report), report.failures[0].problem.split(":")[0]
    (False, 'the output is not divided by the new ell')
    """
    rng = np.random.default_rng(11)
    specs = []

    def add(name: str, state, Q, part: int = 0) -> None:
        out, ell, mu, K_c, V_c = state
        inputs = {"out": out, "ell": ell, "mu": mu, "Q": Q, "K_c": K_c, "V_c": V_c}
        expected = _flash1_step(out, ell, mu, Q, K_c, V_c)[part]
        shown = (
            f"out: {out.shape}, ell and mu: {ell.shape} after {name.split(' (')[0]}; "
            f"Q: {Q.shape}, K_c: {K_c.shape}, V_c: {V_c.shape}"
        )
        label = name if part == 0 else f"{name}: {_FLASH1_PARTS[part]}"
        specs.append(
            _Spec(
                Case(label, inputs, expected, _FLASH1_FORMULA),
                lambda *arrays: arrays,
                shown,
                _flash1_diagnose(part),
                _flash1_pick(part),
            )
        )

    Q, K, V = rng.normal(size=(4, 8)), rng.normal(size=(12, 8)), rng.normal(size=(12, 3))
    add("the first block (empty state)", _flash1_state(Q, K, V, 0, 4), Q)
    add("a second block", _flash1_state(Q, K, V, 1, 4), Q)
    add("a third block", _flash1_state(Q, K, V, 2, 4), Q)
    K_up = K.copy()
    K_up[8:] *= 4.0  # the third block's scores are larger: the maximum grows
    add("a block that raises the maximum", _flash1_state(Q, K_up, V, 2, 4), Q)
    K_down = K.copy()
    K_down[8:] *= 0.1  # smaller scores: the maximum stays
    add("a block below the maximum", _flash1_state(Q, K_down, V, 2, 4), Q)
    Q_big = rng.normal(size=(3, 4)) * 100.0  # scores up to about 1e4
    K_big = rng.normal(size=(9, 4)) * 50.0
    add("scores near 1e4", _flash1_state(Q_big, K_big, rng.normal(size=(9, 2)), 2, 3), Q_big)
    Q_x = rng.normal(size=(5, 6))
    add(
        "cross shapes (n=5, b=2, d_k=6, d_v=7)",
        _flash1_state(Q_x, rng.normal(size=(6, 6)), rng.normal(size=(6, 7)), 2, 2),
        Q_x,
    )
    for part in (1, 2):
        add("a block that raises the maximum", _flash1_state(Q, K_up, V, 2, 4), Q, part)
    return _run(fn, "check_flash1_update", specs)


# ---------------------------------------------------------------------------
# check_chunked_linear_attention (exercise 5.4: causal linear attention in chunks)
# ---------------------------------------------------------------------------

_CHUNK_FORMULA = (
    "for token i of a chunk starting at c0: o_i = (phi(q_i) H + sum_{c0 <= j <= i} "
    "(phi(q_i) . phi(k_j)) v_j) / (phi(q_i) . z + sum_{c0 <= j <= i} phi(q_i) . phi(k_j)), "
    "with (H, z) the running state of the tokens before c0; after the chunk, add its "
    "phi(k_j)^T v_j and phi(k_j) to the state"
)


def _chunked_variant(Q, K, V, chunk: int, slip: str = "") -> np.ndarray:
    """Causal linear attention chunk by chunk, right or with ``slip``."""
    Qf, Kf = _elu1(Q), _elu1(K)
    n = Q.shape[0]
    H, z = np.zeros((Kf.shape[1], V.shape[1])), np.zeros(Kf.shape[1])
    out = np.empty((n, V.shape[1]))
    n_used = (n // chunk) * chunk if slip == "last chunk dropped" else n
    for c0 in range(0, n_used, chunk):
        q, k, v = Qf[c0 : c0 + chunk], Kf[c0 : c0 + chunk], V[c0 : c0 + chunk]
        if slip == "state first":  # the chunk's own keys added to the state before use
            H, z = H + k.T @ v, z + k.sum(axis=0)
        W = q @ k.T  # (C, C): phi(q_i) . phi(k_j) inside the chunk
        tri = {
            "not causal inside": np.ones(W.shape, dtype=bool),
            "strict inside": np.tril(np.ones(W.shape, dtype=bool), -1),
            "no inside": np.zeros(W.shape, dtype=bool),
        }.get(slip, np.tril(np.ones(W.shape, dtype=bool)))
        W = W * tri
        top = q @ H + W @ v
        bottom = q @ z + W.sum(axis=1)
        out[c0 : c0 + len(q)] = top if slip == "no denominator" else top / bottom[:, None]
        if slip not in ("state first", "no state update"):
            H, z = H + k.T @ v, z + k.sum(axis=0)
    if slip == "last chunk dropped":
        out[n_used:] = 0.0
    return out


_CHUNK_SLIPS = {
    "state first": (
        "the chunk's own keys are added to the running state before it is used, and counted "
        "a second time by the sum inside the chunk",
        "use the state of the tokens before the chunk, then add the chunk's keys after it",
    ),
    "not causal inside": (
        "inside a chunk every query uses every key of the chunk, the later ones too",
        "keep j <= i inside the chunk: multiply the C x C matrix by np.tril(np.ones((C, C)))",
    ),
    "strict inside": (
        "inside a chunk a query leaves out its own key (j < i); token i may attend to itself",
        "np.tril with the diagonal: np.tril(np.ones((C, C)))",
    ),
    "no inside": (
        "the keys of the query's own chunk are left out: only the state of earlier chunks is used",
        _CHUNK_FORMULA,
    ),
    "no state update": (
        "the running state is never updated: a query sees only the keys of its own chunk",
        "after each chunk: H = H + phi(K_c)^T V_c and z = z + phi(K_c).sum(axis=0)",
    ),
    "no denominator": (
        "the output is not divided by phi(q_i) . z + the chunk's row sum, so the weights do not "
        "sum to 1",
        _CHUNK_FORMULA,
    ),
    "last chunk dropped": (
        "the last, partial chunk is left out (n is not a multiple of chunk)",
        "loop with range(0, n, chunk) and slice Q[c0 : c0 + chunk]",
    ),
}


def _chunked_diagnose(Q, K, V, chunk: int) -> Diagnose:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        with np.errstate(all="ignore"):
            candidates = {
                slip: (_chunked_variant(Q, K, V, chunk, slip), Finding(*text))
                for slip, text in _CHUNK_SLIPS.items()
            }
        return _first_match(got, candidates)

    return diagnose


def check_chunked_linear_attention(fn: Callable[..., npt.ArrayLike]) -> CheckReport:
    """Check the reader's causal linear attention computed in chunks.

    Parameters
    ----------
    fn : callable
        ``fn(Q, K, V, chunk) -> out`` with ``Q, K (n, d)``, ``V (n, d_v)`` and ``chunk``
        a Python int: causal linear attention with ``phi = elu + 1``, shape ``(n, d_v)``,
        computed chunk by chunk (a ``chunk x chunk`` matrix inside each chunk, a running
        state across chunks).

    Returns
    -------
    CheckReport
        Truthy iff every case matches (chunks of 1, 3, 4 and 16 tokens, a chunk longer
        than the sequence, ``n`` not a multiple of the chunk) and, at ``n = 2048``,
        ``d = d_v = 64``, the peak memory stays below 24 MiB (one ``n x n`` matrix is 32
        MiB, one state per token 64 MiB). The report recognises the
        chunk's keys counted twice (state updated before use), a chunk not causal inside
        or without its diagonal, the chunk's own keys or the earlier chunks left out, no
        denominator, and the last partial chunk dropped.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_chunked_linear_attention
    >>> def full_chunks(Q, K, V, chunk):  # inside a chunk, not causal: a slip
    ...     phi = lambda x: np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))
    ...     H, z, out = np.zeros((Q.shape[1], V.shape[1])), np.zeros(Q.shape[1]), []
    ...     for c0 in range(0, len(Q), chunk):
    ...         q, k, v = phi(Q[c0 : c0 + chunk]), phi(K[c0 : c0 + chunk]), V[c0 : c0 + chunk]
    ...         W = q @ k.T
    ...         out.append((q @ H + W @ v) / (q @ z + W.sum(axis=1))[:, None])
    ...         H, z = H + k.T @ v, z + k.sum(axis=0)
    ...     return np.concatenate(out)
    >>> report = check_chunked_linear_attention(full_chunks)
    >>> report.failures[0].problem.split(",")[0]
    'inside a chunk every query uses every key of the chunk'
    """
    rng = np.random.default_rng(12)
    layouts = [
        ("chunks of 4, n = 12", 12, 4),
        ("chunks of 3, n = 10 (a partial last chunk)", 10, 3),
        ("chunks of 1 (the running state)", 6, 1),
        ("one chunk longer than the sequence", 7, 16),
        ("chunks of 16, n = 40", 40, 16),
    ]
    specs = []
    for name, n, chunk in layouts:
        Q, K, V = rng.normal(size=(n, 4)), rng.normal(size=(n, 4)), rng.normal(size=(n, 3))
        specs.append(
            _Spec(
                Case(name, {"Q": Q, "K": K, "V": V}, _causal_linear(Q, K, V), _CHUNK_FORMULA),
                _append(chunk),
                f"Q, K: {Q.shape}, V: {V.shape}, chunk = {chunk}",
                _chunked_diagnose(Q, K, V, chunk),
            )
        )
    report = _run(fn, "check_chunked_linear_attention", specs)
    # d = d_v = 64: one state per token, an (n, d, d_v) array, is 64 MiB, n x n is 32 MiB,
    # a chunked answer about 2 MiB. The limit leaves room for what grading adds in this
    # process (the inputs, encoded for the student's kernel: about 10 MiB here).
    n_big, d_big = 2048, 64
    Qb, Kb, Vb = (rng.normal(size=(n_big, d_big)) / 4 for _ in range(3))
    memory = _memory_case(
        fn,
        "check_chunked_linear_attention",
        Case(
            f"no n x n matrix, no state per token: n = {n_big}, chunks of 64",
            {"Q": Qb, "K": Kb, "V": Vb},
            _chunked_variant(Qb, Kb, Vb, 64),
            _CHUNK_FORMULA,
        ),
        64,
        f"Q, K, V: ({n_big}, {d_big}) each, chunk = 64; peak memory measured",
        n_big,
        _chunked_diagnose(Qb, Kb, Vb, 64),
        limit=24 * 2**20,
    )
    return CheckReport(
        check="check_chunked_linear_attention",
        function=report.function,
        results=report.results + memory.results,
    )

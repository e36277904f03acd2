"""Self-checks of chapter 5 (the cost of attention), built on :mod:`helpers.checks.core`.

The merge rule of the online softmax, a tiled forward pass and the key-block step of
FlashAttention's first loop order, causal linear attention as a running sum and in chunks
(whose peak memory is measured too), and the bytes of a key/value cache. When an answer is
wrong, the diagnosis recomputes it with each usual slip and names the one that reproduces
the reader's numbers.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import tracemalloc
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from helpers.attention import scaled_dot_product_attention
from helpers.checks.core import (
    Case,
    CheckReport,
    Diagnose,
    Finding,
    _short_repr,
    explain,
    nan_aware,
    section,
)
from helpers.checks.multihead import _append, _run, _Spec, _Unusable
from helpers.i18n import msg

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

_ONLINE = section(5, "The online softmax")
_TILED = section(5, "Tiled exact attention")
_RUNNING_SUM = section(5, "The causal form is a running sum")
_KV_CACHE = section(5, "The key/value cache")
_MERGE_TEXT = (
    "the (mu, ell) of the union of the two blocks: the same as if all their scores had been "
    "summarised at once"
)
_EMPTY_TEXT = (
    "an empty block (mu = -inf, ell = 0) changes nothing, and two empty blocks give an empty "
    "block, not nan"
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
            _short_repr(result),
            msg("could not read (mu, ell) as arrays: {err}", err=err),
            "",
        ) from err


def _merge_diagnose(mu1, l1, mu2, l2) -> Diagnose:
    @nan_aware
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        mu = np.maximum(mu1, mu2)
        common = "both sums must be relative to the same maximum, the union's"
        with np.errstate(all="ignore"):
            candidates = {
                "no rescale": (
                    np.stack([mu, l1 + l2]),
                    Finding(
                        "the sums are added without rescaling: each block's sum was taken "
                        "relative to its own maximum",
                        common,
                    ),
                ),
                "wrong sign": (
                    np.stack([mu, np.exp(mu - mu1) * l1 + np.exp(mu - mu2) * l2]),
                    Finding(
                        "the sums are rescaled by exp(mu - mu_b), the wrong sign",
                        "a sum brought to a larger maximum can only shrink",
                    ),
                ),
                "larger sum": (
                    np.stack([mu, np.maximum(l1, l2)]),
                    Finding(
                        "ell is the larger of the two sums",
                        "ell of the union counts every score of both blocks",
                    ),
                ),
                "sum of maxima": (
                    np.stack([mu1 + mu2, _merge_reference(mu1, l1, mu2, l2)[1]]),
                    Finding("mu is mu1 + mu2", "the maximum of the union is a maximum"),
                ),
                "first only": (
                    np.stack([mu1, l1]),
                    Finding(
                        "the result is the first block's (mu, ell): the second block is ignored",
                        _MERGE_TEXT,
                    ),
                ),
            }
        found = _first_match(got, candidates)
        if not found and np.isnan(got).any():
            found = [
                Finding(
                    "nan where both blocks are empty (mu1 = mu2 = -inf): -inf - (-inf) is nan",
                    "where the union is empty there is nothing to rescale: its ell is 0",
                )
            ]
        return found

    return diagnose


def check_online_softmax_merge(
    fn: Callable[
        [np.ndarray, np.ndarray, np.ndarray, np.ndarray], tuple[npt.ArrayLike, npt.ArrayLike]
    ],
    *,
    hint: bool = False,
) -> CheckReport:
    """Check the reader's merge of two blocks' running maxima and sums (the online softmax).

    Parameters
    ----------
    fn : callable
        ``fn(mu1, ell1, mu2, ell2) -> (mu, ell)`` on arrays of shape ``(n,)``: one entry
        per row, ``mu_b`` the largest score of block ``b`` and ``ell_b`` the sum of
        ``exp(s - mu_b)`` over it; an empty block has ``mu = -inf``, ``ell = 0``.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case matches the merge rule. The report recognises sums added
        without rescaling, the rescaling with the wrong sign, the larger sum in place of
        the sum, the sum of the maxima, the second block ignored, and ``nan`` for two
        empty blocks.

    Examples
    --------
    >>> from helpers.checks import check_online_softmax_merge
    >>> def first_block(mu1, ell1, mu2, ell2):  # the second block is forgotten
    ...     return mu1, ell1
    >>> report = check_online_softmax_merge(first_block)
    >>> report.status, "the second block is ignored" in repr(report)
    ('failed', True)
    """
    rng = np.random.default_rng(5)
    layouts = []
    s1, s2 = rng.normal(size=(4, 6)) * 2, rng.normal(size=(4, 9)) * 2
    layouts.append(("two blocks of ordinary scores", s1, s2, _MERGE_TEXT))
    layouts.append(
        (
            "scores near 1e4 (a plain exp overflows)",
            s1 + 1e4,
            s2 + 9990.0,
            "scores near 1e4: mu is near 1e4, ell at most the number of scores, and nothing "
            "overflows",
        )
    )
    layouts.append(
        (
            "one block far larger than the other",
            s1 - 500.0,
            s2,
            "the first block's scores are 500 below the second's: it adds almost nothing "
            "to the union's ell",
        )
    )
    stats = []
    for name, a, b, text in layouts:
        mu1, mu2 = a.max(axis=1), b.max(axis=1)
        l1 = np.exp(a - mu1[:, None]).sum(axis=1)
        l2 = np.exp(b - mu2[:, None]).sum(axis=1)
        stats.append((name, mu1, l1, mu2, l2, text))
    inf = np.inf
    stats.append(
        (
            "empty blocks (mu = -inf, ell = 0)",
            np.array([-inf, 1.5, -inf]),
            np.array([0.0, 2.0, 0.0]),
            np.array([0.3, -inf, -inf]),
            np.array([3.0, 0.0, 0.0]),
            _EMPTY_TEXT,
        )
    )
    specs = []
    for name, mu1, l1, mu2, l2, text in stats:
        expected = _merge_reference(mu1, l1, mu2, l2)
        specs.append(
            _Spec(
                Case(name, {"mu1": mu1, "ell1": l1, "mu2": mu2, "ell2": l2}, expected, text),
                lambda *arrays: arrays,
                msg(
                    "mu1, ell1, mu2, ell2: arrays of shape {mu1_shape} (output shown as [mu, ell])",
                    mu1_shape=mu1.shape,
                ),
                _merge_diagnose(mu1, l1, mu2, l2),
                pick=_merge_pick,
            )
        )
    return _run(
        fn,
        "check_online_softmax_merge",
        specs,
        see=_ONLINE,
        more="each block's ell is a sum of exponentials of its scores minus its own "
        "maximum. Write the union's sum, taken relative to the union's maximum, in terms of "
        "the two blocks' sums; then look at the rows where a block, or both, are empty",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_tiled_attention
# ---------------------------------------------------------------------------

_TILED_TEXT = "the same output as attention computed at once, to rounding"
_TILED_MORE = (
    "keep, for each block of queries, a running maximum, a running sum and a running "
    "unnormalised output over the keys seen so far; each block of keys updates them as "
    "the merge rule merges two blocks, and the output is normalised once, at the end"
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


def _tiled_candidates(Q, K, V, block: int) -> dict[str, tuple[np.ndarray, Finding]]:
    """What each slip gives on these inputs, with what the report says about it."""
    rescale = "the old running sum and output are relative to the old maximum"
    texts = {
        "no rescale": (
            "the running sum and output are not rescaled when the running maximum grows: "
            "earlier blocks keep terms relative to the old maximum",
            rescale,
        ),
        "sum only": (
            "the running sum ell is rescaled when the running maximum grows, but the running "
            "output U is not: the earlier blocks' terms in U stay relative to the old maximum",
            rescale,
        ),
        "output only": (
            "the running output U is rescaled when the running maximum grows, but the running "
            "sum ell is not: the earlier blocks' terms in ell stay relative to the old maximum",
            rescale,
        ),
        "blockwise softmax": (
            "each block of keys is normalised on its own and the block outputs averaged: "
            "a block's weights must be relative to the whole row",
            "a block of high scores must weigh more than a block of low ones",
        ),
        "no scale": (
            "the scores are not divided by sqrt(d_k)",
            "the output must equal attention's, scaling included",
        ),
        "last block dropped": (
            "the last, partial block of keys is left out (m is not a multiple of block_size)",
            "every key takes part, those of a partial last block too",
        ),
    }

    with np.errstate(all="ignore"):
        return {
            slip: (_tiled_variant(Q, K, V, block, slip), Finding(*text))
            for slip, text in texts.items()
        }


def _tiled_diagnose(Q, K, V, block: int) -> Diagnose:
    @nan_aware
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        return _first_match(got, _tiled_candidates(Q, K, V, block))

    return diagnose


_N_BIG, _BLOCK_BIG = 2048, 128


@functools.cache
def _tiled_big() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The memory case's inputs and answer, drawn and computed once: they never change
    (nothing writes into them: the reader's function gets copies)."""
    rng = np.random.default_rng(2048)
    Q, K, V = (rng.normal(size=(_N_BIG, 4)) for _ in range(3))
    return Q, K, V, scaled_dot_product_attention(Q, K, V)[0]


@functools.cache
def _tiled_big_candidates() -> dict[str, tuple[np.ndarray, Finding]]:
    return _tiled_candidates(*_tiled_big()[:3], _BLOCK_BIG)


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
                msg("the right output, with a peak of {value:.1f} MiB", value=peak / 2**20),
                msg(
                    "your function allocated {value:.1f} MiB at n = {n}; one n x n float64 "
                    "matrix is {value2:.0f} MiB, and the point is to need far less (at most "
                    "{value3:.0f} MiB is allowed)",
                    value=peak / 2**20,
                    n=n,
                    value2=n * n * 8 / 2**20,
                    value3=limit / 2**20,
                ),
                "never build the whole n x n matrix: keep one tile of scores at a time (tiled "
                "attention), or running sums (linear attention)",
            )
        return result

    arrange = _append(block) if block is not None else (lambda *arrays: arrays)
    return _run(measured, check_name, [_Spec(case, arrange, shown, diagnose, pick=pick)])


def check_tiled_attention(fn: Callable[..., npt.ArrayLike], *, hint: bool = False) -> CheckReport:
    """Check the reader's tiled attention: exact output, one tile of scores at a time.

    Parameters
    ----------
    fn : callable
        ``fn(Q, K, V, block_size) -> output`` with ``Q (n, d_k)``, ``K (m, d_k)``,
        ``V (m, d_v)`` and a Python int ``block_size``; the output ``(n, d_v)`` must equal
        ``softmax(Q K^T / sqrt(d_k)) V``.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case matches scaled dot-product attention and, at
        ``n = m = 2048``, the function's peak memory (measured with ``tracemalloc``)
        stays below a quarter of one ``n x m`` float64 matrix. The report recognises a
        running sum and output that are not rescaled, or only one of the two rescaled,
        blocks normalised on their own, a missing ``1/sqrt(d_k)`` and a dropped last block.

    Examples
    --------
    >>> from helpers.checks import check_tiled_attention
    >>> def values_back(Q, K, V, block_size):  # the values themselves: no attention at all
    ...     return V[: len(Q)]
    >>> check_tiled_attention(values_back).status
    'failed'
    """
    rng = np.random.default_rng(7)
    layouts = [
        ("n = m = 64, blocks of 16", 64, 64, 16, 8, 1.0, _TILED_TEXT),
        (
            "n = 50, m = 70: sizes not multiples of 16",
            50,
            70,
            16,
            8,
            1.0,
            "n and m are not multiples of the block size: the last blocks are partial",
        ),
        (
            "one block larger than the sequence",
            10,
            12,
            64,
            4,
            1.0,
            "a block larger than the sequence: a single tile of scores",
        ),
        (
            "scores near 1e4 (a plain exp overflows)",
            20,
            40,
            8,
            4,
            60.0,
            msg(
                "scores near 1e4: nothing may overflow, as in the online softmax ({online})",
                online=_ONLINE,
            ),
        ),
    ]
    specs = []
    for name, n, m, block, d, spread, text in layouts:
        Q = rng.normal(size=(n, d)) * spread
        K, V = rng.normal(size=(m, d)) * spread, rng.normal(size=(m, 3))
        expected = scaled_dot_product_attention(Q, K, V)[0]
        specs.append(
            _Spec(
                Case(name, {"Q": Q, "K": K, "V": V}, expected, text),
                _append(block),
                msg(
                    "Q: {q_shape}, K: {k_shape}, V: {v_shape}; block_size = {block}",
                    q_shape=Q.shape,
                    k_shape=K.shape,
                    v_shape=V.shape,
                    block=block,
                ),
                _tiled_diagnose(Q, K, V, block),
            )
        )
    Qb, Kb, Vb, expected_big = _tiled_big()
    report = _run(fn, "check_tiled_attention", specs)
    memory = _memory_case(
        fn,
        "check_tiled_attention",
        Case(
            msg("no n x m matrix: n = m = {n_big}", n_big=_N_BIG),
            {"Q": Qb, "K": Kb, "V": Vb},
            expected_big,
            msg("{tiled_text}, with one tile of scores at a time", tiled_text=_TILED_TEXT),
        ),
        _BLOCK_BIG,
        msg(
            "Q, K, V: ({n_big}, 4) each; block_size = {block_big}; peak memory measured",
            n_big=_N_BIG,
            block_big=_BLOCK_BIG,
        ),
        _N_BIG,
        nan_aware(lambda case, got: _first_match(got, _tiled_big_candidates())),
    )
    return explain(
        dataclasses.replace(report, results=report.results + memory.results),
        see=_TILED,
        more=_TILED_MORE,
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_causal_linear_attention
# ---------------------------------------------------------------------------

_LINEAR_TEXT = (
    "the output of causal linear attention with the feature map elu + 1: token i uses the keys "
    "j <= i, its own included, and its weights sum to 1"
)
_LINEAR_MORE = (
    "both the numerator and the denominator of the causal form are sums over the keys up to "
    "the query: keep them as running sums along the sequence, updated by each token before "
    "it is used, and apply the feature map to the queries and the keys alike"
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
    @nan_aware
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        both = "both sums run over the keys up to the query"
        with np.errstate(all="ignore"):
            candidates = {
                "not causal": (
                    _causal_linear(Q, K, V, num="all", den="all"),
                    Finding(
                        "every query uses every key: the sums are not causal",
                        "token i may not use the keys after it",
                    ),
                ),
                "exclusive": (
                    _causal_linear(Q, K, V, exclusive=True),
                    Finding(
                        "the sums stop before the query's own key (j < i); token i may attend "
                        "to itself",
                        "each token's own key belongs to the sums it uses",
                    ),
                ),
                "no denominator": (
                    _causal_linear(Q, K, V, normalise=False),
                    Finding(
                        "the output is not divided by phi(q_i) . z_i, so the weights do not "
                        "sum to 1",
                        "a query's weights sum to 1",
                    ),
                ),
                "relu + 1": (
                    _causal_linear(Q, K, V, phi=_relu1),
                    Finding(
                        "the feature map is relu(x) + 1; the exercise uses elu(x) + 1 "
                        "(x + 1 for x > 0, exp(x) otherwise)",
                        "the two differ on negative entries only",
                    ),
                ),
                "causal numerator only": (
                    _causal_linear(Q, K, V, den="all"),
                    Finding(
                        "the numerator is causal but the denominator sums over every key",
                        both,
                    ),
                ),
                "causal denominator only": (
                    _causal_linear(Q, K, V, num="all"),
                    Finding(
                        "the denominator is causal but the numerator sums over every key",
                        both,
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
                        "each token's own key belongs to the sums it uses",
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
                "each token's own key belongs to the sums it uses",
            )
        return result

    return pick


def check_causal_linear_attention(
    fn: Callable[..., npt.ArrayLike], *, hint: bool = False
) -> CheckReport:
    """Check the reader's causal linear attention with the feature map elu + 1.

    Parameters
    ----------
    fn : callable
        ``fn(Q, K, V) -> output`` with ``Q``, ``K`` of shape ``(n, d)`` and ``V`` of
        shape ``(n, d_v)``: causal linear attention with ``phi(x) = elu(x) + 1``, token
        ``i`` using the keys ``j <= i``.
    hint : bool, default False
        Add a fuller hint to a failing report.

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
    >>> from helpers.checks import check_causal_linear_attention
    >>> def values_back(Q, K, V):  # each token's own value: no attention at all
    ...     return V
    >>> check_causal_linear_attention(values_back).status
    'failed'
    """
    rng = np.random.default_rng(11)
    layouts = [
        ("n = 6, d = 4", 6, 4, 2, _LINEAR_TEXT),
        ("n = 40, d = 8, d_v = 5", 40, 8, 5, _LINEAR_TEXT),
        (
            "a single token",
            1,
            3,
            2,
            "a single token attends to itself alone: the output is its value",
        ),
    ]
    specs = []
    for name, n, d, d_v, text in layouts:
        Q, K, V = rng.normal(size=(n, d)), rng.normal(size=(n, d)), rng.normal(size=(n, d_v))
        specs.append(
            _Spec(
                Case(name, {"Q": Q, "K": K, "V": V}, _causal_linear(Q, K, V), text),
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
            msg("no n x n matrix: n = {n_big}", n_big=n_big),
            {"Q": Qb, "K": Kb, "V": Vb},
            _causal_linear(Qb, Kb, Vb),
            msg("{linear_text}; without any n x n matrix", linear_text=_LINEAR_TEXT),
        ),
        None,
        msg("Q, K, V: ({n_big}, 4) each; peak memory measured", n_big=n_big),
        n_big,
        _linear_diagnose(Qb, Kb, Vb),
    )
    return explain(
        dataclasses.replace(report, results=report.results + memory.results),
        see=_RUNNING_SUM,
        more=_LINEAR_MORE,
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_kv_cache_bytes
# ---------------------------------------------------------------------------

_KV_TEXT = (
    "count what the cache stores: which arrays, in which layers, for how many tokens of how "
    "many sequences, and how many bytes each number takes"
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
                msg(
                    "the query heads ({h}) are used instead of the key/value heads ({h_kv}): "
                    "with grouped-query attention only the key/value heads are cached",
                    h=h,
                    h_kv=h_kv,
                ),
            ),
            **candidates,
        }
        value = float(np.asarray(got).reshape(-1)[0])
        for expected, text in candidates.values():
            if expected != right and math.isclose(value, expected, rel_tol=1e-9):
                return [Finding(text, _KV_TEXT)]
        return []

    return diagnose


def check_kv_cache_bytes(
    fn: Callable[[int, int, int, int, int, int], object], *, hint: bool = False
) -> CheckReport:
    """Check the reader's size of a key/value cache, in bytes.

    Parameters
    ----------
    fn : callable
        ``fn(num_layers, num_kv_heads, d_head, n, batch, bytes_per_number) -> bytes``,
        called with Python ints: the bytes of the key/value cache of ``batch`` sequences
        of ``n`` tokens.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case matches. The report recognises a missing factor 2, bits
        for bytes, a missing factor of layers, batch or bytes, and the query heads used
        in place of the key/value heads.

    Examples
    --------
    >>> from helpers.checks import check_kv_cache_bytes
    >>> def weights_only(num_layers, num_kv_heads, d_head, n, batch, bytes_per_number):
    ...     return num_layers * num_kv_heads * d_head * bytes_per_number  # no token at all
    >>> check_kv_cache_bytes(weights_only).status
    'failed'
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
                Case(name, {}, expected, _KV_TEXT, rtol=1e-12, atol=0.5),
                _append(L, h_kv, d, n, b, nb),
                msg(
                    "num_layers = {l}, num_kv_heads = {h_kv}, d_head = {d}, n = {n}, batch = "
                    "{b}, bytes_per_number = {nb} (the model has {h} query heads)",
                    l=L,
                    h_kv=h_kv,
                    d=d,
                    n=n,
                    b=b,
                    nb=nb,
                    h=h,
                ),
                _kv_diagnose(L, h_kv, d, n, b, nb, h),
                exact_integer=True,
            )
        )
    return _run(
        fn,
        "check_kv_cache_bytes",
        specs,
        see=_KV_CACHE,
        more="list what one token of one sequence adds to the cache in one layer, in "
        "numbers, then multiply by everything that repeats it and by the size of a number",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_flash1_update (exercise 5.3: FlashAttention's first loop order)
# ---------------------------------------------------------------------------

_FLASH1_TEXT = (
    "out normalised over every key seen so far and this block, with ell and mu the running "
    "sum and maximum over those keys"
)
_FLASH1_MORE = (
    "the old output is normalised: first recover what it stands for before normalisation, "
    "relative to the old maximum; then merge it with the new block as the merge rule merges "
    "two blocks' sums, and normalise again. On the first block the empty state must drop "
    "out by itself"
)
_FLASH1_PARTS = ("out", "ell", "mu")


def _flash1_step(out, ell, mu, Q, K_c, V_c, slip: str = "") -> tuple[np.ndarray, ...]:
    """The right update, or one with ``slip``."""
    if slip == "unchanged":
        return out, ell, mu
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
        "out must stay normalised after every block: its weights sum to 1",
    ),
    "no ell": (
        "the old output is rescaled for the new maximum but not multiplied by its ell: out "
        "is normalised, so it does not stand for a sum of exponentials until it is",
        "what sum of exponentials does the normalised old output stand for?",
    ),
    "not rescaled": (
        "the old output is multiplied by its ell but not rescaled when the running maximum grows",
        "the old sums are relative to the old maximum",
    ),
    "ell not rescaled": (
        "the running sum is not rescaled when the running maximum grows: it keeps the old "
        "terms relative to the old maximum",
        "the old sums are relative to the old maximum",
    ),
    "block max": (
        "the new maximum is the block's own: the running maximum is over every key seen",
        "the running maximum can only grow",
    ),
    "block average": (
        "the block is normalised on its own and averaged with the old output: a block's "
        "weight must be its share of the whole row",
        "a block of high scores must weigh more than a block of low ones",
    ),
    "no scale": (
        "the scores are not divided by sqrt(d_k)",
        "the scores are scaled as in attention",
    ),
    "unchanged": (
        "the state came back unchanged: the block's keys were not taken in",
        _FLASH1_TEXT,
    ),
}


def _flash1_diagnose(part: int) -> Diagnose:
    @nan_aware
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
            "return the three arrays of the new state, in that order",
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


def check_flash1_update(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
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
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff ``out_new`` matches in every case (the first block, a block that raises
        the maximum and one that does not, scores near ``1e4``, cross shapes) and
        ``ell_new``, ``mu_new`` in two. The report recognises FlashAttention-2's
        unnormalised output, the old output not multiplied by its ``ell`` or not
        rescaled, ``ell`` not rescaled, the block's own maximum, each block normalised
        and averaged, a missing ``1/sqrt(d_k)``, and the state returned unchanged.

    Examples
    --------
    >>> from helpers.checks import check_flash1_update
    >>> def unchanged(out, ell, mu, Q, K_c, V_c):  # the new block is never taken in
    ...     return out, ell, mu
    >>> report = check_flash1_update(unchanged)
    >>> bool(report), report.failures[0].problem.split(":")[0]
    (False, 'the state came back unchanged')
    """
    rng = np.random.default_rng(11)
    specs = []
    texts = {
        "the first block (empty state)": "before any key the state is empty (out = 0, "
        "ell = 0, mu = -inf): the new state is that of this block alone",
        "a block that raises the maximum": "this block's scores exceed the running maximum: "
        "the old state is relative to a maximum that is no longer the largest",
        "a block below the maximum": "this block's scores stay below the running maximum, "
        "which does not change",
        "scores near 1e4": "scores near 1e4: nothing may overflow",
        "cross shapes (n=5, b=2, d_k=6, d_v=7)": "n, b, d_k and d_v all different: out is "
        "(n, d_v), ell and mu (n,)",
    }

    def add(name: str, state, Q, part: int = 0) -> None:
        out, ell, mu, K_c, V_c = state
        inputs = {"out": out, "ell": ell, "mu": mu, "Q": Q, "K_c": K_c, "V_c": V_c}
        expected = _flash1_step(out, ell, mu, Q, K_c, V_c)[part]
        shown = msg(
            "out: {out_shape}, ell and mu: {ell_shape} after {split}; Q: {q_shape}, "
            "K_c: {k_c_shape}, V_c: {v_c_shape}",
            out_shape=out.shape,
            ell_shape=ell.shape,
            split=name.split(" (")[0],
            q_shape=Q.shape,
            k_c_shape=K_c.shape,
            v_c_shape=V_c.shape,
        )
        label = name if part == 0 else msg("{name}: {part}", name=name, part=_FLASH1_PARTS[part])
        specs.append(
            _Spec(
                Case(label, inputs, expected, texts.get(name, _FLASH1_TEXT)),
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
    return _run(
        fn,
        "check_flash1_update",
        specs,
        see=msg("{online} and {tiled}", online=_ONLINE, tiled=_TILED),
        more=_FLASH1_MORE,
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_chunked_linear_attention (exercise 5.4: causal linear attention in chunks)
# ---------------------------------------------------------------------------

_CHUNK_TEXT = (
    "the output of causal linear attention with the feature map elu + 1, the same whatever "
    "the chunk: token i uses the keys j <= i, its own included, and its weights sum to 1"
)
_CHUNK_MORE = (
    "the two sums of the causal form run over the keys up to the query: some of those keys "
    "are in earlier chunks, some in the query's own chunk. Find for each part a way to "
    "compute it within the memory the statement allows, then decide when a chunk joins "
    "what is carried forward"
)


def _chunked_variant(Q, K, V, chunk: int, slip: str = "") -> np.ndarray:
    """Causal linear attention chunk by chunk, right or with ``slip``."""
    Qf = Q if slip in ("no phi on the queries", "no phi") else _elu1(Q)
    Kf = K if slip in ("no phi on the keys", "no phi") else _elu1(K)
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
        "the state a chunk uses holds the tokens before the chunk only",
    ),
    "not causal inside": (
        "inside a chunk every query uses every key of the chunk, the later ones too",
        "a query may not use the keys after it, inside its own chunk too",
    ),
    "strict inside": (
        "inside a chunk a query leaves out its own key (j < i); token i may attend to itself",
        "each token's own key belongs to the sums it uses",
    ),
    "no inside": (
        "the keys of the query's own chunk are left out: only the state of earlier chunks is used",
        "a query uses the keys of its own chunk up to itself as well",
    ),
    "no state update": (
        "the running state is never updated: a query sees only the keys of its own chunk",
        "the state carries every earlier chunk",
    ),
    "no denominator": (
        "the output is not divided by the sum of its weights, so they do not sum to 1",
        "a query's weights sum to 1",
    ),
    "last chunk dropped": (
        "the last, partial chunk is left out (n is not a multiple of chunk)",
        "every token takes part, those of a partial last chunk too",
    ),
    "no phi on the queries": (
        "the feature map is applied to the keys but not to the queries",
        "the feature map applies to the queries and to the keys alike",
    ),
    "no phi on the keys": (
        "the feature map is applied to the queries but not to the keys",
        "the feature map applies to the queries and to the keys alike",
    ),
    "no phi": (
        "no feature map: the queries and keys are used as they are, so a weight can be negative",
        "the feature map makes every weight positive",
    ),
}


def _chunked_candidates(Q, K, V, chunk: int) -> dict[str, tuple[np.ndarray, Finding]]:
    with np.errstate(all="ignore"):
        return {
            slip: (_chunked_variant(Q, K, V, chunk, slip), Finding(*text))
            for slip, text in _CHUNK_SLIPS.items()
        }


def _chunked_diagnose(Q, K, V, chunk: int) -> Diagnose:
    @nan_aware
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        return _first_match(got, _chunked_candidates(Q, K, V, chunk))

    return diagnose


_D_BIG, _CHUNK_BIG = 64, 64


@functools.cache
def _chunked_big() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The memory case's inputs and answer, computed once (see :func:`_tiled_big`)."""
    rng = np.random.default_rng(2064)
    Q, K, V = (rng.normal(size=(_N_BIG, _D_BIG)) / 4 for _ in range(3))
    return Q, K, V, _chunked_variant(Q, K, V, _CHUNK_BIG)


@functools.cache
def _chunked_big_candidates() -> dict[str, tuple[np.ndarray, Finding]]:
    return _chunked_candidates(*_chunked_big()[:3], _CHUNK_BIG)


def check_chunked_linear_attention(
    fn: Callable[..., npt.ArrayLike], *, hint: bool = False
) -> CheckReport:
    """Check the reader's causal linear attention computed in chunks.

    Parameters
    ----------
    fn : callable
        ``fn(Q, K, V, chunk) -> out`` with ``Q, K (n, d)``, ``V (n, d_v)`` and ``chunk``
        a Python int: causal linear attention with ``phi = elu + 1``, shape ``(n, d_v)``,
        computed chunk by chunk (a ``chunk x chunk`` matrix inside each chunk, a running
        state across chunks).
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case matches (chunks of 1, 3, 4 and 16 tokens, a chunk longer
        than the sequence, ``n`` not a multiple of the chunk) and, at ``n = 2048``,
        ``d = d_v = 64``, the peak memory stays below 24 MiB (one ``n x n`` matrix is 32
        MiB, one state per token 64 MiB). The report recognises the
        chunk's keys counted twice (state updated before use), a chunk not causal inside
        or without its diagonal, the chunk's own keys or the earlier chunks left out, no
        denominator, the last partial chunk dropped, and the feature map missing on the
        queries, on the keys or on both.

    Examples
    --------
    >>> from helpers.checks import check_chunked_linear_attention
    >>> def values_back(Q, K, V, chunk):  # each token's own value: no attention at all
    ...     return V
    >>> check_chunked_linear_attention(values_back).status
    'failed'
    """
    rng = np.random.default_rng(12)
    layouts = [
        ("chunks of 4, n = 12", 12, 4, _CHUNK_TEXT),
        (
            "chunks of 3, n = 10 (a partial last chunk)",
            10,
            3,
            "n is not a multiple of the chunk: the last chunk has a single token",
        ),
        (
            "chunks of 1 (the running state)",
            6,
            1,
            "chunks of one token: the state alone carries every earlier key",
        ),
        (
            "one chunk longer than the sequence",
            7,
            16,
            "one chunk covers the whole sequence: its masked C x C matrix alone",
        ),
        ("chunks of 16, n = 40", 40, 16, _CHUNK_TEXT),
    ]
    specs = []
    for name, n, chunk, text in layouts:
        Q, K, V = rng.normal(size=(n, 4)), rng.normal(size=(n, 4)), rng.normal(size=(n, 3))
        specs.append(
            _Spec(
                Case(name, {"Q": Q, "K": K, "V": V}, _causal_linear(Q, K, V), text),
                _append(chunk),
                msg(
                    "Q, K: {q_shape}, V: {v_shape}, chunk = {chunk}",
                    q_shape=Q.shape,
                    v_shape=V.shape,
                    chunk=chunk,
                ),
                _chunked_diagnose(Q, K, V, chunk),
            )
        )
    report = _run(fn, "check_chunked_linear_attention", specs)
    # d = d_v = 64: one state per token, an (n, d, d_v) array, is 64 MiB, n x n is 32 MiB,
    # a chunked answer about 2 MiB. The limit leaves room for what grading adds in this
    # process (the inputs, encoded for the student's kernel: about 10 MiB here).
    Qb, Kb, Vb, expected_big = _chunked_big()
    memory = _memory_case(
        fn,
        "check_chunked_linear_attention",
        Case(
            msg(
                "no n x n matrix, no state per token: n = {n_big}, chunks of {chunk_big}",
                n_big=_N_BIG,
                chunk_big=_CHUNK_BIG,
            ),
            {"Q": Qb, "K": Kb, "V": Vb},
            expected_big,
            msg(
                "{chunk_text}; with one C x C matrix and one d x d_v state at a time",
                chunk_text=_CHUNK_TEXT,
            ),
        ),
        _CHUNK_BIG,
        msg(
            "Q, K, V: ({n_big}, {d_big}) each, chunk = {chunk_big}; peak memory measured",
            n_big=_N_BIG,
            d_big=_D_BIG,
            chunk_big=_CHUNK_BIG,
        ),
        _N_BIG,
        nan_aware(lambda case, got: _first_match(got, _chunked_big_candidates())),
        limit=24 * 2**20,
    )
    return explain(
        dataclasses.replace(report, results=report.results + memory.results),
        see=_RUNNING_SUM,
        more=_CHUNK_MORE,
        hint=hint,
    )

"""Introduced in chapter 5, the cost of attention: FlashAttention's tiling, in NumPy.

Exact attention that never forms the ``(n, m)`` matrix of weights:

* :func:`online_softmax_merge` merges the (max, sum of exponentials) of two blocks of a
  row, the rule that lets a softmax be computed one block at a time;
* :func:`flash_attention` walks over tiles of queries and keys, keeps for each query row
  a running reference (max), a running sum and an unnormalised output, normalises once
  at the end, and returns the output and each row's log-sum-exp;
* :func:`flash_attention_backward` recomputes the weights tile by tile from ``Q``, ``K``
  and the log-sum-exp, and returns the gradients.

Shapes, broadcasting of the batch axes, dtypes and input checks are those of
:func:`helpers.attention.scaled_dot_product_attention` (chapter 2), with the default
scale ``1 / sqrt(d_k)``; ``causal=True`` applies :func:`helpers.masks.causal_mask`
(bottom-right alignment when ``n != m``).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

from helpers._validate import as_integer
from helpers.attention import (
    _EXP_SAFE,
    _as_float_array,
    _check_finite,
    _check_qkv,
    _flat,
    _shapes,
    _sum_to_shape,
    _work_dtype,
)
from helpers.softmax import _to_out_dtype

__all__ = ["flash_attention", "flash_attention_backward", "online_softmax_merge"]

# Tiles of 512 query rows by 2048 keys: 2**20 scores (8 MiB in float64), the size
# chapter 2's attention found fastest (large enough for efficient matrix products and
# few Python iterations, small enough for the cache). On this book's shared 2-core
# machine, under load, tiles of 2**20 scores were 1.3x to 1.8x faster than tiles of
# 2**18 (256 x 1024) or 2**19 (bench/bench_cost.py times the defaults).
BLOCK_Q = 512
BLOCK_K = 2048
# Threads that share the query blocks (at most; never more than the cores available).
_MAX_THREADS = 2


# ---------------------------------------------------------------------------
# The online softmax
# ---------------------------------------------------------------------------


def online_softmax_merge(
    first: tuple[npt.ArrayLike, npt.ArrayLike], second: tuple[npt.ArrayLike, npt.ArrayLike]
) -> tuple[np.ndarray, np.ndarray]:
    r"""Merge the softmax statistics ``(max, sum)`` of two blocks of the same rows.

    Parameters
    ----------
    first : (m1, s1) pair of array_like
        For the first block of each row: ``m1`` its largest entry and
        ``s1 = sum(exp(x - m1))`` over the block. An empty block is ``(-inf, 0)``.
    second : (m2, s2) pair of array_like
        The same for the second block; broadcast against ``first``.

    Returns
    -------
    m : ndarray
        ``max(m1, m2)``, the largest entry of the union.
    s : ndarray
        ``s1 · exp(m1 - m) + s2 · exp(m2 - m)`` = ``sum(exp(x - m))`` over the union.

    Raises
    ------
    ValueError
        If the arrays do not broadcast against each other.

    Notes
    -----
    Each sum is rescaled to the common reference :math:`m = \max(m_1, m_2)`:

    .. math::

        \sum_{x \in B_1 \cup B_2} e^{x - m}
        = e^{m_1 - m} \sum_{x \in B_1} e^{x - m_1} + e^{m_2 - m} \sum_{x \in B_2} e^{x - m_2}.

    Both factors are :math:`\le 1` and one is exactly 1, so nothing overflows. The
    merge is associative and commutative, so a row can be split into blocks in any
    way and merged in any order; ``m + log(s)`` is the row's log-sum-exp. Merging with
    an empty block ``(-inf, 0)`` changes nothing (the factor ``exp(-inf - m)`` is taken
    as 0, also when both blocks are empty).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.flash import online_softmax_merge
    >>> x = np.array([1.0, 3.0, 2.0, 5.0, 4.0])
    >>> a, b = x[:2], x[2:]
    >>> m, s = online_softmax_merge(
    ...     (a.max(), np.exp(a - a.max()).sum()), (b.max(), np.exp(b - b.max()).sum())
    ... )
    >>> bool(m == x.max()), bool(np.isclose(s, np.exp(x - x.max()).sum()))
    (True, True)
    >>> round(float(m + np.log(s)), 6)  # the log-sum-exp of x
    5.451914
    """
    m1, s1 = (np.asarray(x, dtype=np.result_type(float, np.asarray(x))) for x in first)
    m2, s2 = (np.asarray(x, dtype=np.result_type(float, np.asarray(x))) for x in second)
    try:
        shape = np.broadcast_shapes(m1.shape, s1.shape, m2.shape, s2.shape)
    except ValueError:
        raise ValueError(
            "the maxima and sums of the two blocks must broadcast against each other: got "
            f"m1.shape = {m1.shape}, s1.shape = {s1.shape}, m2.shape = {m2.shape}, "
            f"s2.shape = {s2.shape}"
        ) from None
    m = np.broadcast_to(np.maximum(m1, m2), shape)
    ref = np.where(np.isneginf(m), 0.0, m)  # both blocks empty: any finite reference
    s = s1 * np.exp(m1 - ref) + s2 * np.exp(m2 - ref)
    return m.copy(), np.asarray(s)


# ---------------------------------------------------------------------------
# Checks shared by the forward and backward passes
# ---------------------------------------------------------------------------


def _check_blocks(block_q: int, block_k: int) -> tuple[int, int]:
    return (
        as_integer(block_q, "block_q", minimum=1),
        as_integer(block_k, "block_k", minimum=1),
    )


def _check_causal(causal: bool) -> bool:
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    return bool(causal)


def _prepare(Q: npt.ArrayLike, K: npt.ArrayLike, V: npt.ArrayLike):
    Q = _as_float_array(Q, "Q", "(..., n, d_k)")
    K = _as_float_array(K, "K", "(..., m, d_k)")
    V = _as_float_array(V, "V", "(..., m, d_v)")
    batch = _check_qkv(Q, K, V)
    return Q, K, V, batch


def _key_range(q0: int, q1: int, m: int, offset: int, causal: bool) -> int:
    """End of the keys that rows ``q0 .. q1-1`` may see: all, or up to ``q1-1+offset``."""
    return m if not causal else max(0, min(m, q1 + offset))


def _hide_above_diagonal(E: np.ndarray, q0: int, k0: int, offset: int, fill: float) -> None:
    """Set ``E[..., i, j] = fill`` where key ``k0 + j`` is after query ``q0 + i`` may see."""
    rows, cols = E.shape[-2:]
    # key k0 + j is hidden from query q0 + i iff k0 + j > q0 + i + offset
    hidden = np.arange(cols)[None, :] > np.arange(rows)[:, None] + (q0 + offset - k0)
    np.copyto(E, fill, where=hidden)


def _batch_groups(B: int, n: int, m: int, bq: int, bk: int) -> list[slice]:
    """Slices of the batch processed together: several small matrices share one tile."""
    per = max(1, (bq * bk) // max(n * m, 1)) if n <= bq and m <= bk else 1
    return [slice(b0, min(B, b0 + per)) for b0 in range(0, B, per)]


def _safe_threshold(work: np.dtype, m: int, v_max: float) -> float:
    """Largest ``T <= 64`` such that ``m · e^T · (1 + max|V|)`` stays far below overflow.

    Where every score of a tile lies within ``±T`` its exponentials need no shift: the
    unnormalised sums of a row (of weights and of weighted values) cannot overflow, and
    ``e^-T`` stays a normal number.
    """
    room = math.log(np.finfo(work).max) - math.log(max(m, 1) * (1.0 + v_max)) - 8.0
    return max(0.0, min(_EXP_SAFE, room))


# ---------------------------------------------------------------------------
# Forward
# ---------------------------------------------------------------------------


def flash_attention(
    Q: npt.ArrayLike,
    K: npt.ArrayLike,
    V: npt.ArrayLike,
    *,
    causal: bool = False,
    block_q: int = BLOCK_Q,
    block_k: int = BLOCK_K,
) -> tuple[npt.NDArray[np.floating], npt.NDArray[np.floating]]:
    r"""Exact attention by tiles, FlashAttention's way: never forms the ``(n, m)`` weights.

    Parameters
    ----------
    Q : (..., n, d_k) array_like
        Queries.
    K : (..., m, d_k) array_like
        Keys.
    V : (..., m, d_v) array_like
        Values. The leading axes of ``Q``, ``K`` and ``V`` broadcast.
    causal : bool, default False
        Query ``i`` sees key ``j`` only if ``j <= i + m - n``
        (:func:`helpers.masks.causal_mask`); tiles entirely above that diagonal are
        skipped, not computed and masked.
    block_q : int, default 512
        Query rows per tile (``>= 1``); ``n`` need not be a multiple.
    block_k : int, default 2048
        Keys per tile (``>= 1``); ``m`` need not be a multiple. At most
        ``block_q · block_k`` scores exist at any time (several small matrices of a
        batch share a tile when ``n <= block_q`` and ``m <= block_k``).

    Returns
    -------
    output : (..., n, d_v) ndarray
        The output of :func:`helpers.attention.scaled_dot_product_attention` (with
        ``mask=causal_mask(n, m)`` if ``causal``), equal to rounding error.
    lse : (..., n) ndarray
        The log-sum-exp of each row of scaled scores over the keys the row sees,
        :math:`\log \sum_j e^{S_{ij}}`; ``-inf`` for a row that sees no key (whose
        output is 0). It is what :func:`flash_attention_backward` needs to
        recompute the weights: :math:`A_{ij} = e^{S_{ij} - \mathrm{lse}_i}`.
        float32 for float16 inputs (as PyTorch returns it), else the output's dtype.

    Raises
    ------
    TypeError
        If an input is not real-valued, ``causal`` is not a bool, or a block size is
        not an integer.
    ValueError
        If the shapes do not fit together (as for
        :func:`~helpers.attention.scaled_dot_product_attention`), an input is not
        finite, or a block size is smaller than 1.

    See Also
    --------
    flash_attention_backward, online_softmax_merge,
    helpers.attention.scaled_dot_product_attention

    Notes
    -----
    For a tile of query rows :math:`I` and keys :math:`J`, with scores
    :math:`S_{IJ} = Q_I K_J^\top/\sqrt{d_k}`, each row keeps a reference
    :math:`\mu_i`, a sum :math:`\ell_i` and an unnormalised output :math:`u_i`:

    .. math::

        \mu_i' = \max\bigl(\mu_i, \max_{j \in J} S_{ij}\bigr), \quad
        \ell_i' = e^{\mu_i - \mu_i'} \ell_i + \sum_{j \in J} e^{S_{ij} - \mu_i'}, \quad
        u_i' = e^{\mu_i - \mu_i'} u_i + \sum_{j \in J} e^{S_{ij} - \mu_i'} v_j ,

    (:func:`online_softmax_merge` applied to the sums, and to the outputs), and at the
    end :math:`o_i = u_i/\ell_i`, :math:`\mathrm{lse}_i = \mu_i + \log \ell_i`. Memory
    beyond the inputs and the output: one tile of scores and :math:`O(n)` numbers per
    row block, instead of the :math:`n m` weights.

    **Speed.** As in chapter 2, a tile whose scores provably lie within :math:`\pm 64`
    (by Cauchy-Schwarz, :math:`|S_{ij}| \le \|q_i\|\|k_j\|/\sqrt{d_k}`) needs no max:
    :math:`\mu_i = 0` works, and the rescaling is skipped. The query blocks are
    independent, so on a machine with two cores or more two threads share them: NumPy
    computes ``exp`` on one core (and, without AVX-512, one entry at a time: about
    5.6 ns per float64 entry on the book's machine, a third of the time here), and one
    thread's ``exp`` overlaps the other's matrix products. Every block is computed by
    the same operations whichever thread runs it, so the result does not depend on the
    threads. Memory beyond the inputs and the output: one tile per thread.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.attention import scaled_dot_product_attention
    >>> from helpers.flash import flash_attention
    >>> from helpers.masks import causal_mask
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(2, 7, 4)), rng.normal(size=(2, 9, 4)), rng.normal(size=(2, 9, 3))
    >>> out, lse = flash_attention(Q, K, V, causal=True, block_q=3, block_k=4)
    >>> ref, A = scaled_dot_product_attention(Q, K, V, causal_mask(7, 9))
    >>> bool(np.allclose(out, ref, rtol=0, atol=1e-14)), lse.shape
    (True, (2, 7))
    """
    Q, K, V, batch = _prepare(Q, K, V)
    bq, bk = _check_blocks(block_q, block_k)
    causal = _check_causal(causal)
    for arr, name in ((Q, "Q"), (K, "K"), (V, "V")):
        _check_finite(arr, name)
    work, out_dtype = _work_dtype(Q, K, V)
    n, m, d_v = Q.shape[-2], K.shape[-2], V.shape[-1]
    B = math.prod(batch)
    output = np.zeros((B, n, d_v), dtype=work)
    lse = np.full((B, n), -np.inf, dtype=work)
    if B and n and m:
        _forward(Q, K, V, batch, work, causal, bq, bk, output, lse)
    output = _to_out_dtype(output, out_dtype).reshape(*batch, n, d_v)
    return output, lse.reshape(*batch, n)


def _forward(Q, K, V, batch, work, causal, bq, bk, output, lse) -> None:
    n, (m, d_k) = Q.shape[-2], K.shape[-2:]
    B = math.prod(batch)
    scale = work.type(1.0 / math.sqrt(d_k))
    q = _flat(Q, batch, work)  # (B, n, d_k): a view unless broadcast or converted
    k = _flat(K, batch, work)
    v = _flat(V, batch, work)
    offset = m - n  # bottom-right causal alignment, as causal_mask
    q_norm = np.sqrt(np.einsum("bnd,bnd->bn", q, q)) * scale  # (B, n)
    k_norm = np.sqrt(np.einsum("bmd,bmd->bm", k, k))  # (B, m)
    safe = _safe_threshold(work, m, float(np.abs(v).max(initial=0.0)))
    kt = k.transpose(0, 2, 1)  # (B, d_k, m)
    groups = _batch_groups(B, n, m, bq, bk)
    jobs = [
        (bs, q0)
        for bs in groups
        for q0 in range(0, n, bq)
        if _key_range(q0, min(n, q0 + bq), m, offset, causal) > 0  # else: output 0, lse -inf
    ]
    tile = (groups[0].stop - groups[0].start) * min(bq, n) * min(bk, m)

    def run(share: list[tuple[slice, int]]) -> None:
        buf = np.empty(tile, dtype=work)  # the one tile of scores this thread holds
        for bs, q0 in share:
            _forward_rows(
                q, kt, v, q_norm, k_norm, safe, scale, bs, q0, bq, bk, causal, buf, output, lse
            )

    workers = min(_threads(), len(jobs))
    if workers <= 1:
        run(jobs)
        return
    # Query blocks are independent: two threads share them, so that one thread's exp
    # (which NumPy runs on one core) overlaps the other's matrix products. Each block is
    # computed by the same operations whichever thread runs it: the result is the same.
    pool = _pool(workers)
    for future in [pool.submit(run, jobs[w::workers]) for w in range(workers)]:
        future.result()


def _forward_rows(q, kt, v, q_norm, k_norm, safe, scale, bs, q0, bq, bk, causal, buf, output, lse):
    """Rows ``q0 : q0 + bq`` of the batch elements ``bs``: the loop over key blocks."""
    n, m = q.shape[1], kt.shape[2]
    offset = m - n
    work = q.dtype
    g = bs.stop - bs.start
    q1 = min(n, q0 + bq)
    rows = q1 - q0
    k_end = _key_range(q0, q1, m, offset, causal)
    qb = q[bs, q0:q1] * scale  # (g, rows, d_k)
    qb_max = float(q_norm[bs, q0:q1].max())
    acc = np.zeros((g, rows, v.shape[-1]), dtype=work)  # unnormalised output u
    total = np.zeros((g, rows), dtype=work)  # ℓ
    mu = None  # reference per row; None while it is 0 (no max-shift)
    for k0 in range(0, k_end, bk):
        k1 = min(k_end, k0 + bk)
        E = buf[: g * rows * (k1 - k0)].reshape(g, rows, k1 - k0)
        np.matmul(qb, kt[bs, :, k0:k1], out=E)  # scaled scores
        if causal and k1 - 1 > q0 + offset:  # a tile across the diagonal
            _hide_above_diagonal(E, q0, k0, offset, -np.inf)
        if mu is None and qb_max * float(k_norm[bs, k0:k1].max()) <= safe:
            np.exp(E, out=E)  # |S| <= safe: no shift needed
        else:
            top = E.max(axis=-1)  # (g, rows); -inf for a row that sees no key here
            if mu is None:
                # the reference so far was 0 (rows without keys yet have acc = 0)
                new, old = (np.maximum(top, 0.0), 0.0) if k0 > 0 else (top, None)
            else:
                new, old = np.maximum(mu, top), mu
            ref = np.where(np.isneginf(new), 0.0, new)
            if old is not None:
                alpha = np.exp(old - ref)  # <= 1: the earlier sums, rescaled
                acc *= alpha[..., None]
                total *= alpha
            E -= ref[..., None]
            np.exp(E, out=E)
            mu = new
        total += E.sum(axis=-1)
        acc += E @ v[bs, k0:k1]
    seen = total > 0
    denom = np.where(seen, total, 1.0)
    output[bs, q0:q1] = acc / denom[..., None]
    ref = 0.0 if mu is None else np.where(np.isneginf(mu), 0.0, mu)
    with np.errstate(divide="ignore"):
        lse[bs, q0:q1] = np.where(seen, ref + np.log(denom), -np.inf)


def _threads() -> int:
    """Threads :func:`flash_attention` uses: 2 if the process may run on 2 cores or more."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return min(_MAX_THREADS, cores)


_POOL: ThreadPoolExecutor | None = None


def _pool(workers: int) -> ThreadPoolExecutor:
    """A pool of threads kept for the process (threads are costly to start every call)."""
    global _POOL
    if _POOL is None or _POOL._max_workers < workers:
        _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="flash_attention")
    return _POOL


# ---------------------------------------------------------------------------
# Backward
# ---------------------------------------------------------------------------


def flash_attention_backward(
    Q: npt.ArrayLike,
    K: npt.ArrayLike,
    V: npt.ArrayLike,
    output: npt.ArrayLike,
    lse: npt.ArrayLike,
    grad_output: npt.ArrayLike,
    *,
    causal: bool = False,
    block_q: int = BLOCK_Q,
    block_k: int = BLOCK_K,
) -> tuple[npt.NDArray[np.floating], npt.NDArray[np.floating], npt.NDArray[np.floating]]:
    r"""Gradients of :func:`flash_attention`, recomputing the weights tile by tile.

    Parameters
    ----------
    Q : (..., n, d_k) array_like
        Queries, as passed to :func:`flash_attention`.
    K : (..., m, d_k) array_like
        Keys.
    V : (..., m, d_v) array_like
        Values. The leading axes of ``Q``, ``K`` and ``V`` broadcast.
    output : (..., n, d_v) array_like
        The forward pass's output :math:`O` (its full batch shape).
    lse : (..., n) array_like
        The forward pass's row log-sum-exp.
    grad_output : (..., n, d_v) array_like
        :math:`dO = \partial L/\partial O`.
    causal : bool, default False
        The forward pass's ``causal``.
    block_q, block_k : int
        Tile sizes, as for :func:`flash_attention` (any sizes give the same result).

    Returns
    -------
    dQ : (..., n, d_k) ndarray
        :math:`\partial L/\partial Q`, the shape of ``Q``.
    dK : (..., m, d_k) ndarray
        :math:`\partial L/\partial K`, the shape of ``K`` (summed over the batch axes
        along which ``K`` was broadcast).
    dV : (..., m, d_v) ndarray
        :math:`\partial L/\partial V`, the shape of ``V`` (likewise).

    Raises
    ------
    TypeError, ValueError
        As for :func:`flash_attention`, and if ``output``, ``lse`` or
        ``grad_output`` does not have the shape of the forward pass's result.

    See Also
    --------
    flash_attention, helpers.attention.attention_backward

    Notes
    -----
    Chapter 2's gradients, with :math:`\operatorname{rowsum}(dA \odot A)` rewritten
    so that no row of weights is needed: since :math:`dA = dO\,V^\top` and
    :math:`O = AV`,
    :math:`\sum_j dA_{ij} A_{ij} = \sum_j A_{ij}\, do_i \cdot v_j = do_i \cdot o_i
    =: D_i`. Then, tile by tile,

    .. math::

        P = e^{S - \mathrm{lse}}, \quad dV_J \mathrel{+}= P^\top dO_I, \quad
        dP = dO_I V_J^\top, \quad dS = P \odot (dP - D_I), \quad
        dQ_I \mathrel{+}= \tfrac{1}{\sqrt{d_k}}\, dS\, K_J, \quad
        dK_J \mathrel{+}= \tfrac{1}{\sqrt{d_k}}\, dS^\top Q_I .

    The weights are recomputed (one more product :math:`Q_I K_J^\top` per tile)
    rather than stored: :math:`O(n m)` extra arithmetic saves :math:`O(n m)` memory.
    A row with ``lse = -inf`` saw no key and gets zero gradient.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.attention import attention_backward, scaled_dot_product_attention
    >>> from helpers.flash import flash_attention, flash_attention_backward
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(5, 4)), rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    >>> G = rng.normal(size=(5, 3))
    >>> out, lse = flash_attention(Q, K, V, block_q=2, block_k=4)
    >>> grads = flash_attention_backward(Q, K, V, out, lse, G, block_q=2, block_k=4)
    >>> _, A = scaled_dot_product_attention(Q, K, V)
    >>> all(
    ...     np.allclose(a, b, rtol=0, atol=1e-13)
    ...     for a, b in zip(grads, attention_backward(Q, K, V, A, G))
    ... )
    True
    """
    Q, K, V, batch = _prepare(Q, K, V)
    bq, bk = _check_blocks(block_q, block_k)
    causal = _check_causal(causal)
    O = _as_float_array(output, "output", "(..., n, d_v)")  # noqa: E741 (the book's O)
    G = _as_float_array(grad_output, "grad_output", "(..., n, d_v)")
    L = np.asarray(lse)
    if L.dtype.kind not in "iuf":
        raise TypeError(f"lse must be an array of real numbers, got dtype {L.dtype}")
    n, (m, d_k), d_v = Q.shape[-2], K.shape[-2:], V.shape[-1]
    context = _shapes(Q=Q, K=K, V=V)
    for arr, name, want in (
        (O, "output", (*batch, n, d_v)),
        (L, "lse", (*batch, n)),
        (G, "grad_output", (*batch, n, d_v)),
    ):
        if arr.shape != want:
            raise ValueError(
                f"{name} must have shape {want} (the forward pass's): got {name}.shape = "
                f"{arr.shape}; {context}"
            )
    for arr, name in ((Q, "Q"), (K, "K"), (V, "V"), (O, "output"), (G, "grad_output")):
        _check_finite(arr, name)
    if np.isnan(L).any() or np.isposinf(L).any():
        raise ValueError("lse contains nan or +inf; only -inf (a row that sees no key) is allowed")
    work, out_dtype = _work_dtype(Q, K, V, O, G)
    B = math.prod(batch)
    scale = work.type(1.0 / math.sqrt(d_k))
    q = _flat(Q, batch, work)
    k = _flat(K, batch, work)
    v = _flat(V, batch, work)
    o = O.reshape(B, n, d_v).astype(work, copy=False)
    g_out = G.reshape(B, n, d_v).astype(work, copy=False)
    # A row that saw no key: exp(S - inf) = 0, so it contributes nothing.
    lse_f = np.where(np.isneginf(L), np.inf, L).reshape(B, n).astype(work, copy=False)
    D = np.einsum("bnd,bnd->bn", g_out, o)  # rowsum(dO ∘ O), (B, n)
    dQ = np.zeros((B, n, d_k), dtype=work)
    dK = np.zeros((B, m, d_k), dtype=work)
    dV = np.zeros((B, m, d_v), dtype=work)
    offset = m - n
    if B and n and m:
        for bs in _batch_groups(B, n, m, bq, bk):
            for q0 in range(0, n, bq):
                q1 = min(n, q0 + bq)
                k_end = _key_range(q0, q1, m, offset, causal)
                qb = q[bs, q0:q1] * scale  # (g, rows, d_k)
                gb = g_out[bs, q0:q1]  # (g, rows, d_v)
                for k0 in range(0, k_end, bk):
                    k1 = min(k_end, k0 + bk)
                    P = qb @ k[bs, k0:k1].transpose(0, 2, 1)  # scaled scores
                    P -= lse_f[bs, q0:q1, None]
                    if causal and k1 - 1 > q0 + offset:
                        _hide_above_diagonal(P, q0, k0, offset, -np.inf)
                    np.exp(P, out=P)  # the weights of this tile
                    dV[bs, k0:k1] += P.transpose(0, 2, 1) @ gb
                    dS = gb @ v[bs, k0:k1].transpose(0, 2, 1)  # dP
                    dS -= D[bs, q0:q1, None]
                    dS *= P
                    dQ[bs, q0:q1] += dS @ k[bs, k0:k1]
                    dK[bs, k0:k1] += dS.transpose(0, 2, 1) @ qb  # qb carries the scale
    dQ *= scale
    grads = []
    for grad, x in ((dQ, Q), (dK, K), (dV, V)):
        grad = _sum_to_shape(grad.reshape(*batch, *grad.shape[1:]), x.shape)
        grads.append(_to_out_dtype(np.ascontiguousarray(grad), out_dtype))
    return tuple(grads)

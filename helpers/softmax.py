"""Introduced in chapter 1, the softmax function.

The numerics every later chapter relies on: :func:`softmax`, :func:`log_softmax`,
:func:`logsumexp` (the smooth maximum), :func:`softmax_jacobian` and the Shannon
:func:`entropy` of a probability vector.

Conventions shared by all functions here
----------------------------------------
* The input is batched over every axis except ``axis`` (default ``-1``, the last).
* dtypes: ``float16``, ``float32`` and ``float64`` inputs give outputs of the same
  dtype (``float16`` is computed in ``float32`` and rounded once at the end);
  integer inputs (and Python lists of numbers) are converted to ``float64``.
  A float16 result whose exact value lies beyond float16's range (``log_softmax``
  of widely spread logits at a small temperature) saturates at ``±65504`` instead
  of overflowing to ``±inf``.
  ``bool`` is rejected with a :class:`TypeError`: a boolean array passed as logits
  is almost always a mask passed by mistake (chapter 2 builds masks as booleans),
  and ``x.astype(float)`` says so explicitly when it really is intended.
  Complex, string and object arrays raise :class:`TypeError`.
* Logits may contain ``-inf`` (a masked position): its probability is exactly 0 and
  its log-probability ``-inf``. ``+inf`` and ``nan`` raise :class:`ValueError`.
  A slice whose entries are *all* ``-inf`` has no softmax (0/0), so
  :func:`softmax`, :func:`log_softmax` and :func:`softmax_jacobian` raise
  :class:`ValueError` for it rather than returning ``nan`` silently; chapter 2's
  masks never produce such a row, and code that may (padding) must decide what a
  fully masked row means before calling these functions. :func:`logsumexp` returns
  ``-inf`` there, the exact value of ``log 0``.
* Numerical stability: the maximum is subtracted *before* dividing by the
  temperature. Every exponent is then ``<= 0`` (nothing overflows), the largest
  term is exactly 1 (the sum cannot underflow to 0), and as ``x - max(x)`` is exact
  for nearby logits, ties and one-ulp gaps survive a tiny temperature. Tested for
  temperatures in ``[1e-4, 1e4]`` and logits up to ``±1e4`` in every supported dtype.
* Reductions return 0-d arrays for 1-D input (``array(3.4076)``); ``float(...)``
  and format specs such as ``f"{h:.4f}"`` work on them.
"""

from __future__ import annotations

import numbers
import operator

import numpy as np
import numpy.typing as npt
from numpy.exceptions import AxisError

from helpers._validate import as_real_array

__all__ = ["entropy", "log_softmax", "logsumexp", "softmax", "softmax_jacobian"]

# A probability vector passed to `entropy` must sum to 1 within this absolute
# tolerance. The check is there to catch logits or unnormalised weights passed by
# mistake, not to police rounding: float16 probabilities are off by up to ~5e-4, and
# float32 probabilities cast to float64 by ~1e-7; both must pass.
PROB_SUM_ATOL = 1e-3


# ---------------------------------------------------------------------------
# Input validation (shared by every public function)
# ---------------------------------------------------------------------------


def _as_real_array(x: npt.ArrayLike, name: str) -> tuple[np.ndarray, np.dtype, bool]:
    """Return ``(array in the working dtype, output dtype, whether the array is a copy)``.

    The working dtype is float32 for float16 input (too little range and precision
    for the sums), float64 for integers, and the input's own float dtype otherwise.
    Raises TypeError on non-real input.
    """
    try:
        src = np.asarray(x)  # may share memory with x: never written to in place
    except (TypeError, ValueError):
        src = x  # as_real_array reports the failure
    hint = f" - convert explicitly with {name}.astype(float) if you really mean 0/1 values"
    arr = as_real_array(src, name, bool_hint=hint)
    if arr.dtype == np.float16:
        return arr.astype(np.float32), arr.dtype, True
    return arr, arr.dtype, arr is not src


def _check_axis(axis: int, arr: np.ndarray, name: str) -> int:
    """Return ``axis`` as a non-negative index; the slice along it must be non-empty."""
    if isinstance(axis, (bool, np.bool_)):
        raise TypeError(f"axis must be an integer, got {axis!r}")
    try:
        ax = operator.index(axis)
    except TypeError:
        raise TypeError(f"axis must be an integer, got {axis!r}") from None
    if not -arr.ndim <= ax < arr.ndim:
        raise AxisError(
            f"axis {ax} is out of bounds for {name} with ndim {arr.ndim} "
            f"({name}.shape = {arr.shape})"
        )
    ax %= arr.ndim
    if arr.shape[ax] == 0:
        raise ValueError(
            f"axis {axis} of {name} is empty ({name}.shape = {arr.shape}); "
            "at least one entry is needed along it"
        )
    return ax


def _check_temperature(temperature: float) -> float:
    """Return ``temperature`` as a Python float; it must be a finite real scalar > 0."""
    is_real_scalar = isinstance(temperature, numbers.Real) or (
        isinstance(temperature, np.ndarray)
        and temperature.ndim == 0
        and temperature.dtype.kind in "iuf"
    )
    if not is_real_scalar or isinstance(temperature, (bool, np.bool_)):
        raise TypeError(f"temperature must be a real scalar, got {temperature!r}")
    tau = float(temperature)
    if not (np.isfinite(tau) and tau > 0):
        raise ValueError(f"temperature must be positive and finite, got {tau!r}")
    return tau


def _row_max(arr: np.ndarray, ax: int, name: str, *, allow_all_neg_inf: bool) -> np.ndarray:
    """Max along ``ax`` (keepdims); doubles as the +inf/nan/all -inf check.

    ``np.max`` propagates nan, is +inf if any entry is +inf and is -inf only if every
    entry is -inf, so inspecting the (small) reduced array is enough.
    """
    m = np.max(arr, axis=ax, keepdims=True)
    if not np.isfinite(m).all():
        if np.isnan(m).any():
            raise ValueError(f"{name} contains nan")
        if np.isposinf(m).any():
            raise ValueError(f"{name} contains +inf; only -inf (a masked entry) is allowed")
        if not allow_all_neg_inf:
            first = [str(int(i[0])) for i in np.nonzero(np.isneginf(m))]
            first[ax] = ":"
            raise ValueError(
                f"{name} has a slice along axis {ax} whose entries are all -inf "
                f"({name}[{', '.join(first)}]); the softmax of a fully masked row is 0/0, "
                "undefined: decide what such a row should mean before calling this"
            )
    return m


def _shifted(arr: np.ndarray, m: np.ndarray, tau: float, owned: bool) -> np.ndarray:
    """Return ``(arr - m) / tau`` (entries <= 0), in place if ``arr`` is our own copy."""
    z = np.subtract(arr, m, out=arr if owned else None)  # else the one full-size temporary
    if tau != 1.0:
        np.divide(z, tau, out=z)
    return z


def _to_out_dtype(z: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    """Round the float32 working array of a float16 input to float16 (once).

    Saturates instead of overflowing: a finite value beyond float16's range (e.g.
    ``log_softmax`` of ``[1e4, -1e4]`` at ``τ = 1e-4`` is ``-2e8``) becomes
    ``±65504``, the nearest finite float16, rather than ``±inf``; it stays finite like
    the exact value, and ``0 * log p`` stays 0. Infinities (``-inf`` logits) are kept.
    """
    if z.dtype == out_dtype:
        return z
    info = np.finfo(out_dtype)
    if z.size and (z.min() < info.min or z.max() > info.max):
        np.clip(z, info.min, info.max, out=z, where=np.isfinite(z))
    # NumPy's float32 -> float16 cast is ~20x slower for results that land inexactly
    # in float16's subnormal range (|v| < 2**-14, common among probabilities: 210 ms
    # instead of 46 ms for a 4096 x 1024 softmax). Round those first: for |v| < 0.25,
    # (v + 0.75) - 0.75 in float32 rounds v to the 2**-24 grid, float16's subnormal
    # spacing, half to even, so the cast below is exact there and the bits are the same.
    tiny = np.abs(z) < info.smallest_normal
    if tiny.any():
        rounded = np.add(z, np.float32(0.75))
        rounded -= np.float32(0.75)
        np.copysign(rounded, z, out=rounded)  # a tiny negative value rounds to -0.0
        z = np.where(tiny, rounded, z)
    return z.astype(out_dtype)


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def softmax(
    x: npt.ArrayLike, axis: int = -1, *, temperature: float = 1.0
) -> npt.NDArray[np.floating]:
    r"""Softmax of ``x / temperature`` along ``axis``.

    Parameters
    ----------
    x : (..., n, ...) array_like of real numbers
        Logits; ``n`` is the length of ``axis``. May contain ``-inf`` (masked
        entries) but not ``+inf`` or ``nan``, and no slice may be all ``-inf``.
    axis : int, default -1
        The axis to normalise along.
    temperature : float, default 1.0
        Positive finite temperature ``τ``. Small ``τ`` sharpens the distribution
        towards the argmax (ties split evenly), large ``τ`` flattens it towards uniform.

    Returns
    -------
    p : (..., n, ...) ndarray
        Probabilities, same shape as ``x``; non-negative and summing to 1 along
        ``axis``. Same dtype as ``x`` for float16/32/64, float64 for integers.

    Raises
    ------
    TypeError
        If ``x`` is not real-valued (bool, complex, str, object) or ``temperature`` is
        not a real scalar.
    ValueError
        If ``x`` contains ``nan`` or ``+inf``, a slice is all ``-inf``, ``axis`` is
        empty or out of range, or ``temperature`` is not positive and finite.

    See Also
    --------
    log_softmax, logsumexp, softmax_jacobian

    Notes
    -----
    With ``m = max_j x_j``,

    .. math::

        \operatorname{softmax}(x/\tau)_i
        = \frac{e^{x_i/\tau}}{\sum_j e^{x_j/\tau}}
        = \frac{e^{(x_i - m)/\tau}}{\sum_j e^{(x_j - m)/\tau}}.

    The second form is what is computed: every exponent is ``<= 0``, so nothing
    overflows, and the largest term is exactly 1, so the sum never underflows to 0.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.softmax import softmax
    >>> softmax(np.array([1.0, 2.0, 3.0]))
    array([0.09003057, 0.24472847, 0.66524096])
    >>> softmax(np.array([1000.0, 1001.0, 1002.0]))  # no overflow
    array([0.09003057, 0.24472847, 0.66524096])
    >>> softmax(np.array([1e4, 1e4, 0.0]), temperature=1e-4)  # ties split evenly
    array([0.5, 0.5, 0. ])
    >>> softmax(np.array([0.0, -np.inf, 0.0]))  # a masked entry gets exactly 0
    array([0.5, 0. , 0.5])
    """
    arr, out_dtype, owned = _as_real_array(x, "x")
    ax = _check_axis(axis, arr, "x")
    tau = _check_temperature(temperature)
    m = _row_max(arr, ax, "x", allow_all_neg_inf=False)
    z = _shifted(arr, m, tau, owned)
    np.exp(z, out=z)
    np.divide(z, z.sum(axis=ax, keepdims=True), out=z)
    return _to_out_dtype(z, out_dtype)


def log_softmax(
    x: npt.ArrayLike, axis: int = -1, *, temperature: float = 1.0
) -> npt.NDArray[np.floating]:
    r"""Logarithm of :func:`softmax`, computed without forming the probabilities.

    Parameters
    ----------
    x : (..., n, ...) array_like of real numbers
        Logits, as in :func:`softmax`.
    axis : int, default -1
        The axis to normalise along.
    temperature : float, default 1.0
        Positive finite temperature ``τ``.

    Returns
    -------
    logp : (..., n, ...) ndarray
        Log-probabilities, same shape and dtype rules as :func:`softmax`; every entry
        is ``<= 0``, ``-inf`` exactly where ``x`` is ``-inf``. In float16, values
        below ``-65504`` saturate there (see the module docstring).

    Raises
    ------
    TypeError, ValueError
        As for :func:`softmax`.

    See Also
    --------
    softmax, logsumexp

    Notes
    -----
    .. math::

        \log \operatorname{softmax}(x/\tau)_i
        = \frac{x_i - m}{\tau} - \log \sum_j e^{(x_j - m)/\tau},
        \qquad m = \max_j x_j .

    Unlike ``np.log(softmax(x))`` this stays finite when a probability underflows:
    ``log_softmax([0, -1000])`` is ``[0, -1000]``, not ``[0, -inf]``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.softmax import log_softmax
    >>> log_softmax(np.array([1.0, 2.0, 3.0]))
    array([-2.40760596, -1.40760596, -0.40760596])
    >>> log_softmax(np.array([0.0, -1000.0]))
    array([    0., -1000.])
    """
    arr, out_dtype, owned = _as_real_array(x, "x")
    ax = _check_axis(axis, arr, "x")
    tau = _check_temperature(temperature)
    m = _row_max(arr, ax, "x", allow_all_neg_inf=False)
    z = _shifted(arr, m, tau, owned)
    log_norm = np.log(np.exp(z).sum(axis=ax, keepdims=True))  # >= 0: the max term is 1
    np.subtract(z, log_norm, out=z)
    return _to_out_dtype(z, out_dtype)


def logsumexp(
    x: npt.ArrayLike, axis: int = -1, *, temperature: float = 1.0, keepdims: bool = False
) -> npt.NDArray[np.floating]:
    r"""The smooth maximum ``τ · log Σ_i exp(x_i / τ)`` along ``axis``.

    Parameters
    ----------
    x : (..., n, ...) array_like of real numbers
        May contain ``-inf``, not ``+inf`` or ``nan``. A slice that is all ``-inf``
        gives ``-inf`` (the exact value of ``τ · log 0``).
    axis : int, default -1
        The axis to reduce.
    temperature : float, default 1.0
        Positive finite temperature ``τ``.
    keepdims : bool, default False
        Keep the reduced axis with length 1 (handy for broadcasting against ``x``).

    Returns
    -------
    lse : (..., ...) ndarray
        ``x``'s shape without ``axis`` (or with length 1 there if ``keepdims``);
        dtype rules as in :func:`softmax`.

    Raises
    ------
    TypeError, ValueError
        As for :func:`softmax`, except that an all ``-inf`` slice is allowed.

    See Also
    --------
    softmax, log_softmax

    Notes
    -----
    With the temperature the function is defined as

    .. math::

        \operatorname{lse}_\tau(x) = \tau \log \sum_i e^{x_i/\tau}
        = m + \tau \log \sum_i e^{(x_i - m)/\tau},\qquad m = \max_i x_i ,

    the scaling under which it is a *smooth maximum*:

    .. math::

        \max_i x_i \le \operatorname{lse}_\tau(x) \le \max_i x_i + \tau \log n ,

    so it tends to ``max(x)`` as ``τ → 0``, and its gradient with respect to ``x``
    is ``softmax(x / τ)``. For ``τ = 1`` this is the usual log-sum-exp, the
    logarithm of softmax's normaliser. Note ``lse_τ(x) = τ · logsumexp(x / τ)``,
    *not* ``logsumexp(x / τ)``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.softmax import logsumexp
    >>> logsumexp(np.array([1.0, 2.0, 3.0]))
    array(3.40760596)
    >>> logsumexp(np.array([1000.0, 1001.0, 1002.0]))
    array(1002.40760596)
    >>> logsumexp(np.array([1.0, 2.0, 3.0]), temperature=0.01)  # close to max
    array(3.)
    """
    arr, out_dtype, owned = _as_real_array(x, "x")
    ax = _check_axis(axis, arr, "x")
    tau = _check_temperature(temperature)
    m = _row_max(arr, ax, "x", allow_all_neg_inf=True)
    # For an all -inf slice shift by 0 instead: exp(-inf) = 0 and log 0 = -inf.
    m = np.where(np.isneginf(m), 0, m).astype(arr.dtype, copy=False)
    z = _shifted(arr, m, tau, owned)
    np.exp(z, out=z)
    s = z.sum(axis=ax, keepdims=True)
    with np.errstate(divide="ignore"):  # log 0 = -inf for an all -inf slice
        np.log(s, out=s)
    if tau != 1.0:
        np.multiply(s, tau, out=s)
    np.add(s, m, out=s)
    if not keepdims:
        s = np.squeeze(s, axis=ax)
    return _to_out_dtype(s, out_dtype)


def softmax_jacobian(
    x: npt.ArrayLike, axis: int = -1, *, temperature: float = 1.0
) -> npt.NDArray[np.floating]:
    r"""Jacobian of ``p = softmax(x / τ)`` with respect to ``x``.

    Parameters
    ----------
    x : (..., n) array_like of real numbers
        Logits, as in :func:`softmax`. Batched over every axis except ``axis``.
    axis : int, default -1
        The softmax axis. If it is not the last axis it is moved to the end first,
        so the output layout is always ``(other axes in order..., n, n)``.
    temperature : float, default 1.0
        Positive finite temperature ``τ``.

    Returns
    -------
    J : (..., n, n) ndarray
        ``J[..., i, j] = ∂p_i / ∂x_j``. Symmetric in its last two axes, each row and
        column sums to 0. dtype rules as in :func:`softmax`.

    Raises
    ------
    TypeError, ValueError
        As for :func:`softmax`.

    See Also
    --------
    softmax

    Notes
    -----
    .. math::

        \frac{\partial p_i}{\partial x_j} = \frac{1}{\tau}\, p_i (\delta_{ij} - p_j),
        \qquad J = \frac{1}{\tau}\left(\operatorname{diag}(p) - p p^{\top}\right).

    The diagonal is computed as ``p_i (1 - p_i)``, the same rounding as PyTorch's
    autograd. Memory is ``O(n²)`` per slice.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.softmax import softmax_jacobian
    >>> softmax_jacobian(np.array([0.0, 0.0]))
    array([[ 0.25, -0.25],
           [-0.25,  0.25]])
    >>> softmax_jacobian(np.zeros((2, 3, 4)), axis=1).shape  # axis 1 moved to the end
    (2, 4, 3, 3)
    """
    arr, out_dtype, owned = _as_real_array(x, "x")
    ax = _check_axis(axis, arr, "x")
    tau = _check_temperature(temperature)
    m = _row_max(arr, ax, "x", allow_all_neg_inf=False)
    arr, m = np.moveaxis(arr, ax, -1), np.moveaxis(m, ax, -1)  # views: (..., n), (..., 1)
    p = _shifted(arr, m, tau, owned)
    np.exp(p, out=p)
    np.divide(p, p.sum(axis=-1, keepdims=True), out=p)  # (..., n)
    jac = np.multiply(p[..., :, None], p[..., None, :])  # (..., n, n): p pᵀ
    np.negative(jac, out=jac)
    diag = np.einsum("...ii->...i", jac)  # writeable view of the diagonals, (..., n)
    np.multiply(p, 1 - p, out=diag)
    if tau != 1.0:
        np.divide(jac, tau, out=jac)
    return _to_out_dtype(jac, out_dtype)


def entropy(p: npt.ArrayLike, axis: int = -1) -> npt.NDArray[np.floating]:
    r"""Shannon entropy ``-Σ_i p_i log p_i`` in nats, along ``axis``.

    Parameters
    ----------
    p : (..., n, ...) array_like of real numbers
        Probability vectors along ``axis``: non-negative and finite (checked), and
        summing to 1 (checked to within ``PROB_SUM_ATOL = 1e-3``, only to catch
        logits or unnormalised weights passed by mistake; ``p`` is used as given,
        not renormalised).
    axis : int, default -1
        The axis holding the probabilities.

    Returns
    -------
    h : (..., ...) ndarray
        ``p``'s shape without ``axis``; between 0 (one-hot) and ``log n`` (uniform).
        dtype rules as in :func:`softmax`.

    Raises
    ------
    TypeError
        If ``p`` is not real-valued.
    ValueError
        If ``p`` has a negative or non-finite entry, does not sum to 1 along
        ``axis``, or ``axis`` is empty or out of range.

    See Also
    --------
    softmax

    Notes
    -----
    .. math::

        H(p) = -\sum_i p_i \log p_i, \qquad 0 \log 0 := 0

    (the limit of ``t log t`` as ``t → 0``), so zero probabilities contribute nothing
    instead of ``0 · (-inf) = nan``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.softmax import entropy
    >>> entropy(np.array([0.25, 0.25, 0.25, 0.25]))  # log 4
    array(1.38629436)
    >>> entropy(np.array([0.5, 0.5, 0.0]))  # log 2: the zero adds nothing
    array(0.69314718)
    >>> entropy(np.array([0.0, 1.0, 0.0]))
    array(0.)
    """
    q, out_dtype, _ = _as_real_array(p, "p")
    ax = _check_axis(axis, q, "p")
    if not np.isfinite(q).all():
        raise ValueError("p must be finite; it contains nan or inf")
    lo = q.min(initial=0)
    if lo < 0:
        raise ValueError(f"p must be non-negative (it holds probabilities); its minimum is {lo}")
    worst = np.max(np.abs(q.sum(axis=ax) - 1), initial=0)
    if worst > PROB_SUM_ATOL:
        raise ValueError(
            f"p must sum to 1 along axis {axis}; a sum is off by {worst:.3g}. "
            "Pass probabilities (e.g. softmax(x)), not logits or unnormalised weights"
        )
    plogp = np.log(q, out=np.zeros_like(q), where=q > 0)  # 0 where p = 0
    np.multiply(plogp, q, out=plogp)
    h = 0.0 - plogp.sum(axis=ax)  # not -sum(...): that gives -0.0 for a one-hot p
    return _to_out_dtype(np.asarray(h), out_dtype)

"""Introduced in chapter 4, positional encodings.

Three ways of telling attention where each token is, and the context-extension
methods of the rotary one:

* :func:`sinusoidal_encoding` and :func:`sinusoidal_shift`: the encoding of Vaswani et
  al., added to the token embeddings, in its interleaved layout, and the block-diagonal
  rotation that shifts it by ``k`` positions;
* :func:`rope`, :func:`rope_frequencies` and :func:`rotate_pairs`: rotary position
  embeddings (RoPE), applied to the queries and keys of each head, in both layouts
  found in real code, with position interpolation, NTK-aware scaling and YaRN;
* :func:`alibi_slopes` and :func:`alibi_bias`: attention with linear biases (ALiBi),
  a bias added to the scores, for :func:`helpers.scaled_dot_product_attention`;
* :func:`t5_relative_position_bucket`: the buckets of T5's learned relative position
  biases, one learned number per bucket and head added to the scores.

Conventions
-----------
* Vectors are rows (``book/notation.md``): a position's encoding is a row, and the
  shift matrix acts on the right, ``PE[p + k] = PE[p] @ R``.
* Frequencies: pair ``i`` (``i = 0, ..., d/2 - 1``) turns at ``base ** (-2 i / d)``
  radians per position, where ``d`` is the width being encoded: ``d_model`` for the
  sinusoidal encoding, the head width ``d_head`` for RoPE.
* Angles, cosines and sines are computed in float64 whatever the input's dtype, so a
  position of 10**6 loses nothing to float32 rounding before the rotation.
* Bad input raises ``TypeError`` or ``ValueError`` naming the argument and what it got.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import numpy.typing as npt

from helpers._validate import as_integer, as_real_array

__all__ = [
    "alibi_bias",
    "alibi_slopes",
    "rope",
    "rope_frequencies",
    "rotate_pairs",
    "sinusoidal_encoding",
    "sinusoidal_shift",
    "t5_relative_position_bucket",
]

_LAYOUTS = ("interleaved", "half")
_SCALINGS = (None, "linear", "ntk", "yarn")


# ---------------------------------------------------------------------------
# Input checks
# ---------------------------------------------------------------------------


def _real(value: object, name: str) -> float:
    """``value`` as a finite Python float; TypeError/ValueError naming ``name``."""
    is_real = isinstance(value, numbers.Real) or (
        isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf"
    )
    if not is_real or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x!r}")
    return x


def _positive(value: object, name: str) -> float:
    x = _real(value, name)
    if x <= 0:
        raise ValueError(f"{name} must be positive, got {x!r}")
    return x


def _even_width(d: object, name: str) -> int:
    """A width made of pairs: an even integer >= 2."""
    d = as_integer(d, name, minimum=1)
    if d % 2:
        raise ValueError(
            f"{name} must be even (the coordinates go in pairs, one pair per frequency), got {d}"
        )
    return d


def _layout(layout: object) -> str:
    if layout not in _LAYOUTS:
        raise ValueError(
            f"layout must be 'interleaved' (pairs 2i, 2i+1) or 'half' (pairs i, i + d/2), "
            f"got {layout!r}"
        )
    return layout  # type: ignore[return-value]


def _frequencies(d: int, base: float) -> np.ndarray:
    """``base ** (-2 i / d)`` for ``i = 0, ..., d/2 - 1``, in float64."""
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / d)


# ---------------------------------------------------------------------------
# Sinusoidal encoding
# ---------------------------------------------------------------------------


def sinusoidal_encoding(n: int, d_model: int, *, base: float = 10000.0) -> npt.NDArray[np.float64]:
    r"""The sinusoidal position encoding of Vaswani et al., interleaved layout.

    Parameters
    ----------
    n : int
        Number of positions, ``0, 1, ..., n - 1``; at least 1.
    d_model : int
        Width of the encoding (that of the token embeddings it is added to); even.
    base : float, default 10000.0
        Positive; the frequencies are ``base ** (-2 i / d_model)``.

    Returns
    -------
    PE : (n, d_model) ndarray of float64
        ``PE[p, 2i] = sin(p ω_i)`` and ``PE[p, 2i + 1] = cos(p ω_i)``: the sine of each
        frequency in an even column, its cosine in the next, odd column.

    Raises
    ------
    TypeError
        If ``n`` or ``d_model`` is not an integer, or ``base`` not a real number.
    ValueError
        If ``n < 1``, ``d_model`` is odd or below 2, or ``base <= 0``.

    See Also
    --------
    sinusoidal_shift : the matrix that moves every row ``k`` positions on.

    Notes
    -----
    .. math::

        PE_{p, 2i} = \sin(p\,\omega_i), \qquad PE_{p, 2i+1} = \cos(p\,\omega_i), \qquad
        \omega_i = \text{base}^{-2i/d_\text{model}}, \quad i = 0, \dots, d_\text{model}/2 - 1 .

    Pair ``i`` has wavelength ``2π / ω_i``, from ``2π`` (pair 0) to nearly
    ``2π · base``. Some libraries store the same numbers with every sine first and every
    cosine after (``[sin(p ω_0), ..., sin(p ω_{d/2-1}), cos(p ω_0), ...]``): a permutation
    of the columns, ``PE[:, np.r_[0:d:2, 1:d:2]]``.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.positional import sinusoidal_encoding
    >>> PE = sinusoidal_encoding(3, 4)  # ω = (1, 0.01)
    >>> PE.round(4)
    array([[ 0.    ,  1.    ,  0.    ,  1.    ],
           [ 0.8415,  0.5403,  0.01  ,  1.    ],
           [ 0.9093, -0.4161,  0.02  ,  0.9998]])
    """
    n = as_integer(n, "n", minimum=1)
    d = _even_width(d_model, "d_model")
    omega = _frequencies(d, _positive(base, "base"))  # (d/2,)
    angles = np.arange(n, dtype=np.float64)[:, None] * omega  # (n, d/2)
    PE = np.empty((n, d))
    PE[:, 0::2] = np.sin(angles)
    PE[:, 1::2] = np.cos(angles)
    return PE


def sinusoidal_shift(k: float, d_model: int, *, base: float = 10000.0) -> npt.NDArray[np.float64]:
    r"""The matrix ``R`` with ``PE[p + k] = PE[p] @ R`` for every position ``p``.

    Parameters
    ----------
    k : float
        The shift, in positions; any real number (negative shifts back).
    d_model : int
        Width of the encoding; even.
    base : float, default 10000.0
        As in :func:`sinusoidal_encoding`.

    Returns
    -------
    R : (d_model, d_model) ndarray of float64
        Block diagonal with one ``2 x 2`` rotation per frequency: rows and columns
        ``2i, 2i + 1`` hold ``[[cos(k ω_i), -sin(k ω_i)], [sin(k ω_i), cos(k ω_i)]]``.
        ``R`` is orthogonal, and ``R(k)^T = R(-k)``.

    Raises
    ------
    TypeError
        If ``k`` or ``base`` is not a real number, or ``d_model`` not an integer.
    ValueError
        If ``k`` is not finite, ``d_model`` is odd or below 2, or ``base <= 0``.

    Notes
    -----
    By the addition formulas, with :math:`a = p\,\omega_i` and :math:`b = k\,\omega_i`,

    .. math::

        \big[\sin(a + b),\; \cos(a + b)\big] = \big[\sin a,\; \cos a\big]
        \begin{bmatrix} \cos b & -\sin b \\ \sin b & \cos b \end{bmatrix} ,

    which does not depend on :math:`p`: one matrix shifts every position.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.positional import sinusoidal_encoding, sinusoidal_shift
    >>> PE = sinusoidal_encoding(10, 6)
    >>> R = sinusoidal_shift(3, 6)
    >>> bool(np.allclose(PE[:7] @ R, PE[3:]))
    True
    >>> bool(np.allclose(R.T, sinusoidal_shift(-3, 6)))
    True
    """
    k = _real(k, "k")
    d = _even_width(d_model, "d_model")
    angle = k * _frequencies(d, _positive(base, "base"))  # (d/2,)
    c, s = np.cos(angle), np.sin(angle)
    even = np.arange(0, d, 2)
    R = np.zeros((d, d))
    R[even, even] = c
    R[even, even + 1] = -s
    R[even + 1, even] = s
    R[even + 1, even + 1] = c
    return R


# ---------------------------------------------------------------------------
# RoPE
# ---------------------------------------------------------------------------


def rope_frequencies(
    d_head: int,
    *,
    base: float = 10000.0,
    scaling: str | None = None,
    factor: float = 1.0,
    original_length: int | None = None,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
) -> npt.NDArray[np.float64]:
    r"""The rotation frequencies θ_i of RoPE, plain or scaled for a longer context.

    Parameters
    ----------
    d_head : int
        Width of one head's queries and keys; even.
    base : float, default 10000.0
        Positive; plain RoPE turns pair ``i`` at ``θ_i = base ** (-2 i / d_head)``.
    scaling : {None, "linear", "ntk", "yarn"}
        How to stretch a context of ``original_length`` positions to ``factor`` times
        as many (see Notes). None is plain RoPE.
    factor : float, default 1.0
        The stretch ``s = L' / L`` (new context over trained context); positive, and
        1 when ``scaling`` is None.
    original_length : int, optional
        ``L``, the context the model was trained on; needed by ``"yarn"`` only.
    beta_fast, beta_slow : float, default 32 and 1
        YaRN's thresholds, in turns over ``L``: pairs that turn more than
        ``beta_fast`` times are kept, pairs that turn less than ``beta_slow`` times are
        interpolated; ``beta_fast > beta_slow > 0``.

    Returns
    -------
    theta : (d_head // 2,) ndarray of float64
        Radians per position for each pair, from fastest (pair 0) to slowest.

    Raises
    ------
    TypeError, ValueError
        For a width that is not an even integer, a non-positive ``base`` or ``factor``,
        an unknown ``scaling``, ``factor != 1`` without a scaling, or ``"yarn"``
        without ``original_length`` (or with ``base <= 1``, or thresholds out of order).

    Notes
    -----
    With :math:`\theta_i = b^{-2i/d}` and :math:`s` the factor:

    * ``"linear"``, position interpolation (Chen et al., 2023): position :math:`m`
      becomes :math:`m/s`, the same as :math:`\theta_i' = \theta_i / s` for every pair.
    * ``"ntk"``, NTK-aware scaling: a new base :math:`b' = b\, s^{d/(d-2)}`, so
      :math:`\theta_i' = \theta_i\, s^{-2i/(d-2)}`: pair 0 is unchanged and the slowest
      pair, :math:`i = d/2 - 1`, is divided by exactly :math:`s`.
    * ``"yarn"``, the frequency part of YaRN (Peng et al., 2023; "NTK-by-parts"): with
      :math:`r_i = L\,\theta_i / (2\pi)` the number of turns pair :math:`i` makes over
      the trained context, pairs with :math:`r_i > \beta_\text{fast}` keep
      :math:`\theta_i`, pairs with :math:`r_i < \beta_\text{slow}` get :math:`\theta_i/s`,
      and in between :math:`\theta_i' = (1 - \gamma_i)\,\theta_i/s + \gamma_i\,\theta_i`
      with :math:`\gamma_i` falling linearly *in the pair index* between the two
      boundary pairs, rounded outwards, as in the authors' released code and Hugging
      Face ``transformers``. (YaRN also multiplies the scores by
      :math:`(0.1 \ln s + 1)^2`; that is not a frequency and is not applied here.)

    Examples
    --------
    >>> from helpers.positional import rope_frequencies
    >>> rope_frequencies(8)
    array([1.   , 0.1  , 0.01 , 0.001])
    >>> rope_frequencies(8, scaling="linear", factor=4)
    array([0.25   , 0.025  , 0.0025 , 0.00025])
    >>> rope_frequencies(8, scaling="ntk", factor=4)  # pair 0 kept, the last divided by 4
    array([1.00000000e+00, 6.29960525e-02, 3.96850263e-03, 2.50000000e-04])
    """
    d = _even_width(d_head, "d_head")
    base = _positive(base, "base")
    factor = _positive(factor, "factor")
    theta = _frequencies(d, base)
    if scaling not in _SCALINGS:
        raise ValueError(f"scaling must be None, 'linear', 'ntk' or 'yarn', got {scaling!r}")
    if scaling is None:
        if factor != 1.0:
            raise ValueError(
                f"factor = {factor!r} needs a scaling ('linear', 'ntk' or 'yarn'); "
                "plain RoPE has factor 1"
            )
        return theta
    if scaling == "linear":
        return theta / factor
    if scaling == "ntk":
        if d == 2:  # a single pair, pair 0, which NTK-aware scaling leaves alone
            return theta
        return _frequencies(d, base * factor ** (d / (d - 2)))
    # yarn
    if original_length is None:
        raise ValueError("scaling='yarn' needs original_length, the trained context L")
    L = as_integer(original_length, "original_length", minimum=1)
    fast, slow = _positive(beta_fast, "beta_fast"), _positive(beta_slow, "beta_slow")
    if not fast > slow:
        raise ValueError(f"beta_fast must exceed beta_slow, got {fast!r} and {slow!r}")
    if base <= 1:
        raise ValueError(f"scaling='yarn' needs base > 1, got {base!r}")

    def pair_with_turns(turns: float) -> float:
        # The (fractional) pair index i at which L θ_i / (2π) = turns.
        return d * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(pair_with_turns(fast)), 0)
    high = min(math.ceil(pair_with_turns(slow)), d - 1)
    if low == high:
        high += 0.001  # as in the reference code: avoids 0/0, makes a step
    ramp = np.clip((np.arange(d // 2) - low) / (high - low), 0.0, 1.0)  # 0 kept .. 1 divided
    return theta * (1 - ramp) + (theta / factor) * ramp


def rotate_pairs(
    x: npt.ArrayLike, angles: npt.ArrayLike, *, layout: str = "interleaved"
) -> npt.NDArray[np.floating]:
    r"""Rotate each pair of coordinates of ``x`` by its angle (the core of RoPE).

    Parameters
    ----------
    x : (..., n, d) array_like
        Queries or keys of one or more heads, one row per position; ``d`` even.
    angles : (..., n, d/2) array_like
        Angle of pair ``i`` at row ``t``, broadcastable to ``x.shape[:-1] + (d/2,)``;
        usually ``positions[:, None] * theta``.
    layout : {"interleaved", "half"}
        Which coordinates form pair ``i``: ``(2i, 2i + 1)`` (RoFormer, Meta's Llama
        code, GPT-J) or ``(i, i + d/2)`` (Hugging Face Llama, GPT-NeoX).

    Returns
    -------
    (..., n, d) ndarray
        Pair ``(a, b)`` at angle ``φ`` becomes ``(a cos φ - b sin φ, a sin φ + b cos φ)``.
        Floats keep their dtype (float16 is computed in float32); integers give float64.

    Raises
    ------
    TypeError
        If ``x`` or ``angles`` is not real (bool, complex, ...).
    ValueError
        If ``x`` has fewer than 2 axes or an odd last axis, ``angles`` does not
        broadcast, either holds nan or inf, or ``layout`` is unknown.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.positional import rotate_pairs
    >>> rotate_pairs(np.array([[1.0, 0.0, 1.0, 0.0]]), [[np.pi / 2, 0.0]]).round(12)
    array([[0., 1., 1., 0.]])
    >>> rotate_pairs(np.array([[1.0, 1.0, 0.0, 0.0]]), [[np.pi / 2, 0.0]], layout="half").round(12)
    array([[0., 1., 1., 0.]])
    """
    layout = _layout(layout)
    x = as_real_array(x, "x", bool_hint="; rope rotates queries or keys")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., n, d), got x.shape = {x.shape}")
    d = x.shape[-1]
    if d == 0 or d % 2:
        raise ValueError(
            f"the last axis of x (d, the head width) must be even and positive: the "
            f"coordinates are rotated in pairs; got x.shape = {x.shape}"
        )
    if not np.isfinite(x).all():
        raise ValueError(f"x must be finite (x.shape = {x.shape})")
    angles = as_real_array(angles, "angles", bool_hint="")
    target = (*x.shape[:-1], d // 2)
    try:
        fits = np.broadcast_shapes(angles.shape, target) == target
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"angles must broadcast to x.shape[:-1] + (d/2,) = {target}, got angles.shape = "
            f"{angles.shape} for x.shape = {x.shape}"
        )
    if not np.isfinite(angles).all():
        raise ValueError("angles must be finite")
    out_dtype = x.dtype
    work = np.float32 if out_dtype == np.float16 else out_dtype
    angles = angles.astype(np.float64, copy=False)
    c = np.cos(angles).astype(work)  # (..., n, d/2), from float64 angles
    s = np.sin(angles).astype(work)
    x = x.astype(work, copy=False)
    if layout == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
    else:
        a, b = x[..., : d // 2], x[..., d // 2 :]
    first, second = a * c - b * s, a * s + b * c  # (..., n, d/2) each
    if layout == "interleaved":
        out = np.stack([first, second], axis=-1).reshape(*first.shape[:-1], d)
    else:
        out = np.concatenate([first, second], axis=-1)
    return out.astype(out_dtype, copy=False)


def rope(
    x: npt.ArrayLike,
    positions: npt.ArrayLike | None = None,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
) -> npt.NDArray[np.floating]:
    r"""Rotary position embedding: rotate pair ``i`` of row ``t`` by ``positions[t] · θ_i``.

    Apply it to the queries and the keys of each head, after the projections and the
    split into heads, so that ``d`` is the head width ``d_head``.

    Parameters
    ----------
    x : (..., n, d) array_like
        Queries or keys, one row per position; ``d`` even.
    positions : (n,) array_like, optional
        Position of each row; defaults to ``0, 1, ..., n - 1``. Real values are allowed
        (position interpolation divides them by the stretch factor).
    base : float, default 10000.0
        Positive; ``θ_i = base ** (-2 i / d)``.
    layout : {"interleaved", "half"}
        Pairs ``(2i, 2i + 1)`` (RoFormer, Meta's Llama code, GPT-J) or ``(i, i + d/2)``
        (Hugging Face Llama, GPT-NeoX). The two give the same scores once the columns of
        ``W_Q`` and ``W_K`` are permuted to match (chapter 4).

    Returns
    -------
    (..., n, d) ndarray
        Same shape as ``x``; floats keep their dtype, integers give float64.

    Raises
    ------
    TypeError
        If ``x`` or ``positions`` is not real, or ``base`` is not a real number.
    ValueError
        If ``x`` has fewer than 2 axes or an odd last axis, ``positions`` is not of
        shape ``(n,)`` or not finite, ``base <= 0``, or ``layout`` is unknown.

    See Also
    --------
    rope_frequencies : the θ_i, also scaled for a longer context.
    rotate_pairs : the rotation with any angles.

    Notes
    -----
    For a query :math:`\mathbf q` at position :math:`m` and a key :math:`\mathbf k` at
    position :math:`n`, :math:`\operatorname{rope}(\mathbf q, m) \cdot
    \operatorname{rope}(\mathbf k, n)` depends on :math:`m` and :math:`n` only through
    :math:`n - m`: every pair is rotated by an angle proportional to the position, and
    the dot product of two rotated pairs depends only on the difference of the angles.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.positional import rope
    >>> rng = np.random.default_rng(0)
    >>> q, k = rng.normal(size=(2, 1, 8))  # one query and one key of width 8
    >>> near = rope(q, [3]) @ rope(k, [5]).T  # offset 2
    >>> far = rope(q, [1003]) @ rope(k, [1005]).T  # offset 2, 1000 positions on
    >>> bool(np.allclose(near, far))
    True
    """
    layout = _layout(layout)
    x = as_real_array(x, "x", bool_hint="; rope rotates queries or keys")
    if x.ndim < 2 or x.shape[-1] == 0 or x.shape[-1] % 2:
        raise ValueError(
            "x must have shape (..., n, d) with d (the head width) even and positive: "
            f"the coordinates are rotated in pairs; got x.shape = {x.shape}"
        )
    n, d = x.shape[-2:]
    theta = _frequencies(d, _positive(base, "base"))  # (d/2,)
    if positions is None:
        pos = np.arange(n, dtype=np.float64)
    else:
        pos = as_real_array(positions, "positions", bool_hint="")
        if pos.shape != (n,):
            raise ValueError(
                f"positions must have shape (n,) = ({n},), one per row of x (x.shape = "
                f"{x.shape}); got positions.shape = {pos.shape}"
            )
        if not np.isfinite(pos).all():
            raise ValueError("positions must be finite")
        pos = pos.astype(np.float64)
    return rotate_pairs(x, pos[:, None] * theta, layout=layout)  # angles (n, d/2)


# ---------------------------------------------------------------------------
# ALiBi
# ---------------------------------------------------------------------------


def _geometric_slopes(h: int) -> np.ndarray:
    """The slopes for a power of two ``h``: 2^(-8/h), 2^(-16/h), ..., 2^(-8)."""
    return 2.0 ** (-8.0 * np.arange(1, h + 1) / h)


def alibi_slopes(h: int) -> npt.NDArray[np.float64]:
    r"""The head slopes of ALiBi (Press et al., 2022), for any number of heads.

    Parameters
    ----------
    h : int
        Number of heads, at least 1.

    Returns
    -------
    slopes : (h,) ndarray of float64
        Head ``k`` (from 1) gets ``2 ** (-8 k / h)`` when ``h`` is a power of 2: a
        geometric sequence from ``2 ** (-8 / h)`` down to ``2 ** -8``. Otherwise, with
        ``p`` the largest power of 2 below ``h``, the ``p`` slopes for ``p`` heads
        followed by the first ``h - p`` of every other slope for ``2 p`` heads (the
        1st, 3rd, 5th, ...), the rule of the paper's code.

    Raises
    ------
    TypeError
        If ``h`` is not an integer.
    ValueError
        If ``h < 1``.

    Examples
    --------
    >>> from helpers.positional import alibi_slopes
    >>> alibi_slopes(8)
    array([0.5       , 0.25      , 0.125     , 0.0625    , 0.03125   ,
           0.015625  , 0.0078125 , 0.00390625])
    >>> alibi_slopes(3)  # 2 heads' slopes, then the first slope of 4 heads
    array([0.0625    , 0.00390625, 0.25      ])
    """
    h = as_integer(h, "h", minimum=1)
    p = 1 << (h.bit_length() - 1)  # the largest power of 2 <= h
    slopes = _geometric_slopes(p)
    if p < h:
        slopes = np.concatenate([slopes, _geometric_slopes(2 * p)[0::2][: h - p]])
    return slopes


def alibi_bias(h: int, n: int, m: int | None = None) -> npt.NDArray[np.float64]:
    r"""ALiBi's bias for every head, query and key: ``-slope_h · |i' - j|``.

    Parameters
    ----------
    h : int
        Number of heads (slopes from :func:`alibi_slopes`); at least 1.
    n : int
        Number of queries; at least 1.
    m : int, optional
        Number of keys, at least ``n``; defaults to ``n``. The ``n`` queries are the
        last ``n`` of the ``m`` positions (a decoder with a cache of ``m - n`` earlier
        tokens), so query ``i`` sits at position ``i' = i + m - n``.

    Returns
    -------
    bias : (h, n, m) ndarray of float64
        ``bias[k, i, j] = -slopes[k] * |i' - j|``: 0 for the query's own position, more
        negative the farther key ``j`` is. Under :func:`helpers.causal_mask` ``(n, m)``
        only ``j <= i'`` is attended to, where this is ``-slopes[k] * (i' - j)``.
        Pass it as ``bias=`` to :func:`helpers.scaled_dot_product_attention` (it is
        added after the scaling by ``1 / sqrt(d_k)``).

    Raises
    ------
    TypeError
        If ``h``, ``n`` or ``m`` is not an integer.
    ValueError
        If ``h < 1``, ``n < 1`` or ``m < n``.

    Examples
    --------
    >>> from helpers.positional import alibi_bias
    >>> alibi_bias(8, 4)[0]  # head 1 of 8: slope 1/2
    array([[ 0. , -0.5, -1. , -1.5],
           [-0.5,  0. , -0.5, -1. ],
           [-1. , -0.5,  0. , -0.5],
           [-1.5, -1. , -0.5,  0. ]])
    >>> alibi_bias(2, 1, 4)  # one new query, at position 3 of 4: slopes 1/16 and 1/256
    array([[[-0.1875    , -0.125     , -0.0625    ,  0.        ]],
    <BLANKLINE>
           [[-0.01171875, -0.0078125 , -0.00390625,  0.        ]]])
    """
    slopes = alibi_slopes(h)  # (h,)
    n = as_integer(n, "n", minimum=1)
    m = n if m is None else as_integer(m, "m", minimum=1)
    if m < n:
        raise ValueError(
            f"m (keys) must be at least n (queries): the n queries are the last n of the "
            f"m positions; got n = {n}, m = {m}"
        )
    query_pos = np.arange(n) + (m - n)  # (n,): position i' of query i
    distance = np.abs(query_pos[:, None] - np.arange(m)[None, :])  # (n, m), integers
    return slopes[:, None, None] * -distance  # (h, n, m); -0 never appears


# ---------------------------------------------------------------------------
# T5's relative position buckets
# ---------------------------------------------------------------------------


def t5_relative_position_bucket(
    relative_position: npt.ArrayLike,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> npt.NDArray[np.int64]:
    r"""The bucket of each offset in T5's learned relative position biases (Raffel et al.).

    T5 adds to the score of query position ``i`` and key position ``j`` a learned number
    ``b[bucket(j - i)]`` per head. Offsets share buckets: exact ones for short
    distances, logarithmically wider ones up to ``max_distance``, and one last bucket
    for every distance beyond it.

    Parameters
    ----------
    relative_position : (...) array_like of int
        Key position minus query position, ``j - i``.
    bidirectional : bool, default True
        True for the encoder: half of the buckets for keys after the query
        (``j - i > 0``), half for the others. False for the decoder (causal): only
        ``j - i <= 0`` is told apart; every later key falls in bucket 0 (it is masked).
    num_buckets : int, default 32
        Number of buckets, at least 2 (4 when bidirectional).
    max_distance : int, default 128
        Distances from this one on share the last bucket of their side.

    Returns
    -------
    bucket : (...) ndarray of int64
        With ``B = num_buckets`` (halved when bidirectional, ``B / 2`` added for
        ``j - i > 0``), ``e = B // 2`` and the distance ``r = |j - i|`` (bidirectional)
        or ``max(i - j, 0)`` (causal): ``r`` itself for ``r < e``, otherwise
        ``min(e + floor(log(r / e) / log(max_distance / e) * (B - e)), B - 1)``.

    Raises
    ------
    TypeError
        If ``relative_position`` is not an array of integers, or an argument has the
        wrong type.
    ValueError
        If ``num_buckets`` or ``max_distance`` is too small for the buckets to be
        defined.

    Notes
    -----
    Raffel et al. (2020) use 32 buckets and ``max_distance = 128``, one table of
    ``num_buckets x num_heads`` learned biases shared by the layers of a stack. Equal to
    Hugging Face's ``T5Attention._relative_position_bucket`` (which computes the logarithm
    in float32) for every offset up to 1000 in the tests.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.positional import t5_relative_position_bucket
    >>> t5_relative_position_bucket(np.array([-3, 0, 3, 20, 200]))
    array([ 3,  0, 19, 26, 31])
    >>> t5_relative_position_bucket(np.array([-200, -20, -3, 0, 3]), bidirectional=False)
    array([31, 17,  3,  0,  0])
    """
    rel = np.asarray(relative_position)
    if rel.dtype.kind not in "iu":
        raise TypeError(
            f"relative_position must be an array of integers (key minus query position), "
            f"got dtype {rel.dtype}"
        )
    if not isinstance(bidirectional, (bool, np.bool_)):
        raise TypeError(f"bidirectional must be True or False, got {bidirectional!r}")
    num_buckets = as_integer(num_buckets, "num_buckets", minimum=1)
    max_distance = as_integer(max_distance, "max_distance", minimum=1)
    rel = rel.astype(np.int64)
    buckets = np.zeros(rel.shape, dtype=np.int64)
    if bidirectional:
        if num_buckets < 4:
            raise ValueError(
                f"num_buckets must be at least 4 when bidirectional (two sides, each with an "
                f"exact and a logarithmic part), got {num_buckets}"
            )
        num_buckets //= 2
        buckets += (rel > 0) * num_buckets  # keys after the query: the upper half
        distance = np.abs(rel)
    else:
        if num_buckets < 2:
            raise ValueError(f"num_buckets must be at least 2, got {num_buckets}")
        distance = np.maximum(-rel, 0)  # later keys (masked) all go to bucket 0
    max_exact = num_buckets // 2
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance must exceed the {max_exact} exact buckets, got {max_distance}"
        )
    ratio = np.maximum(distance, 1) / max_exact  # (the exact distances do not use it)
    scaled = np.log(ratio) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    large = max_exact + np.where(distance < max_exact, 0, scaled).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return buckets + np.where(distance < max_exact, distance, large)

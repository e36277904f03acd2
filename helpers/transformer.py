"""Introduced in chapter 6, the Transformer block, written and trained in NumPy.

The pieces of an encoder block and their backward passes:

* :func:`layer_norm`, :func:`layer_norm_backward` and :func:`layer_norm_jacobian`;
  :func:`rms_norm` for comparison;
* :func:`feed_forward` (two linear layers with ``"relu"``, ``"gelu"`` or
  ``"gelu_tanh"`` between them) and :func:`feed_forward_backward`, with the
  activations :func:`relu`, :func:`gelu`, :func:`gelu_tanh`;
* :func:`init_block_params`, :func:`block_parameter_count`, :func:`encoder_block`
  (post-LN or pre-LN, with optional dropout at the places of ``DROPOUT_SITES``) and
  :func:`encoder_block_backward`;
* LLaMA's gated feed-forward network :func:`swiglu_feed_forward` and its width
  :func:`swiglu_hidden_size`;
* what training needs: :func:`cross_entropy` (with its gradient), :class:`Adam` and the
  original learning-rate schedule :func:`transformer_learning_rate`.

The attention sublayer is chapter 3's :func:`~helpers.multihead.multi_head_attention`
and its backward pass :func:`~helpers.multihead.multi_head_attention_backward`.

Conventions shared by all functions here
----------------------------------------
* Row vectors (``book/notation.md``): a token is a row of width ``d_model`` and a
  linear layer is ``x @ W + b`` with ``W`` of shape ``(d_in, d_out)``. PyTorch's
  ``nn.Linear`` stores the transpose: its ``weight`` is ``W.T``.
* Batched over leading axes: ``X`` is ``(..., n, d_model)``. Weight and bias
  gradients are summed over every leading axis and every token.
* The block's parameters are one dict with exactly the keys of
  :func:`init_block_params`; ``ln1`` is the norm around the attention sublayer and
  ``ln2`` the one around the feed-forward sublayer, in both orders (PyTorch's
  ``norm1`` and ``norm2``).
* The mask follows chapter 3 (True = *may attend*, at most 2 axes ``(n, n)`` or one
  axis per axis of the weights ``(*batch, h, n, n)``).
* dtypes: float32 and float64 inputs are computed in their own dtype; integers are
  converted to float64. :func:`layer_norm` and :func:`rms_norm` compute float16 input
  in float32 and round once at the end (the squares of float16 numbers overflow
  beyond 256).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from helpers._validate import as_integer, as_real_array
from helpers.multihead import (
    _weight_grad,
    init_mha_params,
    merge_heads,
    mha_parameter_count,
    multi_head_attention,
    multi_head_attention_backward,
    split_heads,
)
from helpers.softmax import log_softmax, softmax

__all__ = [
    "ACTIVATIONS",
    "BLOCK_PARAM_NAMES",
    "DROPOUT_SITES",
    "Adam",
    "block_parameter_count",
    "cross_entropy",
    "encoder_block",
    "encoder_block_backward",
    "feed_forward",
    "feed_forward_backward",
    "gelu",
    "gelu_tanh",
    "init_block_params",
    "layer_norm",
    "layer_norm_backward",
    "layer_norm_jacobian",
    "relu",
    "rms_norm",
    "swiglu_feed_forward",
    "swiglu_hidden_size",
    "transformer_learning_rate",
]

#: The activations :func:`feed_forward` accepts.
ACTIVATIONS = ("relu", "gelu", "gelu_tanh")

#: The keys of a block's parameter dict, in the order :func:`init_block_params` makes them.
BLOCK_PARAM_NAMES = (
    "W_Q",
    "W_K",
    "W_V",
    "W_O",
    "b_Q",
    "b_K",
    "b_V",
    "b_O",
    "W_1",
    "b_1",
    "W_2",
    "b_2",
    "ln1_gamma",
    "ln1_beta",
    "ln2_gamma",
    "ln2_beta",
)

_ATTENTION_NAMES = BLOCK_PARAM_NAMES[:8]
_FFN_NAMES = ("W_1", "b_1", "W_2", "b_2")


# ---------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------


def _array(x: npt.ArrayLike, name: str) -> np.ndarray:
    return as_real_array(x, name, bool_hint=" passed in the wrong position?")


def _check_eps(eps: object) -> float:
    is_real = isinstance(eps, numbers.Real) or (
        isinstance(eps, np.ndarray) and eps.ndim == 0 and eps.dtype.kind in "iuf"
    )
    if not is_real or isinstance(eps, (bool, np.bool_)):
        raise TypeError(f"eps must be a real number, got {eps!r}")
    value = float(eps)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(
            f"eps must be positive and finite, got {value!r}: it keeps 1/sqrt(var + eps) "
            "finite for a token whose entries are all equal"
        )
    return value


def _check_activation(activation: object) -> str:
    if not isinstance(activation, str) or activation not in ACTIVATIONS:
        raise ValueError(
            f"activation must be one of {', '.join(repr(a) for a in ACTIVATIONS)}, "
            f"got {activation!r}"
        )
    return activation


def _check_vector(v: np.ndarray, name: str, d: int, what: str) -> None:
    if v.shape != (d,):
        raise ValueError(f"{name} must have shape ({what},) = ({d},), got {v.shape}")


def _work(x: np.ndarray, *others: np.ndarray) -> tuple[np.dtype, np.dtype]:
    """``(dtype computed in, dtype returned)``: float16 is computed in float32."""
    out = np.result_type(x, *others)
    return (np.dtype(np.float32) if out == np.float16 else out), out


def _norm_input(x: npt.ArrayLike, name: str = "x") -> np.ndarray:
    arr = _array(x, name)
    if arr.ndim < 1 or arr.shape[-1] == 0:
        raise ValueError(
            f"{name} must have shape (..., d) with d >= 1 (the last axis is normalised), "
            f"got {arr.shape}"
        )
    return arr


def _norm_args(
    x: npt.ArrayLike, eps: object, **vectors: npt.ArrayLike
) -> tuple[np.ndarray, dict[str, np.ndarray], float, np.dtype]:
    """Check a norm's input, its ``(d,)`` parameters and ``eps``; return them in one dtype.

    Returns ``(x, vectors, eps, out_dtype)``: ``x`` and every vector converted to the
    dtype computed in (float32 for float16 input) and the dtype to return.
    """
    arr = _norm_input(x)
    d = arr.shape[-1]
    vs = {name: _array(v, name) for name, v in vectors.items()}
    for name, v in vs.items():
        _check_vector(v, name, d, "d")
    eps = _check_eps(eps)
    work, out = _work(arr, *vs.values())
    return arr.astype(work, copy=False), {k: v.astype(work) for k, v in vs.items()}, eps, out


# ---------------------------------------------------------------------------
# Layer normalisation
# ---------------------------------------------------------------------------


def _ln_forward(
    x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(y, x_hat, rstd)`` with ``rstd = 1 / sqrt(var + eps)`` of shape (..., 1)."""
    mu = x.mean(axis=-1, keepdims=True)  # (..., 1)
    xc = x - mu  # (..., d)
    var = np.mean(xc * xc, axis=-1, keepdims=True)  # (..., 1): biased, as in the definition
    rstd = 1.0 / np.sqrt(var + x.dtype.type(eps))
    x_hat = xc * rstd  # (..., d)
    return x_hat * gamma + beta, x_hat, rstd


def _ln_backward(
    G: np.ndarray, x_hat: np.ndarray, rstd: np.ndarray, gamma: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(dx, dgamma, dbeta)`` for ``y = gamma * x_hat + beta`` and ``G = dL/dy``."""
    d = x_hat.shape[-1]
    flat_G, flat_xh = G.reshape(-1, d), x_hat.reshape(-1, d)
    dgamma = np.einsum("ij,ij->j", flat_G, flat_xh)  # (d,)
    dbeta = flat_G.sum(axis=0)  # (d,)
    g = G * gamma  # dL/dx_hat, (..., d)
    mean_g = g.mean(axis=-1, keepdims=True)
    mean_gx = np.mean(g * x_hat, axis=-1, keepdims=True)
    dx = (g - mean_g - x_hat * mean_gx) * rstd  # (..., d)
    return dx, dgamma, dbeta


def layer_norm(
    x: npt.ArrayLike, gamma: npt.ArrayLike, beta: npt.ArrayLike, *, eps: float = 1e-5
) -> npt.NDArray[np.floating]:
    r"""Layer normalisation of every row (token) of ``x`` over its ``d`` features.

    Parameters
    ----------
    x : (..., d) array_like
        Tokens, one per row; the last axis is normalised.
    gamma, beta : (d,) array_like
        Gain and shift, learned per feature (PyTorch's ``weight`` and ``bias``).
    eps : float, default 1e-5
        Added to the variance (PyTorch's ``eps``); must be positive.

    Returns
    -------
    y : (..., d) ndarray
        ``gamma * (x - mean) / sqrt(var + eps) + beta``.

    Raises
    ------
    TypeError
        If an input is not real-valued or ``eps`` is not a number.
    ValueError
        If ``gamma`` or ``beta`` does not have shape ``(d,)``, ``x`` has no last
        axis, or ``eps`` is not positive and finite.

    See Also
    --------
    layer_norm_backward, layer_norm_jacobian, rms_norm

    Notes
    -----
    For a row :math:`\mathbf x \in \mathbb R^d`,

    .. math::

        \mu = \frac1d \sum_i x_i, \qquad
        \sigma^2 = \frac1d \sum_i (x_i - \mu)^2, \qquad
        y_i = \gamma_i \frac{x_i - \mu}{\sqrt{\sigma^2 + \varepsilon}} + \beta_i .

    The variance is the biased one (divide by :math:`d`), as in Ba et al. and
    ``torch.nn.LayerNorm``. It is computed from :math:`x - \mu` (two passes), so a
    large common offset does not cancel digits. A row of equal entries has
    :math:`\sigma = 0` and gives :math:`y = \beta`.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import layer_norm
    >>> x = np.array([[1.0, 2.0, 3.0, 6.0], [10.0, 10.0, 10.0, 10.0]])
    >>> y = layer_norm(x, np.ones(4), np.zeros(4))
    >>> y.round(4)
    array([[-1.069 , -0.5345,  0.    ,  1.6036],
           [ 0.    ,  0.    ,  0.    ,  0.    ]])
    >>> y[0].mean().round(12), y[0].var().round(4)  # mean 0, variance ~1 (eps aside)
    (np.float64(0.0), np.float64(1.0))
    """
    arr, v, eps, out = _norm_args(x, eps, gamma=gamma, beta=beta)
    y, _, _ = _ln_forward(arr, v["gamma"], v["beta"], eps)
    return y.astype(out, copy=False)


def layer_norm_backward(
    grad_y: npt.ArrayLike, x: npt.ArrayLike, gamma: npt.ArrayLike, *, eps: float = 1e-5
) -> tuple[npt.NDArray[np.floating], npt.NDArray[np.floating], npt.NDArray[np.floating]]:
    r"""Gradients of a loss through :func:`layer_norm`.

    Parameters
    ----------
    grad_y : (..., d) array_like
        :math:`G = \partial L / \partial y`, the shape of ``x``.
    x : (..., d) array_like
        The input of the forward pass.
    gamma : (d,) array_like
        The gain of the forward pass (``beta`` does not enter any gradient).
    eps : float, default 1e-5
        The forward pass's ``eps``.

    Returns
    -------
    grad_x : (..., d) ndarray
        :math:`\partial L / \partial x`.
    grad_gamma, grad_beta : (d,) ndarray
        :math:`\partial L / \partial \gamma` and :math:`\partial L / \partial \beta`,
        summed over every row.

    Raises
    ------
    TypeError, ValueError
        As for :func:`layer_norm`; also if ``grad_y`` does not have the shape of ``x``.

    See Also
    --------
    layer_norm, layer_norm_jacobian

    Notes
    -----
    With :math:`\hat x = (x - \mu)/\sigma_\varepsilon`,
    :math:`\sigma_\varepsilon = \sqrt{\sigma^2 + \varepsilon}` and
    :math:`g = \gamma \odot G` (the gradient with respect to :math:`\hat x`), the
    Jacobian :math:`\partial \hat x_i / \partial x_j = (\delta_{ij} - \tfrac1d -
    \tfrac1d \hat x_i \hat x_j)/\sigma_\varepsilon` is symmetric, so

    .. math::

        \frac{\partial L}{\partial x} = \frac{1}{\sigma_\varepsilon}
        \Big(g - \operatorname{mean}(g) - \hat x \operatorname{mean}(g \odot \hat x)\Big),
        \qquad
        \frac{\partial L}{\partial \gamma} = \sum_\text{rows} G \odot \hat x, \qquad
        \frac{\partial L}{\partial \beta} = \sum_\text{rows} G,

    with the means over the features of each row. The gradient with respect to
    :math:`x` sums to 0 over each row (a shift of the row changes nothing) and is
    almost orthogonal to :math:`\hat x` (a rescaling changes almost nothing): its
    component along :math:`\hat x` carries the factor
    :math:`\varepsilon / (\sigma^2 + \varepsilon)`.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import layer_norm, layer_norm_backward
    >>> rng = np.random.default_rng(0)
    >>> x, G = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    >>> gamma = rng.normal(size=5)
    >>> dx, dgamma, dbeta = layer_norm_backward(G, x, gamma)
    >>> np.allclose(dx.sum(axis=-1), 0)  # a common shift of a row changes nothing
    True
    >>> def loss(x):
    ...     return np.sum(G * layer_norm(x, gamma, np.zeros(5)))
    >>> E = np.zeros((3, 5))
    >>> E[1, 2] = 1e-6
    >>> bool(np.isclose((loss(x + E) - loss(x - E)) / 2e-6, dx[1, 2], atol=1e-8))
    True
    """
    arr, v, eps, out = _norm_args(x, eps, gamma=gamma)
    g = v["gamma"]
    G = _array(grad_y, "grad_y")
    if G.shape != arr.shape:
        raise ValueError(f"grad_y must have the shape of x, {arr.shape}, got {G.shape}")
    out = np.result_type(out, G)  # the gradient's dtype joins those of x and gamma
    work = np.dtype(np.float32) if out == np.float16 else out
    arr, g, G = arr.astype(work, copy=False), g.astype(work), G.astype(work, copy=False)
    _, x_hat, rstd = _ln_forward(arr, g, np.zeros_like(g), eps)
    dx, dgamma, dbeta = _ln_backward(G, x_hat, rstd, g)
    return dx.astype(out, copy=False), dgamma.astype(out), dbeta.astype(out)


def layer_norm_jacobian(
    x: npt.ArrayLike, gamma: npt.ArrayLike, *, eps: float = 1e-5
) -> npt.NDArray[np.floating]:
    r"""The Jacobian of :func:`layer_norm` with respect to each row of ``x``.

    Parameters
    ----------
    x : (..., d) array_like
        Rows at which to evaluate the Jacobian.
    gamma : (d,) array_like
        The gain.
    eps : float, default 1e-5
        As in :func:`layer_norm`.

    Returns
    -------
    J : (..., d, d) ndarray
        ``J[..., i, j] = ∂y_i / ∂x_j`` for each row.

    Raises
    ------
    TypeError, ValueError
        As for :func:`layer_norm`.

    Notes
    -----
    .. math::

        J = \frac{1}{\sigma_\varepsilon}\, \operatorname{diag}(\gamma)
        \Big(I - \tfrac1d \mathbf 1 \mathbf 1^\top - \tfrac1d \hat x \hat x^\top\Big).

    The bracket is symmetric; :math:`\mathbf 1` is in its null space (shifting a row
    changes nothing) and :math:`\hat x` nearly so: it has eigenvalue
    :math:`\varepsilon / (\sigma^2 + \varepsilon)` there (0 without ``eps``: scaling
    a row changes nothing). On the other :math:`d - 2` directions it is the identity.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import layer_norm_jacobian
    >>> x = np.array([1.0, 2.0, 3.0, 6.0])
    >>> J = layer_norm_jacobian(x, np.ones(4))
    >>> J.shape
    (4, 4)
    >>> np.allclose(J @ np.ones(4), 0)  # the direction (1, ..., 1) is removed
    True
    """
    arr, v, eps, out = _norm_args(x, eps, gamma=gamma)
    g, d = v["gamma"], arr.shape[-1]
    _, x_hat, rstd = _ln_forward(arr, g, np.zeros_like(g), eps)
    P = np.eye(d, dtype=arr.dtype) - 1.0 / d - x_hat[..., :, None] * x_hat[..., None, :] / d
    J = g[:, None] * P * rstd[..., None]  # (..., d, d)
    return J.astype(out, copy=False)


def rms_norm(
    x: npt.ArrayLike, gamma: npt.ArrayLike, *, eps: float = 1e-6
) -> npt.NDArray[np.floating]:
    r"""RMS normalisation: divide each row by its root mean square, then scale.

    Parameters
    ----------
    x : (..., d) array_like
        Tokens, one per row.
    gamma : (d,) array_like
        Gain per feature (there is no shift).
    eps : float, default 1e-6
        Added to the mean square; must be positive.

    Returns
    -------
    y : (..., d) ndarray
        ``gamma * x / sqrt(mean(x**2) + eps)``.

    Raises
    ------
    TypeError, ValueError
        As for :func:`layer_norm`.

    Notes
    -----
    Zhang and Sennrich's RMSNorm drops the mean of layer normalisation:
    :math:`y_i = \gamma_i x_i / \sqrt{\tfrac1d \sum_j x_j^2 + \varepsilon}`. It is
    invariant to rescaling a row, not to shifting it. ``torch.nn.RMSNorm`` computes
    the same.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import rms_norm
    >>> rms_norm(np.array([3.0, 4.0]), np.ones(2), eps=1e-12).round(4)  # rms = sqrt(12.5)
    array([0.8485, 1.1314])
    """
    arr, v, eps, out = _norm_args(x, eps, gamma=gamma)
    ms = np.mean(arr * arr, axis=-1, keepdims=True)
    return (arr / np.sqrt(ms + arr.dtype.type(eps)) * v["gamma"]).astype(out, copy=False)


# ---------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------

# W. J. Cody, "Rational Chebyshev approximations for the error function", Math. Comp.
# 23 (1969): erf on |x| <= 0.46875, erfc on 0.46875 < |x| <= 4 and on |x| > 4. The
# coefficients are those of his double-precision routine CALERF. NumPy has no erf,
# math.erf works on one number at a time, and the book needs no SciPy; the tests check
# this against math.erf on a dense grid.
_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
          3.20937758913846947e03, 1.85777706184603153e-1)  # fmt: skip
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
          2.84423683343917062e03)  # fmt: skip
_ERF_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
          2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
          2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)  # fmt: skip
_ERF_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
          1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
          3.43936767414372164e03, 1.23033935480374942e03)  # fmt: skip
_ERF_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
          1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)  # fmt: skip
_ERF_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1,
          6.05183413124413191e-2, 2.33520497626869185e-3)  # fmt: skip
_INV_SQRT_PI = 0.56418958354775628695
_INV_SQRT_2 = 0.70710678118654752440
_INV_SQRT_2PI = 0.39894228040143267794
_SQRT_2_OVER_PI = 0.79788456080286535588
_GELU_TANH_C = 0.044715


def _ratio(t: np.ndarray, num: tuple[float, ...], den: tuple[float, ...]) -> np.ndarray:
    """Cody's rational function: the last numerator coefficient is the leading one."""
    xnum = num[-1] * t
    xden = t
    for a, b in zip(num[: len(den) - 1], den[:-1], strict=False):
        xnum = (xnum + a) * t
        xden = (xden + b) * t
    return (xnum + num[len(den) - 1]) / (xden + den[-1])


def _exp_minus_square(y: np.ndarray) -> np.ndarray:
    """``exp(-y²)`` without the rounding error of ``y²`` (Cody's split ``y = a + δ``).

    ``a = trunc(16 y) / 16`` has a short mantissa, so ``a²`` is exact, and
    ``y² - a² = (y - a)(y + a)`` is small: the error of ``exp(-y * y)``, which grows
    like ``y²`` ulps, disappears.
    """
    a = np.trunc(y * 16.0) / 16.0
    return np.exp(-a * a) * np.exp(-(y - a) * (y + a))


def _erfc_abs(y: np.ndarray) -> np.ndarray:
    """``erfc(y)`` for ``y >= 0.46875``: Cody's second and third intervals."""
    out = np.empty_like(y)
    mid = y <= 4.0
    ym = y[mid]
    out[mid] = _exp_minus_square(ym) * _ratio(ym, _ERF_C, _ERF_D)
    yl = np.minimum(y[~mid], 27.0)  # erfc(27) < 1e-318: beyond, the result is 0
    z = 1.0 / (yl * yl)
    tail = (_INV_SQRT_PI - z * _ratio(z, _ERF_P, _ERF_Q)) / yl
    out[~mid] = np.where(y[~mid] < 27.0, _exp_minus_square(yl) * tail, 0.0)
    return out


def _std_normal_cdf(x: np.ndarray) -> np.ndarray:
    """``Φ(x) = erfc(-x / √2) / 2``, accurate in the far left tail as well."""
    t = -x * x.dtype.type(_INV_SQRT_2)
    y = np.abs(t)
    out = np.empty_like(x)
    small = y <= 0.46875
    ts = t[small]
    out[small] = 0.5 - 0.5 * ts * _ratio(ts * ts, _ERF_A, _ERF_B)  # (1 - erf(t)) / 2
    tb = t[~small]
    with np.errstate(under="ignore"):  # the far tail rounds to subnormals and 0
        half_erfc = 0.5 * _erfc_abs(np.abs(tb))
    out[~small] = np.where(tb > 0, half_erfc, 1.0 - half_erfc)  # erfc(-|t|) = 2 - erfc(|t|)
    return out


def _activation_input(x: npt.ArrayLike) -> tuple[np.ndarray, np.dtype]:
    arr = _array(x, "x")
    work, out = _work(arr)
    return arr.astype(work, copy=False), out


def relu(x: npt.ArrayLike) -> npt.NDArray[np.floating]:
    """``max(x, 0)`` entry by entry, the activation of the original Transformer.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import relu
    >>> relu(np.array([-2.0, 0.0, 3.0]))
    array([0., 0., 3.])
    """
    arr, out = _activation_input(x)
    return np.maximum(arr, 0).astype(out, copy=False)


def gelu(x: npt.ArrayLike) -> npt.NDArray[np.floating]:
    r"""The Gaussian error linear unit, exact form: ``x Φ(x)``.

    ``Φ`` is the standard normal distribution function, :math:`\Phi(x) = \tfrac12
    (1 + \operatorname{erf}(x/\sqrt2))`; this is ``torch.nn.functional.gelu`` with
    ``approximate="none"`` and the activation of BERT.

    Notes
    -----
    NumPy has no vectorised ``erf``; :math:`\Phi(x) = \tfrac12
    \operatorname{erfc}(-x/\sqrt2)` is computed from Cody's rational Chebyshev
    approximations (1969). Against ``math.erfc`` in float64 the absolute error is
    below 3e-16 and, far into the left tail (down to 1e-300), the relative error
    below 1e-12.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import gelu
    >>> gelu(np.array([-3.0, -1.0, 0.0, 1.0, 3.0])).round(6)
    array([-0.00405 , -0.158655,  0.      ,  0.841345,  2.99595 ])
    """
    arr, out = _activation_input(x)
    return (arr * _std_normal_cdf(arr)).astype(out, copy=False)


def gelu_tanh(x: npt.ArrayLike) -> npt.NDArray[np.floating]:
    r"""The tanh approximation of GELU, the activation of GPT-2.

    :math:`\tfrac12 x \big(1 + \tanh\big(\sqrt{2/\pi}\,(x + 0.044715 x^3)\big)\big)`,
    ``torch.nn.functional.gelu(x, approximate="tanh")``. It differs from
    :func:`gelu` by at most about 5e-4.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import gelu, gelu_tanh
    >>> x = np.linspace(-6, 6, 1201)
    >>> float(np.abs(gelu_tanh(x) - gelu(x)).max()) < 5e-4
    True
    """
    arr, out = _activation_input(x)
    return _gelu_tanh(arr).astype(out, copy=False)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    c = x.dtype.type(_SQRT_2_OVER_PI)
    return 0.5 * x * (1.0 + np.tanh(c * (x + x.dtype.type(_GELU_TANH_C) * x * x * x)))


def _activate(z: np.ndarray, activation: str) -> np.ndarray:
    if activation == "relu":
        return np.maximum(z, 0)
    if activation == "gelu":
        return z * _std_normal_cdf(z)
    return _gelu_tanh(z)


def _activation_grad(z: np.ndarray, activation: str) -> np.ndarray:
    """The derivative of the activation at ``z``, entry by entry."""
    if activation == "relu":
        return (z > 0).astype(z.dtype)  # 0 at z = 0, as PyTorch's autograd
    if activation == "gelu":
        return _std_normal_cdf(z) + z * np.exp(-0.5 * z * z) * z.dtype.type(_INV_SQRT_2PI)
    c, k = z.dtype.type(_SQRT_2_OVER_PI), z.dtype.type(_GELU_TANH_C)
    t = np.tanh(c * (z + k * z * z * z))
    return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * c * (1.0 + 3.0 * k * z * z)


# ---------------------------------------------------------------------------
# The position-wise feed-forward network
# ---------------------------------------------------------------------------


def _ffn_arrays(
    x: npt.ArrayLike, W_1: npt.ArrayLike, b_1: npt.ArrayLike, W_2: npt.ArrayLike, b_2: npt.ArrayLike
) -> tuple[np.ndarray, ...]:
    arr = _array(x, "x")
    if arr.ndim < 1 or arr.shape[-1] == 0:
        raise ValueError(f"x must have shape (..., d_model), d_model >= 1, got {arr.shape}")
    d = arr.shape[-1]
    w1, c1, w2, c2 = (
        _array(v, k) for v, k in ((W_1, "W_1"), (b_1, "b_1"), (W_2, "W_2"), (b_2, "b_2"))
    )
    if w1.ndim != 2 or w1.shape[0] != d:
        raise ValueError(
            f"W_1 must have shape (d_model, d_ff) with d_model = {d} (the last axis of x, "
            f"x.shape = {arr.shape}), got {w1.shape}"
        )
    d_ff = w1.shape[1]
    _check_vector(c1, "b_1", d_ff, "d_ff")
    if w2.shape != (d_ff, d):
        raise ValueError(f"W_2 must have shape (d_ff, d_model) = {(d_ff, d)}, got {w2.shape}")
    _check_vector(c2, "b_2", d, "d_model")
    dtype = np.result_type(arr, w1, c1, w2, c2)
    return tuple(a.astype(dtype, copy=False) for a in (arr, w1, c1, w2, c2))


def _ffn_forward(
    x: np.ndarray, W_1: np.ndarray, b_1: np.ndarray, W_2: np.ndarray, b_2: np.ndarray, act: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(y, z, a)``: the output, the hidden pre-activations and activations."""
    z = x @ W_1 + b_1  # (..., n, d_ff)
    a = _activate(z, act)  # (..., n, d_ff)
    return a @ W_2 + b_2, z, a  # (..., n, d_model)


def _sum_rows(M: np.ndarray) -> np.ndarray:
    return M.reshape(-1, M.shape[-1]).sum(axis=0)


def _ffn_backward(
    G: np.ndarray, x: np.ndarray, z: np.ndarray, a: np.ndarray, W_1: np.ndarray,
    W_2: np.ndarray, act: str,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:  # fmt: skip
    grads = {"W_2": _weight_grad(a, G), "b_2": _sum_rows(G)}
    dz = (G @ W_2.T) * _activation_grad(z, act)  # (..., n, d_ff)
    grads["W_1"] = _weight_grad(x, dz)
    grads["b_1"] = _sum_rows(dz)
    return dz @ W_1.T, {k: grads[k] for k in _FFN_NAMES}


def feed_forward(
    x: npt.ArrayLike,
    W_1: npt.ArrayLike,
    b_1: npt.ArrayLike,
    W_2: npt.ArrayLike,
    b_2: npt.ArrayLike,
    *,
    activation: str = "relu",
) -> npt.NDArray[np.floating]:
    r"""The position-wise feed-forward network: ``act(x @ W_1 + b_1) @ W_2 + b_2``.

    Parameters
    ----------
    x : (..., d_model) array_like
        Tokens, one per row; each row is transformed on its own.
    W_1 : (d_model, d_ff) array_like
        First layer (PyTorch's ``linear1.weight`` is its transpose).
    b_1 : (d_ff,) array_like
    W_2 : (d_ff, d_model) array_like
        Second layer.
    b_2 : (d_model,) array_like
    activation : {"relu", "gelu", "gelu_tanh"}, default "relu"
        ReLU (the original Transformer), GELU in its exact erf form (BERT, PyTorch's
        ``"gelu"``) or its tanh approximation (GPT-2).

    Returns
    -------
    y : (..., d_model) ndarray

    Raises
    ------
    TypeError
        If an input is not real-valued.
    ValueError
        If a weight or bias has the wrong shape (the message names it and both
        shapes), or ``activation`` is unknown.

    See Also
    --------
    feed_forward_backward, relu, gelu, gelu_tanh

    Notes
    -----
    .. math::

        \operatorname{FFN}(x) = \phi(x W_1 + b_1)\, W_2 + b_2 ,

    applied to every token separately: it mixes the features of a token, never two
    tokens. Usually :math:`d_\text{ff} = 4 d_\text{model}`.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import feed_forward
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(2, 5, 4))  # 2 sequences of 5 tokens, d_model = 4
    >>> W_1, W_2 = rng.normal(size=(4, 16)), rng.normal(size=(16, 4))
    >>> y = feed_forward(x, W_1, np.zeros(16), W_2, np.zeros(4), activation="gelu")
    >>> y.shape
    (2, 5, 4)
    >>> np.allclose(
    ...     y[1, 3], feed_forward(x[1, 3], W_1, np.zeros(16), W_2, np.zeros(4), activation="gelu")
    ... )  # token by token
    True
    """
    act = _check_activation(activation)
    arrays = _ffn_arrays(x, W_1, b_1, W_2, b_2)
    return _ffn_forward(*arrays, act)[0]


def swiglu_feed_forward(
    x: npt.ArrayLike, W_1: npt.ArrayLike, W_3: npt.ArrayLike, W_2: npt.ArrayLike
) -> npt.NDArray[np.floating]:
    r"""The gated feed-forward network of LLaMA: ``(silu(x @ W_1) * (x @ W_3)) @ W_2``.

    Parameters
    ----------
    x : (..., d_model) array_like
        Tokens, one per row.
    W_1 : (d_model, d_ff) array_like
        The gate's projection (Hugging Face's ``gate_proj``, transposed).
    W_3 : (d_model, d_ff) array_like
        The value's projection (``up_proj``).
    W_2 : (d_ff, d_model) array_like
        The output projection (``down_proj``).

    Returns
    -------
    y : (..., d_model) ndarray

    Raises
    ------
    TypeError
        If an input is not real-valued.
    ValueError
        If a weight has the wrong shape (the message names it and both shapes).

    Notes
    -----
    .. math::

        \operatorname{SwiGLU}(x) = \big(\operatorname{SiLU}(x W_1) \odot x W_3\big) W_2,
        \qquad \operatorname{SiLU}(u) = u\,\sigma(u),

    with no biases (Shazeer 2020; LLaMA, Mixtral's experts). It has
    :math:`3 d_\text{model} d_\text{ff}` parameters: with
    :math:`d_\text{ff} = \tfrac23 \cdot 4 d_\text{model}` as many weights as a ReLU
    network of width :math:`4 d_\text{model}`.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import swiglu_feed_forward
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(2, 5, 6))
    >>> W_1, W_3, W_2 = rng.normal(size=(6, 16)), rng.normal(size=(6, 16)), rng.normal(size=(16, 6))
    >>> swiglu_feed_forward(x, W_1, W_3, W_2).shape
    (2, 5, 6)
    """
    xa = _array(x, "x")
    if xa.ndim < 1:
        raise ValueError("x must have shape (..., d_model), got a scalar")
    d = xa.shape[-1]
    ws = {"W_1": _array(W_1, "W_1"), "W_3": _array(W_3, "W_3"), "W_2": _array(W_2, "W_2")}
    if ws["W_1"].ndim != 2 or ws["W_1"].shape[0] != d:
        raise ValueError(
            f"W_1 must have shape (d_model, d_ff) = ({d}, d_ff), got {ws['W_1'].shape}"
        )
    f = ws["W_1"].shape[1]
    for name, shape in (("W_3", (d, f)), ("W_2", (f, d))):
        if ws[name].shape != shape:
            raise ValueError(f"{name} must have shape {shape}, got {ws[name].shape}")
    work, out = _work(xa, *ws.values())
    xw = xa.astype(work, copy=False)
    u = xw @ ws["W_1"].astype(work, copy=False)  # (..., d_ff)
    gate = u * (0.5 * (1.0 + np.tanh(0.5 * u)))  # SiLU; sigma(u) = (1 + tanh(u/2)) / 2
    y = (gate * (xw @ ws["W_3"].astype(work, copy=False))) @ ws["W_2"].astype(work, copy=False)
    return y.astype(out, copy=False)


def swiglu_hidden_size(d_model: int, multiple_of: int = 256) -> int:
    """LLaMA's hidden width: ``2/3 · 4 d_model``, rounded up to a multiple of ``multiple_of``.

    Parameters
    ----------
    d_model : int
        The model width.
    multiple_of : int, default 256
        LLaMA rounds the width up to a multiple of 256 (1 gives ``ceil(8 d_model / 3)``).

    Returns
    -------
    d_ff : int

    Examples
    --------
    >>> from helpers.transformer import swiglu_hidden_size
    >>> swiglu_hidden_size(4096)  # LLaMA-7B
    11008
    """
    d = as_integer(d_model, "d_model", minimum=1)
    m = as_integer(multiple_of, "multiple_of", minimum=1)
    return m * -(-(8 * d) // (3 * m))  # ceil(8 d / (3 m)) * m, in integers


def transformer_learning_rate(
    step: npt.ArrayLike, d_model: int, warmup_steps: int = 4000
) -> npt.NDArray[np.floating]:
    r"""The learning-rate schedule of the original Transformer: warm-up, then 1/sqrt(step).

    Parameters
    ----------
    step : array_like of int
        Training steps, counted from 1.
    d_model : int
        The model width (512 in the base model).
    warmup_steps : int, default 4000
        Length of the linear warm-up.

    Returns
    -------
    lr : ndarray of float, the shape of ``step``

    Raises
    ------
    TypeError
        If ``step`` is not integers.
    ValueError
        If a step is below 1 or ``d_model`` or ``warmup_steps`` is not a positive integer.

    Notes
    -----
    Vaswani et al. (2017), equation (3):

    .. math::

        \text{lrate} = d_\text{model}^{-0.5}\,
        \min\big(\text{step}^{-0.5},\ \text{step} \cdot \text{warmup}^{-1.5}\big),

    linear up to ``step = warmup``, where it peaks at
    :math:`(d_\text{model}\,\text{warmup})^{-1/2}`, then decreasing like
    :math:`1/\sqrt{\text{step}}`.

    Examples
    --------
    >>> from helpers.transformer import transformer_learning_rate
    >>> float(transformer_learning_rate(4000, 512)) == (512 * 4000) ** -0.5
    True
    """
    s = np.asarray(step)
    if s.dtype.kind not in "iu":
        raise TypeError(f"step must be integer steps, got dtype {s.dtype}")
    if s.size and s.min() < 1:
        raise ValueError(f"step must be >= 1 (steps count from 1), got {s.min()}")
    d = as_integer(d_model, "d_model", minimum=1)
    w = as_integer(warmup_steps, "warmup_steps", minimum=1)
    sf = s.astype(np.float64)
    return d**-0.5 * np.minimum(sf**-0.5, sf * w**-1.5)


def feed_forward_backward(
    grad_y: npt.ArrayLike,
    x: npt.ArrayLike,
    W_1: npt.ArrayLike,
    b_1: npt.ArrayLike,
    W_2: npt.ArrayLike,
    b_2: npt.ArrayLike,
    *,
    activation: str = "relu",
) -> tuple[npt.NDArray[np.floating], dict[str, npt.NDArray[np.floating]]]:
    r"""Gradients of a loss through :func:`feed_forward`.

    Parameters
    ----------
    grad_y : (..., d_model) array_like
        :math:`G = \partial L / \partial y`.
    x, W_1, b_1, W_2, b_2, activation
        As for :func:`feed_forward`.

    Returns
    -------
    grad_x : (..., d_model) ndarray
    grads : dict of str to ndarray
        ``"W_1"``, ``"b_1"``, ``"W_2"``, ``"b_2"``, each of its parameter's shape,
        summed over every token.

    Notes
    -----
    With :math:`z = x W_1 + b_1`, :math:`a = \phi(z)`: :math:`dW_2 = a^\top G`,
    :math:`db_2 = \sum G`, :math:`dz = (G W_2^\top) \odot \phi'(z)`,
    :math:`dW_1 = x^\top dz`, :math:`db_1 = \sum dz`, :math:`dx = dz\, W_1^\top`.
    ReLU's derivative is taken as 0 at 0, as PyTorch does.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import feed_forward_backward
    >>> rng = np.random.default_rng(0)
    >>> x, G = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    >>> W_1, W_2 = rng.normal(size=(4, 8)), rng.normal(size=(8, 4))
    >>> dx, grads = feed_forward_backward(G, x, W_1, np.zeros(8), W_2, np.zeros(4))
    >>> dx.shape, {k: v.shape for k, v in grads.items()}
    ((3, 4), {'W_1': (4, 8), 'b_1': (8,), 'W_2': (8, 4), 'b_2': (4,)})
    """
    act = _check_activation(activation)
    arr, w1, c1, w2, c2 = _ffn_arrays(x, W_1, b_1, W_2, b_2)
    G = _array(grad_y, "grad_y")
    if G.shape != arr.shape:
        raise ValueError(f"grad_y must have the shape of x, {arr.shape}, got {G.shape}")
    G = G.astype(arr.dtype, copy=False)
    _, z, a = _ffn_forward(arr, w1, c1, w2, c2, act)
    return _ffn_backward(G, arr, z, a, w1, w2, act)


# ---------------------------------------------------------------------------
# The block: parameters
# ---------------------------------------------------------------------------


def _param_shapes(d_model: int, d_ff: int) -> dict[str, tuple[tuple[int, ...], str]]:
    dd, d, f = (d_model, d_model), (d_model,), (d_ff,)
    shapes = {k: (dd, "(d_model, d_model)") for k in ("W_Q", "W_K", "W_V", "W_O")}
    shapes |= {k: (d, "(d_model,)") for k in ("b_Q", "b_K", "b_V", "b_O")}
    shapes |= {
        "W_1": ((d_model, d_ff), "(d_model, d_ff)"),
        "b_1": (f, "(d_ff,)"),
        "W_2": ((d_ff, d_model), "(d_ff, d_model)"),
        "b_2": (d, "(d_model,)"),
    }
    shapes |= {k: (d, "(d_model,)") for k in BLOCK_PARAM_NAMES[12:]}
    return shapes


def _check_params(params: object, d_model: int) -> dict[str, np.ndarray]:
    """The block's parameters as arrays of one float dtype; errors name key and shapes."""
    if not isinstance(params, Mapping):
        raise TypeError(
            f"params must be a dict with the keys of init_block_params, got {type(params).__name__}"
        )
    missing = [k for k in BLOCK_PARAM_NAMES if k not in params]
    if missing:
        raise ValueError(
            f"params is missing the key(s) {', '.join(repr(k) for k in missing)}; a block "
            f"needs exactly {', '.join(BLOCK_PARAM_NAMES)} (see init_block_params)"
        )
    unknown = [k for k in params if k not in BLOCK_PARAM_NAMES]
    if unknown:
        raise ValueError(
            f"params has unknown key(s) {', '.join(repr(k) for k in unknown)}; a block needs "
            f"exactly {', '.join(BLOCK_PARAM_NAMES)}"
        )
    arrays = {k: _array(params[k], f"params[{k!r}]") for k in BLOCK_PARAM_NAMES}
    w1 = arrays["W_1"]
    if w1.ndim != 2 or w1.shape[0] != d_model:
        raise ValueError(
            f"params['W_1'] must have shape (d_model, d_ff) with d_model = {d_model} (the "
            f"last axis of X), got {w1.shape}"
        )
    for name, (shape, meaning) in _param_shapes(d_model, w1.shape[1]).items():
        got = arrays[name].shape
        if got != shape:
            raise ValueError(f"params[{name!r}] must have shape {meaning} = {shape}, got {got}")
    dtype = np.result_type(*arrays.values())
    return {k: v.astype(dtype, copy=False) for k, v in arrays.items()}


def init_block_params(d_model: int, h: int, d_ff: int, *, rng: np.random.Generator) -> dict:
    r"""Random parameters of one encoder block, drawn as PyTorch draws them.

    Parameters
    ----------
    d_model : int
        Width of the tokens.
    h : int
        Number of attention heads; must divide ``d_model``.
    d_ff : int
        Width of the feed-forward network's hidden layer (usually ``4 d_model``).
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    params : dict of str to ndarray (float64)
        Exactly the keys of ``BLOCK_PARAM_NAMES``, row-vector convention (``x @ W``):
        ``W_Q, W_K, W_V, W_O`` ``(d_model, d_model)``; ``b_Q, b_K, b_V, b_O``
        ``(d_model,)``; ``W_1`` ``(d_model, d_ff)``, ``b_1`` ``(d_ff,)``; ``W_2``
        ``(d_ff, d_model)``, ``b_2`` ``(d_model,)``; ``ln1_gamma, ln1_beta,
        ln2_gamma, ln2_beta`` ``(d_model,)``. ``ln1`` is the norm around the
        attention sublayer and ``ln2`` the one around the feed-forward sublayer.

    Raises
    ------
    TypeError
        If ``rng`` is not a Generator or a size is not an integer.
    ValueError
        If a size is not positive or ``h`` does not divide ``d_model``.

    Notes
    -----
    The distributions of a new ``torch.nn.TransformerEncoderLayer``: the attention
    weights as :func:`helpers.multihead.init_mha_params` (Xavier-uniform over the
    packed ``W_Q, W_K, W_V``; ``W_O`` uniform on :math:`\pm 1/\sqrt{d_\text{model}}`;
    biases 0); ``W_1, b_1`` uniform on :math:`\pm 1/\sqrt{d_\text{model}}` and
    ``W_2, b_2`` on :math:`\pm 1/\sqrt{d_\text{ff}}` (``nn.Linear``'s default); every
    gain 1 and every shift 0.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import init_block_params
    >>> p = init_block_params(8, 2, 32, rng=np.random.default_rng(0))
    >>> {k: v.shape for k, v in p.items()}  # doctest: +NORMALIZE_WHITESPACE
    {'W_Q': (8, 8), 'W_K': (8, 8), 'W_V': (8, 8), 'W_O': (8, 8),
     'b_Q': (8,), 'b_K': (8,), 'b_V': (8,), 'b_O': (8,),
     'W_1': (8, 32), 'b_1': (32,), 'W_2': (32, 8), 'b_2': (8,),
     'ln1_gamma': (8,), 'ln1_beta': (8,), 'ln2_gamma': (8,), 'ln2_beta': (8,)}
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            "rng must be a numpy.random.Generator, e.g. np.random.default_rng(0), got "
            f"{type(rng).__name__}"
        )
    d = as_integer(d_model, "d_model", minimum=1)
    heads = as_integer(h, "h", minimum=1)
    f = as_integer(d_ff, "d_ff", minimum=1)
    _check_heads(d, heads)
    params = init_mha_params(d, rng=rng, num_heads=heads)
    a1, a2 = 1.0 / math.sqrt(d), 1.0 / math.sqrt(f)
    params["W_1"] = rng.uniform(-a1, a1, size=(d, f))
    params["b_1"] = rng.uniform(-a1, a1, size=f)
    params["W_2"] = rng.uniform(-a2, a2, size=(f, d))
    params["b_2"] = rng.uniform(-a2, a2, size=d)
    for name in ("ln1", "ln2"):
        params[f"{name}_gamma"] = np.ones(d)
        params[f"{name}_beta"] = np.zeros(d)
    return {k: np.ascontiguousarray(params[k], dtype=np.float64) for k in BLOCK_PARAM_NAMES}


def _check_heads(d_model: int, h: int) -> None:
    if d_model % h:
        raise ValueError(
            f"h = {h} heads do not divide d_model = {d_model}: every head gets d_k = "
            "d_model / h columns"
        )


def block_parameter_count(d_model: int, h: int, d_ff: int) -> int:
    r"""Number of trainable parameters of one encoder block.

    Parameters
    ----------
    d_model, h, d_ff : int
        As for :func:`init_block_params`; ``h`` must divide ``d_model`` (it does not
        change the count).

    Returns
    -------
    count : int
        :math:`4 d_\text{model}^2 + 4 d_\text{model}` (attention)
        :math:`+\, 2 d_\text{model} d_\text{ff} + d_\text{ff} + d_\text{model}`
        (feed-forward) :math:`+\, 4 d_\text{model}` (two layer norms).

    Examples
    --------
    >>> from helpers.transformer import block_parameter_count
    >>> block_parameter_count(512, 8, 2048)  # the base Transformer's encoder block
    3152384
    >>> block_parameter_count(768, 12, 3072)  # BERT-base
    7087872
    """
    d = as_integer(d_model, "d_model", minimum=1)
    heads = as_integer(h, "h", minimum=1)
    f = as_integer(d_ff, "d_ff", minimum=1)
    _check_heads(d, heads)
    return mha_parameter_count(d, heads) + 2 * d * f + f + d + 4 * d


# ---------------------------------------------------------------------------
# The block: forward and backward
# ---------------------------------------------------------------------------


def _attention(U: np.ndarray, p: Mapping[str, np.ndarray], h: int, mask) -> tuple:
    weights = {k: p[k] for k in ("W_Q", "W_K", "W_V", "W_O")}
    biases = {k: p[k] for k in ("b_Q", "b_K", "b_V", "b_O")}
    return multi_head_attention(U, U, num_heads=h, mask=mask, **weights, **biases)


#: The four places of dropout in a block, in the order masks are drawn.
DROPOUT_SITES = ("attention", "attention_output", "ffn_hidden", "ffn_output")


def _dropout_masks(
    masks: Mapping[str, npt.ArrayLike] | None,
    rate: object,
    rng: object,
    shapes: Mapping[str, tuple[int, ...]],
    dtype: np.dtype,
) -> dict[str, np.ndarray] | None:
    """The scaled masks (0 or 1/(1 - p)) of the four sites, given or drawn; None if off."""
    if isinstance(rate, (bool, np.bool_)) or not isinstance(rate, numbers.Real):
        raise TypeError(f"dropout must be a number in [0, 1), got {rate!r}")
    if not 0 <= rate < 1:
        raise ValueError(f"dropout must be in [0, 1), got {rate!r}")
    if masks is None:
        if rate == 0:
            return None
        if not isinstance(rng, np.random.Generator):
            raise TypeError(
                "dropout > 0 needs rng=np.random.default_rng(...) to draw its masks, got "
                f"{type(rng).__name__}"
            )
        keep = 1.0 - float(rate)
        return {
            k: (rng.random(shapes[k]) < keep).astype(dtype) / dtype.type(keep)
            for k in DROPOUT_SITES
        }
    if not isinstance(masks, Mapping) or set(masks) != set(DROPOUT_SITES):
        raise ValueError(
            f"dropout_masks must be a dict with exactly the keys {DROPOUT_SITES}, got "
            f"{sorted(masks) if isinstance(masks, Mapping) else type(masks).__name__}"
        )
    out = {}
    for k in DROPOUT_SITES:
        m = _array(masks[k], f"dropout_masks[{k!r}]")
        if m.shape != shapes[k]:
            raise ValueError(f"dropout_masks[{k!r}] must have shape {shapes[k]}, got {m.shape}")
        out[k] = m.astype(dtype, copy=False)
    return out


def _attention_dropped(U: np.ndarray, p: Mapping[str, np.ndarray], h: int, mask, M: np.ndarray):
    """Self-attention with dropout ``M`` on its weights: (output, weights, what backward needs)."""
    Q, K, V = (split_heads(U @ p["W_" + c] + p["b_" + c], h) for c in "QKV")  # (..., h, n, d_k)
    S = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])  # (..., h, n, n)
    if mask is not None:
        S = np.where(np.asarray(mask, dtype=bool), S, -np.inf)
    A = softmax(S, axis=-1)
    H = merge_heads((A * M) @ V)  # (..., n, d_model): the heads side by side
    return H @ p["W_O"] + p["b_O"], A, (Q, K, V, H)


def _attention_dropped_backward(dO, U, p, A, M, saved) -> tuple[np.ndarray, dict]:
    Q, K, V, H = saved
    h = Q.shape[-3]
    g = {"W_O": _weight_grad(H, dO), "b_O": _sum_rows(dO)}
    dHh = split_heads(dO @ p["W_O"].T, h)  # (..., h, n, d_k)
    dV = np.swapaxes(A * M, -1, -2) @ dHh
    dA = (dHh @ np.swapaxes(V, -1, -2)) * M  # through the dropout of the weights
    dS = A * (dA - (dA * A).sum(axis=-1, keepdims=True)) / math.sqrt(Q.shape[-1])
    dU = np.zeros_like(U)
    for c, d in (("Q", dS @ K), ("K", np.swapaxes(dS, -1, -2) @ Q), ("V", dV)):
        d = merge_heads(d)  # (..., n, d_model)
        g["W_" + c], g["b_" + c] = _weight_grad(U, d), _sum_rows(d)
        dU += d @ p["W_" + c].T
    return dU, g


def encoder_block(
    X: npt.ArrayLike,
    params: Mapping[str, npt.ArrayLike],
    h: int,
    *,
    mask: npt.ArrayLike | None = None,
    norm_first: bool = False,
    activation: str = "relu",
    eps: float = 1e-5,
    dropout: float = 0.0,
    rng: np.random.Generator | None = None,
    dropout_masks: Mapping[str, npt.ArrayLike] | None = None,
) -> tuple[npt.NDArray[np.floating], dict]:
    r"""One Transformer encoder block: self-attention and a feed-forward network.

    Parameters
    ----------
    X : (..., n, d_model) array_like
        The tokens of one sequence, or a batch of sequences.
    params : dict of str to array_like
        Exactly the keys of :func:`init_block_params`, with those shapes (``d_ff``
        is read from ``W_1``).
    h : int
        Number of attention heads; must divide ``d_model``.
    mask : (n, n) or (*batch, h, n, n) array_like of bool, optional
        True where query ``i`` may attend to key ``j`` (chapter 3's convention).
    norm_first : bool, default False
        False: post-LN, ``LN(x + Sublayer(x))``, the original Transformer and BERT.
        True: pre-LN, ``x + Sublayer(LN(x))``, GPT-2 and most later models (a stack
        of pre-LN blocks is usually followed by one more layer norm).
    activation : {"relu", "gelu", "gelu_tanh"}, default "relu"
        The feed-forward network's activation.
    eps : float, default 1e-5
        Both layer norms' ``eps``.
    dropout : float in [0, 1), default 0
        Training-time dropout rate (0.1 in the original Transformer), applied, as in
        ``torch.nn.TransformerEncoderLayer``, to the attention weights, the attention
        output and the feed-forward output (each before its residual sum) and the
        feed-forward hidden layer. Inverted dropout: each entry is multiplied by 0 with
        probability ``dropout`` and by ``1 / (1 - dropout)`` otherwise.
    rng : numpy.random.Generator, optional
        Draws the masks; needed when ``dropout > 0`` and ``dropout_masks`` is None. The
        masks are drawn in the order of ``DROPOUT_SITES``.
    dropout_masks : dict, optional
        The scaled masks themselves (entries 0 or ``1 / (1 - p)``), keyed by
        ``DROPOUT_SITES``: ``"attention"`` ``(..., h, n, n)``, ``"attention_output"``
        ``(..., n, d_model)``, ``"ffn_hidden"`` ``(..., n, d_ff)``, ``"ffn_output"``
        ``(..., n, d_model)``. When given, ``dropout`` and ``rng`` are not used.

    Returns
    -------
    Y : (..., n, d_model) ndarray
        The block's output, the shape of ``X``.
    cache : dict
        What :func:`encoder_block_backward` needs, plus ``cache["weights"]``, the
        attention weights ``(..., h, n, n)`` (before dropout) and
        ``cache["dropout_masks"]`` (None without dropout). Treat it as read-only.

    Raises
    ------
    TypeError
        If an input is not real-valued or ``params`` is not a dict.
    ValueError
        If ``params`` misses a key, has an unknown key or an array of the wrong shape
        (the message names the key, the shape expected and the shape given), ``h``
        does not divide ``d_model``, ``eps`` is not positive, ``activation`` is
        unknown, ``dropout`` is outside [0, 1), a dropout mask has the wrong shape, or
        ``X`` or ``mask`` has the wrong shape. A TypeError if ``dropout > 0`` without
        ``rng``.

    See Also
    --------
    encoder_block_backward, init_block_params, helpers.multihead.multi_head_attention

    Notes
    -----
    With :math:`\operatorname{MHA}` the multi-head self-attention of chapter 3
    (with biases) and :math:`\operatorname{FFN}` :func:`feed_forward`:

    .. math::

        \text{post-LN:}\quad Z = \operatorname{LN}_1(X + \operatorname{MHA}(X)),
        \qquad Y = \operatorname{LN}_2(Z + \operatorname{FFN}(Z));

    .. math::

        \text{pre-LN:}\quad Z = X + \operatorname{MHA}(\operatorname{LN}_1(X)),
        \qquad Y = Z + \operatorname{FFN}(\operatorname{LN}_2(Z)).

    This is ``torch.nn.TransformerEncoderLayer`` with dropout 0 and
    ``batch_first=True`` (the tests compare the two in float64 to 1e-10).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import encoder_block, init_block_params
    >>> rng = np.random.default_rng(0)
    >>> params = init_block_params(8, 2, 32, rng=rng)
    >>> X = rng.normal(size=(3, 5, 8))  # 3 sequences of 5 tokens, d_model = 8
    >>> Y, cache = encoder_block(X, params, 2)
    >>> Y.shape, cache["weights"].shape
    ((3, 5, 8), (3, 2, 5, 5))
    >>> np.allclose(Y.mean(axis=-1), 0)  # post-LN: every output token is normalised
    True
    """
    Xa = _array(X, "X")
    if Xa.ndim < 2 or Xa.shape[-1] == 0:
        raise ValueError(
            f"X must have shape (..., n, d_model), at least 2 axes and d_model >= 1, got "
            f"{Xa.shape}; a single token is a (1, d_model) array"
        )
    d_model = Xa.shape[-1]
    heads = as_integer(h, "h", minimum=1)
    _check_heads(d_model, heads)
    eps = _check_eps(eps)
    act = _check_activation(activation)
    p = _check_params(params, d_model)
    dtype = np.result_type(Xa, *p.values())
    Xa = Xa.astype(dtype, copy=False)
    p = {k: v.astype(dtype, copy=False) for k, v in p.items()}
    g1, b1, g2, b2 = p["ln1_gamma"], p["ln1_beta"], p["ln2_gamma"], p["ln2_beta"]
    ffn = (p["W_1"], p["b_1"], p["W_2"], p["b_2"])

    lead, n = Xa.shape[:-2], Xa.shape[-2]
    shapes = {
        "attention": (*lead, heads, n, n),
        "attention_output": Xa.shape,
        "ffn_hidden": (*lead, n, p["W_1"].shape[1]),
        "ffn_output": Xa.shape,
    }
    drop = _dropout_masks(dropout_masks, dropout, rng, shapes, np.dtype(dtype))
    cache: dict = {
        "X": Xa,
        "params": p,
        "h": heads,
        "mask": mask,
        "norm_first": bool(norm_first),
        "activation": act,
        "eps": eps,
        "dropout_masks": drop,
    }
    if drop is not None:
        return _encoder_block_dropped(Xa, p, heads, mask, bool(norm_first), act, eps, drop, cache)
    if norm_first:
        U, xh1, r1 = _ln_forward(Xa, g1, b1, eps)  # (..., n, d): the attention's input
        attn, A = _attention(U, p, heads, mask)
        Z = Xa + attn  # (..., n, d)
        V, xh2, r2 = _ln_forward(Z, g2, b2, eps)  # the FFN's input
        F, hz, ha = _ffn_forward(V, *ffn, act)
        Y = Z + F
    else:
        U = Xa
        attn, A = _attention(U, p, heads, mask)
        Z, xh1, r1 = _ln_forward(Xa + attn, g1, b1, eps)
        V = Z
        F, hz, ha = _ffn_forward(V, *ffn, act)
        Y, xh2, r2 = _ln_forward(Z + F, g2, b2, eps)
    cache.update(
        attention_input=U,
        weights=A,
        ffn_input=V,
        ffn_hidden=(hz, ha),
        ln1=(xh1, r1),
        ln2=(xh2, r2),
    )
    return Y, cache


def _encoder_block_dropped(X, p, heads, mask, norm_first, act, eps, drop, cache):
    """:func:`encoder_block` with dropout masks at the four sites of ``DROPOUT_SITES``."""
    g1, b1, g2, b2 = p["ln1_gamma"], p["ln1_beta"], p["ln2_gamma"], p["ln2_beta"]

    def ffn(V):
        hz = V @ p["W_1"] + p["b_1"]  # (..., n, d_ff)
        ha = _activate(hz, act) * drop["ffn_hidden"]
        return (ha @ p["W_2"] + p["b_2"]) * drop["ffn_output"], hz, ha

    if norm_first:
        U, xh1, r1 = _ln_forward(X, g1, b1, eps)
        attn, A, saved = _attention_dropped(U, p, heads, mask, drop["attention"])
        Z = X + attn * drop["attention_output"]
        V, xh2, r2 = _ln_forward(Z, g2, b2, eps)
        F, hz, ha = ffn(V)
        Y = Z + F
    else:
        U = X
        attn, A, saved = _attention_dropped(U, p, heads, mask, drop["attention"])
        Z, xh1, r1 = _ln_forward(X + attn * drop["attention_output"], g1, b1, eps)
        V = Z
        F, hz, ha = ffn(V)
        Y, xh2, r2 = _ln_forward(Z + F, g2, b2, eps)
    cache.update(
        attention_input=U,
        weights=A,
        attention_saved=saved,
        ffn_input=V,
        ffn_hidden=(hz, ha),
        ln1=(xh1, r1),
        ln2=(xh2, r2),
    )
    return Y, cache


def _encoder_block_dropped_backward(G: np.ndarray, cache: Mapping):
    p, act, drop = cache["params"], cache["activation"], cache["dropout_masks"]
    hz, ha = cache["ffn_hidden"]
    xh1, r1 = cache["ln1"]
    xh2, r2 = cache["ln2"]
    U, V = cache["attention_input"], cache["ffn_input"]
    grads: dict[str, np.ndarray] = {}

    def ffn_back(dY: np.ndarray) -> np.ndarray:  # dY at the sublayer's output
        dF = dY * drop["ffn_output"]
        grads["W_2"], grads["b_2"] = _weight_grad(ha, dF), _sum_rows(dF)
        dz = (dF @ p["W_2"].T) * drop["ffn_hidden"] * _activation_grad(hz, act)
        grads["W_1"], grads["b_1"] = _weight_grad(V, dz), _sum_rows(dz)
        return dz @ p["W_1"].T

    def attention_back(dY: np.ndarray) -> np.ndarray:
        dU, g = _attention_dropped_backward(
            dY * drop["attention_output"], U, p, cache["weights"], drop["attention"],
            cache["attention_saved"],
        )  # fmt: skip
        grads.update(g)
        return dU

    def ln_back(d_out: np.ndarray, x_hat, rstd, name: str) -> np.ndarray:
        d_in, grads[f"{name}_gamma"], grads[f"{name}_beta"] = _ln_backward(
            d_out, x_hat, rstd, p[f"{name}_gamma"]
        )
        return d_in

    if cache["norm_first"]:
        dZ = G + ln_back(ffn_back(G), xh2, r2, "ln2")
        dX = dZ + ln_back(attention_back(dZ), xh1, r1, "ln1")
    else:
        dR2 = ln_back(G, xh2, r2, "ln2")
        dZ = dR2 + ffn_back(dR2)
        dR1 = ln_back(dZ, xh1, r1, "ln1")
        dX = dR1 + attention_back(dR1)
    return dX, {k: grads[k] for k in BLOCK_PARAM_NAMES}


def encoder_block_backward(
    grad_Y: npt.ArrayLike, cache: Mapping
) -> tuple[npt.NDArray[np.floating], dict[str, npt.NDArray[np.floating]]]:
    r"""Gradients of a loss through :func:`encoder_block`, by hand.

    Parameters
    ----------
    grad_Y : (..., n, d_model) array_like
        :math:`\partial L / \partial Y` for a scalar loss :math:`L`.
    cache : dict
        The second value returned by :func:`encoder_block`.

    Returns
    -------
    grad_X : (..., n, d_model) ndarray
        :math:`\partial L / \partial X`.
    grads : dict of str to ndarray
        Keyed like ``params`` (``grads["W_Q"]`` is :math:`\partial L / \partial W_Q`),
        each of its parameter's shape, summed over the batch and the tokens.

    Raises
    ------
    ValueError
        If ``grad_Y`` does not have the output's shape or ``cache`` is not a cache of
        :func:`encoder_block`.

    Notes
    -----
    Backwards through the forward pass, one piece at a time: layer norm
    (:func:`layer_norm_backward`), the feed-forward network
    (:func:`feed_forward_backward`), attention
    (:func:`helpers.multihead.multi_head_attention_backward`, which recomputes the
    attention weights), and a residual connection :math:`R = S + F(S)`, whose
    gradient is :math:`dS = dR + (\text{what flows back through } F)`: the
    gradient reaching a residual stream passes on unchanged along the identity path.
    Post-LN:

    .. math::

        dR_2 = \operatorname{LN}_2^\top(dY), \quad dZ = dR_2 +
        \operatorname{FFN}^\top(dR_2), \quad dR_1 = \operatorname{LN}_1^\top(dZ), \quad
        dX = dR_1 + \operatorname{MHA}^\top(dR_1);

    pre-LN:

    .. math::

        dZ = dY + \operatorname{LN}_2^\top(\operatorname{FFN}^\top(dY)), \qquad
        dX = dZ + \operatorname{LN}_1^\top(\operatorname{MHA}^\top(dZ)),

    where :math:`F^\top(G)` is the gradient with respect to the input of ``F`` for
    output gradient :math:`G`.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import encoder_block, encoder_block_backward, init_block_params
    >>> rng = np.random.default_rng(0)
    >>> params = init_block_params(8, 2, 16, rng=rng)
    >>> X, G = rng.normal(size=(4, 8)), rng.normal(size=(4, 8))
    >>> Y, cache = encoder_block(X, params, 2, norm_first=True)
    >>> dX, grads = encoder_block_backward(G, cache)
    >>> sorted(grads) == sorted(params)
    True
    >>> def loss(W_1):
    ...     return np.sum(G * encoder_block(X, {**params, "W_1": W_1}, 2, norm_first=True)[0])
    >>> E = np.zeros((8, 16))
    >>> E[3, 5] = 1e-6
    >>> fd = (loss(params["W_1"] + E) - loss(params["W_1"] - E)) / 2e-6
    >>> bool(np.isclose(fd, grads["W_1"][3, 5], atol=1e-8))
    True
    """
    if not isinstance(cache, Mapping) or "ffn_hidden" not in cache:
        raise ValueError("cache must be the second value returned by encoder_block")
    X, p, heads = cache["X"], cache["params"], cache["h"]
    G = _array(grad_Y, "grad_Y")
    if G.shape != X.shape:
        raise ValueError(
            f"grad_Y must have the shape of the block's output (..., n, d_model) = "
            f"{X.shape}, got {G.shape}"
        )
    G = G.astype(X.dtype, copy=False)
    if cache.get("dropout_masks") is not None:
        return _encoder_block_dropped_backward(G, cache)
    act, mask = cache["activation"], cache["mask"]
    hz, ha = cache["ffn_hidden"]
    xh1, r1 = cache["ln1"]
    xh2, r2 = cache["ln2"]
    U, V = cache["attention_input"], cache["ffn_input"]
    grads: dict[str, np.ndarray] = {}

    def ffn_back(dF: np.ndarray) -> np.ndarray:
        dV, g = _ffn_backward(dF, V, hz, ha, p["W_1"], p["W_2"], act)
        grads.update(g)
        return dV

    def attention_back(dA: np.ndarray) -> np.ndarray:
        g = multi_head_attention_backward(
            U,
            U,
            p["W_Q"],
            p["W_K"],
            p["W_V"],
            p["W_O"],
            heads,
            dA,
            mask,
            b_Q=p["b_Q"],
            b_K=p["b_K"],
            b_V=p["b_V"],
            b_O=p["b_O"],
        )
        grads.update({k: g["d" + k] for k in _ATTENTION_NAMES})
        return g["dX_q"] + g["dX_kv"]  # U is both the queries' and the keys' input

    def ln_back(d_out: np.ndarray, x_hat, rstd, name: str) -> np.ndarray:
        d_in, grads[f"{name}_gamma"], grads[f"{name}_beta"] = _ln_backward(
            d_out, x_hat, rstd, p[f"{name}_gamma"]
        )
        return d_in

    if cache["norm_first"]:
        dZ = G + ln_back(ffn_back(G), xh2, r2, "ln2")  # Y = Z + FFN(LN2(Z))
        dX = dZ + ln_back(attention_back(dZ), xh1, r1, "ln1")  # Z = X + MHA(LN1(X))
    else:
        dR2 = ln_back(G, xh2, r2, "ln2")  # Y = LN2(R2), R2 = Z + FFN(Z)
        dZ = dR2 + ffn_back(dR2)
        dR1 = ln_back(dZ, xh1, r1, "ln1")  # Z = LN1(R1), R1 = X + MHA(X)
        dX = dR1 + attention_back(dR1)
    return dX, {k: grads[k] for k in BLOCK_PARAM_NAMES}


# ---------------------------------------------------------------------------
# Training: the loss and the optimiser
# ---------------------------------------------------------------------------


def cross_entropy(
    logits: npt.ArrayLike, labels: npt.ArrayLike
) -> tuple[float, npt.NDArray[np.floating]]:
    r"""Mean cross-entropy of a softmax classifier, and its gradient.

    Parameters
    ----------
    logits : (b, c) array_like
        One row of ``c`` class scores per example.
    labels : (b,) array_like of int
        The correct class of each example, in ``0, ..., c - 1``.

    Returns
    -------
    loss : float
        :math:`-\frac1b \sum_i \log \operatorname{softmax}(z_i)_{y_i}`, as
        ``torch.nn.functional.cross_entropy``.
    grad_logits : (b, c) ndarray
        :math:`(\operatorname{softmax}(z_i) - e_{y_i}) / b`.

    Raises
    ------
    TypeError, ValueError
        If ``logits`` is not a real ``(b, c)`` array or ``labels`` not ``b`` integers
        in range.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import cross_entropy
    >>> loss, grad = cross_entropy(np.zeros((4, 2)), np.array([0, 1, 1, 0]))
    >>> round(loss, 6), np.log(2).round(6)  # uniform predictions cost log 2 per example
    (0.693147, np.float64(0.693147))
    >>> grad.sum(axis=1)  # each row of the gradient sums to 0
    array([0., 0., 0., 0.])
    """
    z = _array(logits, "logits")
    if z.ndim != 2 or z.shape[0] == 0 or z.shape[1] == 0:
        raise ValueError(f"logits must have shape (b, c) with b, c >= 1, got {z.shape}")
    y = np.asarray(labels)
    if y.dtype.kind not in "iu":
        raise TypeError(f"labels must be integers (class indices), got dtype {y.dtype}")
    b, c = z.shape
    if y.shape != (b,):
        raise ValueError(
            f"labels must have shape (b,) = ({b},), one per row of logits, got {y.shape}"
        )
    if y.size and (y.min() < 0 or y.max() >= c):
        raise ValueError(
            f"labels must lie in 0, ..., {c - 1} (c = {c} classes), got {y.min()}..{y.max()}"
        )
    logp = log_softmax(z, axis=-1)  # (b, c)
    rows = np.arange(b)
    loss = -float(logp[rows, y].mean())
    grad = np.exp(logp)
    grad[rows, y] -= 1.0
    return loss, grad / b


class Adam:
    r"""The Adam optimiser (Kingma and Ba), updating a dict of arrays in place.

    Parameters
    ----------
    params : dict of str to ndarray
        The parameters to train (float arrays). They are updated in place, so other
        references to the same arrays see every step.
    lr : float, default 1e-3
        Learning rate :math:`\alpha`.
    betas : (float, float), default (0.9, 0.999)
        Decay rates :math:`\beta_1, \beta_2` of the moment estimates.
    eps : float, default 1e-8
        Added to the root of the second moment.
    weight_decay : float, default 0
        L2 penalty added to the gradient (``torch.optim.Adam``'s ``weight_decay``,
        not AdamW's decoupled decay).

    Attributes
    ----------
    t : int
        Number of steps taken.
    m, v : dict of str to ndarray
        First and second moment estimates.

    Notes
    -----
    Step :math:`t` for each parameter :math:`\theta` with gradient :math:`g`:

    .. math::

        m \leftarrow \beta_1 m + (1 - \beta_1) g, \quad
        v \leftarrow \beta_2 v + (1 - \beta_2) g^2, \quad
        \theta \leftarrow \theta - \frac{\alpha}{1 - \beta_1^t}
        \frac{m}{\sqrt{v} / \sqrt{1 - \beta_2^t} + \epsilon},

    in the order of operations of ``torch.optim.Adam`` (the tests compare the two
    step by step).

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.transformer import Adam
    >>> params = {"w": np.array([1.0, -2.0])}
    >>> opt = Adam(params, lr=0.1)
    >>> opt.step({"w": np.array([0.5, -3.0])})
    >>> params["w"]  # the first step moves every entry by about lr, against its gradient
    array([ 0.9, -1.9])
    """

    def __init__(
        self,
        params: Mapping[str, np.ndarray],
        *,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        if not isinstance(params, Mapping) or not params:
            raise TypeError("params must be a non-empty dict of name -> ndarray")
        for k, v in params.items():
            if not isinstance(v, np.ndarray) or v.dtype.kind != "f":
                raise TypeError(
                    f"params[{k!r}] must be a float ndarray (it is updated in place), got "
                    f"{type(v).__name__}"
                    + (f" of dtype {v.dtype}" if isinstance(v, np.ndarray) else "")
                )
        for name, value in (("lr", lr), ("eps", eps)):
            if not (isinstance(value, numbers.Real) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be positive and finite, got {value!r}")
        if len(betas) != 2 or not all(isinstance(b, numbers.Real) and 0 <= b < 1 for b in betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {betas!r}")
        if not (isinstance(weight_decay, numbers.Real) and weight_decay >= 0):
            raise ValueError(f"weight_decay must be >= 0, got {weight_decay!r}")
        self.params = params
        self.lr, self.betas, self.eps = float(lr), (float(betas[0]), float(betas[1])), float(eps)
        self.weight_decay = float(weight_decay)
        self.t = 0
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}

    def step(self, grads: Mapping[str, npt.ArrayLike]) -> None:
        """Apply one update with ``grads``, a dict with the keys and shapes of ``params``."""
        if not isinstance(grads, Mapping) or set(grads) != set(self.params):
            got = sorted(grads) if isinstance(grads, Mapping) else type(grads).__name__
            raise ValueError(
                f"grads must have exactly the keys of params, {sorted(self.params)}; got {got}"
            )
        checked = {}
        for k, p in self.params.items():
            g = np.asarray(grads[k])
            if g.shape != p.shape:
                raise ValueError(
                    f"grads[{k!r}] must have the shape of params[{k!r}], {p.shape}, got {g.shape}"
                )
            checked[k] = g
        self.t += 1
        b1, b2 = self.betas
        bias1 = 1.0 - b1**self.t
        bias2 = 1.0 - b2**self.t
        step_size = self.lr / bias1
        root_bias2 = math.sqrt(bias2)
        for k, p in self.params.items():
            g = checked[k]
            if self.weight_decay:
                g = g + self.weight_decay * p
            m, v = self.m[k], self.v[k]
            m *= b1
            m += (1.0 - b1) * g
            v *= b2
            v += (1.0 - b2) * (g * g)
            denom = np.sqrt(v) / root_bias2 + self.eps
            p -= step_size * (m / denom)

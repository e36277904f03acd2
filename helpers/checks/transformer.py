"""Self-checks of chapter 6 (the Transformer block), built on :mod:`helpers.checks.core`.

``check_layer_norm`` and ``check_layer_norm_backward`` take the reader's layer norm and
its gradients, ``check_rms_norm_backward`` the gradients of RMSNorm,
``check_block_parameter_count`` and ``check_llama_block_parameter_count`` counts of
parameters, and ``check_encoder_block`` a whole block in either order. When an answer is
wrong, the diagnosis recomputes the answer with each usual slip and names the one that
reproduces the reader's numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt

from helpers.checks.core import Case, CheckReport, Diagnose, Finding, run_checks, section
from helpers.checks.multihead import _append, _pick, _run, _Spec, _Unusable
from helpers.i18n import msg
from helpers.multihead import multi_head_attention
from helpers.transformer import (
    BLOCK_PARAM_NAMES,
    block_parameter_count,
    encoder_block,
    feed_forward,
    init_block_params,
    layer_norm,
    layer_norm_backward,
)

__all__ = [
    "check_block_parameter_count",
    "check_encoder_block",
    "check_fold_layer_norm",
    "check_layer_norm",
    "check_layer_norm_backward",
    "check_llama_block_parameter_count",
    "check_rms_norm_backward",
]

_LN_FORMULA = (
    "y = gamma * (x - mean) / sqrt(var + eps) + beta, with the mean and the (biased, "
    "divide by d) variance of each row taken over its last axis"
)


def _ln_variant(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float, slip: str):
    """Layer norm as written with one usual slip."""
    axis = 0 if slip == "axis 0" else -1
    mu = x.mean(axis=axis, keepdims=True)
    if slip == "one pass":
        var = np.mean(x * x, axis=-1, keepdims=True) - mu * mu
    else:
        var = x.var(axis=axis, keepdims=True, ddof=1 if slip in ("ddof=1", "std + eps") else 0)
    if slip in ("std + eps", "biased std + eps"):
        x_hat = (x - mu) / (np.sqrt(var) + eps)
    elif slip == "no eps":
        x_hat = (x - mu) / np.sqrt(var)
    else:
        x_hat = (x - mu) / np.sqrt(var + eps)
    g, b = {"no gamma": (1.0, beta), "no beta": (gamma, 0.0), "swapped": (beta, gamma)}.get(
        slip, (gamma, beta)
    )
    return g * x_hat + b


_LN_SLIPS = {
    "ddof=1": (
        "the variance is divided by d - 1 (np.var(..., ddof=1), or torch's x.std()) instead of d",
        "layer norm uses the biased variance: np.var(x, axis=-1, keepdims=True), ddof=0",
    ),
    "std + eps": (
        "eps is added to the (unbiased) standard deviation, (x - mean) / (x.std(ddof=1) + "
        "eps): a version that circulates",
        "divide by sqrt(var + eps), with the biased variance",
    ),
    "biased std + eps": (
        "eps is added to the standard deviation, (x - mean) / (std + eps), instead of to "
        "the variance",
        "divide by np.sqrt(var + eps)",
    ),
    "axis 0": (
        "each feature is normalised over the rows (axis 0, as batch normalisation does) "
        "instead of each row over its features",
        "take the mean and variance over the last axis, axis=-1, keepdims=True",
    ),
    "one pass": (
        "the variance is computed as mean(x**2) - mean(x)**2, which cancels catastrophically "
        "when the row has a large common offset",
        "compute the mean first, then the mean of (x - mean)**2",
    ),
    "no eps": (
        "eps is missing: the rows are divided by sqrt(var) instead of sqrt(var + eps)",
        "divide by np.sqrt(var + eps); eps keeps a constant row finite",
    ),
    "no gamma": ("gamma is not applied", "multiply the normalised row by gamma"),
    "no beta": ("beta is not added", "add beta after multiplying by gamma"),
    "swapped": ("gamma and beta are swapped", "y = gamma * x_hat + beta"),
}


def _ln_diagnose(case: Case, got: np.ndarray) -> list[Finding]:
    x, gamma, beta = case.inputs["x"], case.inputs["gamma"], case.inputs["beta"]
    eps = float(case.inputs["eps"])
    rtol, atol = case.tolerances()
    with np.errstate(all="ignore"):
        if not np.isfinite(got).all():
            return [
                Finding(
                    "the output is not finite: a row whose entries are all equal has variance "
                    "0, and without eps that is 0/0",
                    "divide by np.sqrt(var + eps)",
                )
            ]
        for slip, (problem, hint) in _LN_SLIPS.items():
            candidate = _ln_variant(x, gamma, beta, eps, slip)
            if candidate.shape == got.shape and np.allclose(got, candidate, rtol=rtol, atol=atol):
                return [Finding(problem, hint)]
    return []


def check_layer_norm(fn: Callable[..., npt.ArrayLike]) -> CheckReport:
    """Check the reader's layer normalisation.

    Parameters
    ----------
    fn : callable
        ``fn(x, gamma, beta, eps) -> y``: ``x`` of shape ``(..., d)``, ``gamma`` and
        ``beta`` of shape ``(d,)``, ``eps`` a positive float (passed as a 0-d array);
        returns ``gamma * (x - mean) / sqrt(var + eps) + beta`` row by row.

    Returns
    -------
    CheckReport
        Truthy iff every case passed. The report recognises the unbiased variance
        (``ddof=1``), ``eps`` added to the standard deviation, normalising over the wrong
        axis, the one-pass variance ``E[x²] - E[x]²`` (it fails on a large offset), a
        missing ``eps`` (``nan`` for a constant row), and a missing or swapped ``gamma``
        and ``beta``.

    Notes
    -----
    Cases: random rows with random ``gamma`` and ``beta``; a batch of sequences
    ``(2, 3, 5)``; rows with a common offset of ``1e6``; a constant row; ``d = 2``.
    The expected outputs come from :func:`helpers.transformer.layer_norm` (checked there
    against ``torch.nn.LayerNorm``).

    Examples
    --------
    A wrong answer and its diagnosis:

    >>> import numpy as np
    >>> from helpers.checks import check_layer_norm
    >>> def ln_unbiased(x, gamma, beta, eps):
    ...     mu = x.mean(axis=-1, keepdims=True)
    ...     return gamma * (x - mu) / np.sqrt(x.var(axis=-1, keepdims=True, ddof=1) + eps) + beta
    >>> print(check_layer_norm(ln_unbiased).failures[0].problem)
    the variance is divided by d - 1 (np.var(..., ddof=1), or torch's x.std()) instead of d
    """
    rng = np.random.default_rng(60)
    constant_hint = (
        "a row whose entries are all equal has variance 0; eps keeps sqrt(var + eps) "
        "positive, and the normalised row is 0, so y = beta"
    )
    offset_hint = (
        "subtract the mean before squaring: var = mean((x - mean)**2); mean(x**2) - "
        "mean(x)**2 loses every digit when the entries share a large offset"
    )
    layouts = [
        ("random rows", rng.normal(size=(4, 6)) * 2 + 1, 1e-5, _LN_FORMULA),
        ("a batch of sequences", rng.normal(size=(2, 3, 5)), 1e-5, _LN_FORMULA),
        ("a large common offset", rng.normal(size=(3, 8)) + 1e6, 1e-5, offset_hint),
        ("a constant row", np.vstack([np.full(4, 2.5), rng.normal(size=4)]), 1e-5, constant_hint),
        ("d = 2", rng.normal(size=(3, 2)), 0.1, _LN_FORMULA),
    ]
    cases = []
    for name, x, eps, hint in layouts:
        d = x.shape[-1]
        gamma, beta = 1 + rng.normal(scale=0.5, size=d), rng.normal(size=d)
        expected = layer_norm(x, gamma, beta, eps=eps)
        inputs = {"x": x, "gamma": gamma, "beta": beta, "eps": np.array(eps)}
        cases.append(Case(name, inputs, expected, hint))
    return run_checks(fn, cases, check_name="check_layer_norm", diagnose=_ln_diagnose)


# ---------------------------------------------------------------------------
# check_layer_norm_backward
# ---------------------------------------------------------------------------

_LN_GRADS = ("dx", "dgamma", "dbeta")


def _ln_grads(G: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float, slip: str = "right"):
    """The three gradients of ``sum(G * layer_norm(x))``, or with one slip."""
    d = x.shape[-1]
    mu = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True, ddof=1 if slip == "ddof=1" else 0)
    rstd = 1 / np.sqrt(var + eps)
    x_hat = (x - mu) * rstd
    g = G if slip == "no gamma" else G * gamma
    mean_g = g.mean(axis=-1, keepdims=True)
    mean_gx = (g * x_hat).mean(axis=-1, keepdims=True)
    dx = {
        "no mean term": (g - x_hat * mean_gx) * rstd,
        "no x_hat term": (g - mean_g) * rstd,
        "only the diagonal": g * rstd,
    }.get(slip, (g - mean_g - x_hat * mean_gx) * rstd)
    scaled = x - mu if slip == "x instead of x_hat" else x_hat
    reduce = np.mean if slip == "mean over the rows" else np.sum
    dgamma = reduce((G * scaled).reshape(-1, d), axis=0)
    return {"dx": dx, "dgamma": dgamma, "dbeta": reduce(G.reshape(-1, d), axis=0)}


_LN_JACOBIAN = section(6, "Its Jacobian and backward pass")
_EVERY_TOKEN = (
    "gamma and beta are shared by every token, and each token adds its own contribution to the loss"
)

_BACKWARD_SLIPS = {
    "no mean term": (
        "the term - mean(g) is missing (g = gamma * grad_y): the gradient through the mean",
        "x_hat depends on x through the row's mean as well",
    ),
    "no x_hat term": (
        "the term - x_hat * mean(g * x_hat) is missing: the gradient through the variance",
        "x_hat depends on x through the row's variance as well",
    ),
    "only the diagonal": (
        "only the diagonal of the Jacobian is used: the mean and the variance depend on x too",
        "each x_hat_i depends on every x_j of its row",
    ),
    "no gamma": (
        "grad_y is not multiplied by gamma before going through the normalisation",
        "gamma scales the output, so it scales the gradient that reaches x_hat",
    ),
    "ddof=1": (
        "it uses the unbiased variance (ddof=1); the forward pass divides by d",
        "the backward pass goes through the forward pass that was computed",
    ),
    "mean over the rows": (
        "it is the mean over the rows (tokens) instead of the sum: every token adds its own "
        "contribution to the loss, so the gradients of the shared gamma and beta add up",
        _EVERY_TOKEN,
    ),
    "x instead of x_hat": (
        "dgamma is sum(grad_y * (x - mean)) instead of sum(grad_y * x_hat)",
        "gamma multiplies the normalised x",
    ),
}


def _ln_backward_diagnose(name: str) -> Diagnose:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        G, x, gamma = case.inputs["grad_y"], case.inputs["x"], case.inputs["gamma"]
        eps = float(case.inputs["eps"])
        rtol, atol = case.tolerances()
        expected = _ln_grads(G, x, gamma, eps)[name]
        for slip, (problem, hint) in _BACKWARD_SLIPS.items():
            candidate = _ln_grads(G, x, gamma, eps, slip)[name]
            if not np.allclose(candidate, expected) and np.allclose(
                got, candidate, rtol=rtol, atol=atol
            ):
                return [Finding(problem, hint)]
        if name != "dx" and got.shape == expected.shape:
            per_row = _ln_grads(G, x, gamma, eps)
            if np.allclose(got, -per_row[name], rtol=rtol, atol=atol):
                return [Finding("the sign is flipped")]
        return []

    return diagnose


def check_layer_norm_backward(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check the reader's gradients of layer normalisation.

    Parameters
    ----------
    fn : callable
        ``fn(grad_y, x, gamma, eps) -> (dx, dgamma, dbeta)`` for ``y = layer_norm(x,
        gamma, beta, eps)`` and ``L = sum(grad_y * y)``: ``dx`` of the shape of ``x``,
        ``dgamma`` and ``dbeta`` of shape ``(d,)`` summed over every row. A dict with
        the keys ``"dx"``, ``"dgamma"``, ``"dbeta"`` is accepted too.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every gradient matches in two layouts. The report recognises a
        missing ``- mean(g)`` or ``- x_hat mean(g x_hat)`` term, using only the
        diagonal of the Jacobian, forgetting ``gamma``, the unbiased variance,
        ``dgamma`` computed from ``x - mean`` instead of ``x_hat``, ``dgamma`` and
        ``dbeta`` left per token or averaged over the rows instead of summed, and a
        flipped sign.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_layer_norm_backward
    >>> def pass_through(grad_y, x, gamma, eps):  # as if layer norm were the identity
    ...     return grad_y, np.zeros_like(gamma), np.zeros_like(gamma)
    >>> check_layer_norm_backward(pass_through).status
    'failed'
    """
    layouts = ((msg("rows"), 61, (4, 6), 1e-5), ("a batch of sequences", 62, (2, 3, 5), 0.01))
    texts = {
        "rows": "dx has the shape of x, and each of its rows sums to 0 (adding a constant to a "
        "row changes no output); dgamma and dbeta have the shape of gamma",
        "a batch of sequences": msg(
            "dgamma and dbeta gather every token of every sequence: {every_token}",
            every_token=_EVERY_TOKEN,
        ),
    }
    specs = []
    for label, seed, shape, eps in layouts:
        rng = np.random.default_rng(seed)
        x, G = rng.normal(size=shape) * 2 + 0.5, rng.normal(size=shape)
        gamma = 1 + rng.normal(scale=0.5, size=shape[-1])
        dx, dgamma, dbeta = layer_norm_backward(G, x, gamma, eps=eps)
        right = {"dx": dx, "dgamma": dgamma, "dbeta": dbeta}
        shown = msg(
            "grad_y, x: {shape}; gamma: ({shape2},); eps = {eps:g}",
            shape=shape,
            shape2=shape[-1],
            eps=eps,
        )
        for name in _LN_GRADS:
            inputs = {"grad_y": G, "x": x, "gamma": gamma, "eps": np.array(eps)}
            specs.append(
                _Spec(
                    Case(
                        msg("{name} ({label})", name=name, label=label),
                        inputs,
                        right[name],
                        texts[label],
                    ),
                    _append(),
                    shown,
                    _ln_backward_diagnose(name),
                    _pick(name, _LN_GRADS)
                    if name == "dx"
                    else _per_token_pick(name, _LN_GRADS, shape),
                )
            )
    return _run(
        fn,
        "check_layer_norm_backward",
        specs,
        see=_LN_JACOBIAN,
        more="x_hat depends on x directly and through the row's mean and variance: "
        "differentiate it along the three paths, as the chapter's Jacobian does, then let "
        "the gradient that reaches x_hat (grad_y times gamma) flow back through it; dgamma "
        "and dbeta add up "
        "every token's contribution",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_rms_norm_backward
# ---------------------------------------------------------------------------

_RMS_GRADS = ("dx", "dgamma")


def _rms_grads(G: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float, slip: str = "right"):
    """The two gradients of ``sum(G * rms_norm(x))``, or with one slip."""
    d = x.shape[-1]
    ms = (x * x).mean(axis=-1, keepdims=True)
    r = np.sqrt(ms) if slip == "eps left out" else np.sqrt(ms + eps)
    x_hat = x / r
    g = G if slip == "no gamma" else G * gamma
    mean_gx = (g * x_hat).mean(axis=-1, keepdims=True)
    dx = {
        "layer norm's mean term": (g - g.mean(axis=-1, keepdims=True) - x_hat * mean_gx) / r,
        "only the diagonal": g / r,
        "sum instead of mean": (g - x_hat * d * mean_gx) / r,
    }.get(slip, (g - x_hat * mean_gx) / r)
    scaled = x if slip == "x instead of x_hat" else x_hat
    reduce = np.mean if slip == "mean over the rows" else np.sum
    return {"dx": dx, "dgamma": reduce((G * scaled).reshape(-1, d), axis=0)}


_RMS_SLIPS = {
    "layer norm's mean term": (
        "it is layer norm's backward pass: the term - mean(g) belongs to the mean that layer "
        "norm subtracts; RMSNorm subtracts no mean",
        "besides the direct path, x reaches the output through r only",
    ),
    "only the diagonal": (
        "only the diagonal of the Jacobian is used, dx = g / r: r depends on x too",
        "r depends on every x_j of its row",
    ),
    "sum instead of mean": (
        "the term through r is d times too large: a sum over the features where r has their mean",
        "r is built from a mean over the d features",
    ),
    "no gamma": (
        "grad_y is not multiplied by gamma before going through the normalisation",
        "gamma scales the output, so it scales the gradient that reaches x / r",
    ),
    "eps left out": (
        "eps is missing from r: the forward pass divides by sqrt(mean(x**2) + eps)",
        "the backward pass goes through the forward pass that was computed, eps included",
    ),
    "mean over the rows": (
        "dgamma is the mean over the rows (tokens) instead of the sum: every token adds its "
        "own contribution to the loss, so the gradients of the shared gamma add up",
        _EVERY_TOKEN,
    ),
    "x instead of x_hat": (
        "dgamma is sum(grad_y * x) instead of sum(grad_y * x / r)",
        "gamma multiplies the normalised x",
    ),
}


def _rms_backward_diagnose(name: str) -> Diagnose:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        G, x, gamma = case.inputs["grad_y"], case.inputs["x"], case.inputs["gamma"]
        eps = float(case.inputs["eps"])
        rtol, atol = case.tolerances()
        expected = _rms_grads(G, x, gamma, eps)[name]
        for slip, (problem, hint) in _RMS_SLIPS.items():
            candidate = _rms_grads(G, x, gamma, eps, slip)[name]
            if not np.allclose(candidate, expected, rtol=rtol, atol=atol) and np.allclose(
                got, candidate, rtol=rtol, atol=atol
            ):
                return [Finding(problem, hint)]
        if np.allclose(got, -expected, rtol=rtol, atol=atol):
            return [Finding("the sign is flipped")]
        return []

    return diagnose


def _per_token_pick(name: str, wrt: tuple[str, ...], x_shape: tuple[int, ...]):
    """``pick``, and a gradient of a shared parameter left per token is named as such."""
    base = _pick(name, wrt)

    def pick(result: object) -> object:
        got = base(result)
        shape = np.shape(got)
        if len(x_shape) > 1 and shape == x_shape:
            raise _Unusable(
                msg("an array of shape {shape}, the shape of x", shape=shape),
                msg(
                    "{name} is not summed over the tokens: gamma is shared by every token, "
                    "and each token adds its own contribution to the loss",
                    name=name,
                ),
                msg("{name} has the shape of gamma, (d,)", name=name),
            )
        return got

    return pick


def check_rms_norm_backward(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check the reader's gradients of RMS normalisation.

    Parameters
    ----------
    fn : callable
        ``fn(grad_y, x, gamma, eps) -> (dx, dgamma)`` for ``y = rms_norm(x, gamma,
        eps=eps)`` and ``L = sum(grad_y * y)``: ``grad_y`` and ``x`` of shape ``(..., d)``,
        ``gamma`` of shape ``(d,)``; ``dx`` of the shape of ``x``, ``dgamma`` of shape
        ``(d,)`` summed over every token. A dict with the keys ``"dx"`` and ``"dgamma"``
        is accepted too.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff both gradients match in two layouts. The report recognises layer
        norm's backward pass (its ``- mean(g)`` term), using only the diagonal of the
        Jacobian, a sum where the mean over the features belongs, forgetting ``gamma``
        or ``eps``, ``dgamma`` computed from ``x`` instead of ``x / r``, ``dgamma`` left
        per token or averaged over the tokens instead of summed, and a flipped sign.

    Examples
    --------
    >>> import numpy as np
    >>> from helpers.checks import check_rms_norm_backward
    >>> def pass_through(grad_y, x, gamma, eps):  # as if RMSNorm were the identity
    ...     return grad_y, np.zeros_like(gamma)
    >>> check_rms_norm_backward(pass_through).status
    'failed'
    """
    layouts = ((msg("rows"), 63, (4, 6), 1e-6), ("a batch of sequences", 64, (2, 3, 5), 0.5))
    texts = {
        "rows": "dx has the shape of x and dgamma that of gamma; the tokens' mean is far from "
        "0, so a mean that does not belong here shows",
        "a batch of sequences": msg(
            "dgamma gathers every token of every sequence: {every_token}", every_token=_EVERY_TOKEN
        ),
    }
    specs = []
    for label, seed, shape, eps in layouts:
        rng = np.random.default_rng(seed)
        x, G = rng.normal(size=shape) + 0.7, rng.normal(size=shape)  # a mean far from 0
        gamma = 1 + rng.normal(scale=0.5, size=shape[-1])
        right = _rms_grads(G, x, gamma, eps)
        shown = msg(
            "grad_y, x: {shape}; gamma: ({shape2},); eps = {eps:g}",
            shape=shape,
            shape2=shape[-1],
            eps=eps,
        )
        for name in _RMS_GRADS:
            inputs = {"grad_y": G, "x": x, "gamma": gamma, "eps": np.array(eps)}
            pick = (
                _per_token_pick(name, _RMS_GRADS, shape)
                if name == "dgamma"
                else _pick(name, _RMS_GRADS)
            )
            specs.append(
                _Spec(
                    Case(
                        msg("{name} ({label})", name=name, label=label),
                        inputs,
                        right[name],
                        texts[label],
                    ),
                    _append(),
                    shown,
                    _rms_backward_diagnose(name),
                    pick,
                )
            )
    return _run(
        fn,
        "check_rms_norm_backward",
        specs,
        see=msg(
            "{section} and {ln_jacobian}",
            section=section(6, "Batch normalisation and RMSNorm"),
            ln_jacobian=_LN_JACOBIAN,
        ),
        more="y_i is gamma_i x_i divided by r, and r depends on every x_j of the row: "
        "differentiate the quotient, with the derivative of r taken from its definition, "
        "then let the gradient that reaches x / r (grad_y times gamma) flow back and sum over "
        "i; dgamma adds up every token's "
        "contribution",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_block_parameter_count
# ---------------------------------------------------------------------------


def _count_candidates(d: int, f: int) -> list[tuple[int, Finding]]:
    right = block_parameter_count(d, 1, f)
    ln_hint = "a layer norm has a gain and a shift per feature, and a block has two"
    bias_hint = "a bias has one entry per output of its layer"
    return [
        (
            right - 4 * d,
            Finding(
                "4 d_model parameters are missing: the two layer norms' gains and shifts (or "
                "else the four attention biases)",
                ln_hint,
            ),
        ),
        (right - 2 * d, Finding("only one layer norm is counted; a block has two", ln_hint)),
        (
            right - 5 * d - f,
            Finding(
                "the biases are missing: b_Q, b_K, b_V, b_O (4 d_model), b_1 (d_ff) and b_2 "
                "(d_model); the weight matrices and the layer norms are counted right",
                "every linear layer of this block has a bias",
            ),
        ),
        (
            right - f - d,
            Finding(
                "the feed-forward biases b_1 (d_ff) and b_2 (d_model) are missing",
                "both linear layers of the feed-forward network have biases",
            ),
        ),
        (
            right - f + d,
            Finding(
                "b_1 is counted with d_model entries; it has d_ff, one per hidden unit", bias_hint
            ),
        ),
        (
            right - 9 * d - f,
            Finding(
                "no bias or layer-norm parameter is counted, only the weight matrices",
                "the biases and the layer norms' gains and shifts are trained too",
            ),
        ),
        (
            right - d * d - d,
            Finding(
                "the attention's output projection W_O (and b_O) is missing",
                "attention ends with an output projection",
            ),
        ),
        (
            right - d * f,
            Finding(
                "only one of the feed-forward matrices is counted; W_1 and W_2 have d_model d_ff "
                "entries each",
                "the network goes from d_model to d_ff and back",
            ),
        ),
    ]


def _block_count_diagnose(d: int, f: int) -> Diagnose:
    candidates = _count_candidates(d, f)

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        for value, finding in candidates:
            if float(got) == value and value != int(case.expected):
                return [finding]
        return []

    return diagnose


def check_block_parameter_count(
    fn: Callable[[int, int], object], *, hint: bool = False
) -> CheckReport:
    """Check the reader's count of the trainable parameters of one encoder block.

    Parameters
    ----------
    fn : callable
        ``fn(d_model, d_ff) -> int``: the number of parameters of one block of
        :func:`helpers.transformer.encoder_block` (attention with biases, the
        feed-forward network with biases, two layer norms).
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every count is exact. The report recognises missing layer norms (or
        only one), every bias missing, missing feed-forward or attention biases, ``b_1``
        counted with ``d_model`` entries, a missing ``W_O``, and a single feed-forward
        matrix.

    Examples
    --------
    >>> from helpers.checks import check_block_parameter_count
    >>> def one_matrix(d_model, d_ff):  # a single d_model x d_ff matrix
    ...     return d_model * d_ff
    >>> check_block_parameter_count(one_matrix).status
    'failed'
    """
    layouts = (
        ("base Transformer (512, 2048)", 512, 2048),
        ("BERT-base (768, 3072)", 768, 3072),
        ("BERT-large (1024, 4096)", 1024, 4096),
        ("this chapter's model (32, 64)", 32, 64),
        ("d_ff = d_model = 8", 8, 8),
    )
    text = (
        "list the block's arrays: attention with its biases, the feed-forward network with "
        "its biases, two layer norms"
    )
    specs = [
        _Spec(
            Case(name, {}, np.array(block_parameter_count(d, 1, f)), text, rtol=0.0, atol=0.0),
            _append(d, f),
            msg("d_model = {d}, d_ff = {f}", d=d, f=f),
            _block_count_diagnose(d, f),
            exact_integer=True,
        )
        for name, d, f in layouts
    ]
    return _run(
        fn,
        "check_block_parameter_count",
        specs,
        see=section(6, "The block"),
        more="count each sublayer's arrays with their shapes, biases and the layer norms' "
        "gains and shifts included; the number of heads changes none of them",
        hint=hint,
    )


def _llama_count(d: int, f: int) -> int:
    """A LLaMA block: attention and SwiGLU without biases, two RMSNorm gains."""
    return 4 * d * d + 3 * d * f + 2 * d


def _llama_candidates(d: int, f: int) -> list[tuple[int, Finding]]:
    right = _llama_count(d, f)
    no_bias = "no linear layer of LLaMA has a bias"
    norms = "a block has two RMSNorms, each with a gain and no shift"
    return [
        (
            right - d * f,
            Finding(
                "one of the three SwiGLU matrices is missing: it counts 2 d_model d_ff, the "
                "weights of a ReLU network",
                'SwiGLU has a gate as well (chapter 6, "A gated feed-forward network: SwiGLU")',
            ),
        ),
        (
            right + 2 * d,
            Finding(
                "the norms are counted with a shift each: RMSNorm has a gain and no shift", norms
            ),
        ),
        (
            right + 4 * d,
            Finding("attention biases are counted: LLaMA's projections have no biases", no_bias),
        ),
        (
            right + 2 * f + d,
            Finding("feed-forward biases are counted: LLaMA's SwiGLU has none", no_bias),
        ),
        (
            right + 6 * d + 2 * f,
            Finding(
                "biases are counted on every linear layer (4 d_model + 2 d_ff + d_model): "
                "LLaMA's linear layers have none",
                no_bias,
            ),
        ),
        (right - 2 * d, Finding("the two RMSNorms' gains (2 d_model) are missing", norms)),
        (
            right - d,
            Finding("only one RMSNorm is counted; a block has two, one per sublayer", norms),
        ),
        (
            right + d,
            Finding(
                "three RMSNorms are counted; a block has two (the stack's final norm is "
                "counted once, outside the blocks)",
                norms,
            ),
        ),
        (
            right - d * d,
            Finding(
                "the attention's output projection W_O is missing",
                "attention ends with an output projection",
            ),
        ),
    ]


def _llama_count_diagnose(d: int, f: int) -> Diagnose:
    candidates = _llama_candidates(d, f)

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        for value, finding in candidates:
            if float(got) == value and value != int(case.expected):
                return [finding]
        return []

    return diagnose


def check_llama_block_parameter_count(
    fn: Callable[[int, int], object], *, hint: bool = False
) -> CheckReport:
    """Check the reader's count of the parameters of one LLaMA block.

    Parameters
    ----------
    fn : callable
        ``fn(d_model, d_ff) -> int``: the number of parameters of one pre-LN block
        with RMSNorm and a SwiGLU feed-forward network of width ``d_ff``, as in LLaMA:
        multi-head attention without biases, ``W_1``, ``W_3``, ``W_2`` without biases,
        and two RMSNorms with a gain each.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every count is exact. The report recognises a SwiGLU network
        counted with two matrices, shifts counted in the norms, biases counted in the
        attention, in the feed-forward network or everywhere, the norms missing, one
        norm or three, and a missing ``W_O``.

    Examples
    --------
    >>> from helpers.checks import check_llama_block_parameter_count
    >>> def one_matrix(d_model, d_ff):  # a single d_model x d_ff matrix
    ...     return d_model * d_ff
    >>> check_llama_block_parameter_count(one_matrix).status
    'failed'
    """
    layouts = (
        ("LLaMA-7B (4096, 11008)", 4096, 11008),
        ("LLaMA-13B (5120, 13824)", 5120, 13824),
        ("d_model = 48, d_ff = 128", 48, 128),
        ("d_model = 12, d_ff = 20", 12, 20),
    )
    text = (
        "list the block's arrays: attention, the SwiGLU network, two RMSNorms, and no bias anywhere"
    )
    specs = [
        _Spec(
            Case(name, {}, np.array(_llama_count(d, f)), text, rtol=0.0, atol=0.0),
            _append(d, f),
            msg("d_model = {d}, d_ff = {f}", d=d, f=f),
            _llama_count_diagnose(d, f),
            exact_integer=True,
        )
        for name, d, f in layouts
    ]
    return _run(
        fn,
        "check_llama_block_parameter_count",
        specs,
        see=msg(
            "{section} and {section2}",
            section=section(6, "A gated feed-forward network: SwiGLU"),
            section2=section(6, "Batch normalisation and RMSNorm"),
        ),
        more="count each sublayer's arrays with their shapes: the attention's four "
        "projections, the SwiGLU network's matrices (one more than a ReLU network's), and "
        "the two norms' gains; LLaMA has no biases",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_encoder_block
# ---------------------------------------------------------------------------


def _block_variant(X: np.ndarray, p: Mapping[str, np.ndarray], h: int, norm_first: bool, slip: str):
    """The block as written with one usual slip (relu, eps = 1e-5)."""

    def ln(x, name):
        if slip == "norms swapped":
            name = {"ln1": "ln2", "ln2": "ln1"}[name]
        return layer_norm(x, p[msg("{name}_gamma", name=name)], p[msg("{name}_beta", name=name)])

    def mha(x):
        names = () if slip == "no attention biases" else ("b_Q", "b_K", "b_V", "b_O")
        biases = {k: p[k] for k in names}
        return multi_head_attention(x, x, p["W_Q"], p["W_K"], p["W_V"], p["W_O"], h, **biases)[0]

    def ffn(x):
        act = "gelu" if slip == "gelu" else "relu"
        return feed_forward(x, p["W_1"], p["b_1"], p["W_2"], p["b_2"], activation=act)

    # the residual connections: both, or one of them missing, or none
    keep_att = 0.0 if slip in ("no residual", "no residual around attention") else 1.0
    keep_ffn = 0.0 if slip in ("no residual", "no residual around the feed-forward") else 1.0
    if norm_first != (slip == "order swapped"):  # pre-LN
        u = ln(X, "ln1")
        normalised = slip.startswith("residual from the normalised input")
        Z = (u if normalised and "feed-forward" not in slip else keep_att * X) + mha(u)
        v = ln(Z, "ln2")
        Y = (v if normalised and "attention" not in slip else keep_ffn * Z) + ffn(v)
        return ln(Y, "ln2") if slip == "final norm" else Y
    if slip == "norm before the sum":
        Z = X + ln(mha(X), "ln1")
        return Z + ln(ffn(Z), "ln2")
    Z = ln(keep_att * X + mha(X), "ln1")
    return ln(keep_ffn * Z + ffn(Z), "ln2")


_ORDERS = section(6, "Post-LN or pre-LN: gradients at initialisation")
_BLOCK_SLIPS = {
    "order swapped": (
        "it computes the other order: pre-LN where post-LN was asked for, or the reverse",
        "norm_first=False asks for post-LN, norm_first=True for pre-LN",
    ),
    "norms swapped": (
        "ln1 and ln2 are swapped: ln1 belongs to the attention sublayer, ln2 to the "
        "feed-forward one",
        "each sublayer has its own norm",
    ),
    "residual from the normalised input": (
        "the residual adds the normalised input, LN(x) + Sublayer(LN(x)), instead of x",
        "in pre-LN the residual path carries x itself, untouched by the norm",
    ),
    "residual from the normalised input, attention only": (
        "the attention sublayer's residual adds the normalised input, LN1(X) + MHA(LN1(X)), "
        "instead of X (the feed-forward sublayer's is right)",
        "in pre-LN the residual path carries x itself, untouched by the norm",
    ),
    "residual from the normalised input, feed-forward only": (
        "the feed-forward sublayer's residual adds the normalised input, LN2(Z) + "
        "FFN(LN2(Z)), instead of Z (the attention sublayer's is right)",
        "in pre-LN the residual path carries x itself, untouched by the norm",
    ),
    "final norm": (
        "an extra layer norm is applied at the end of the pre-LN block",
        "a pre-LN block ends with the residual sum; a stack of blocks gets one final norm",
    ),
    "no residual": (
        "the residual connections are missing: the sublayer's input is not added back",
        "both sublayers add their input back",
    ),
    "no residual around attention": (
        "the attention sublayer's residual connection is missing: X is not added back to "
        "MHA (the feed-forward sublayer's is right)",
        "both sublayers add their input back",
    ),
    "no residual around the feed-forward": (
        "the feed-forward sublayer's residual connection is missing: Z is not added back to "
        "FFN (the attention sublayer's is right)",
        "both sublayers add their input back",
    ),
    "norm before the sum": (
        "the norm is applied to the sublayer's output before the residual sum, x + "
        "LN(Sublayer(x)), instead of to the sum",
        "post-LN normalises after the residual sum",
    ),
    "no attention biases": (
        "the attention biases b_Q, b_K, b_V, b_O are left out",
        "the attention projections have biases in params",
    ),
    "gelu": ("the feed-forward network uses GELU; this block uses ReLU", "this block uses ReLU"),
}


def _block_diagnose(h: int, norm_first: bool) -> Diagnose:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        X = case.inputs["X"]
        p = {k: case.inputs[k] for k in BLOCK_PARAM_NAMES}
        rtol, atol = case.tolerances()
        with np.errstate(all="ignore"):
            for slip, (problem, hint) in _BLOCK_SLIPS.items():
                if (slip == "final norm" or slip.startswith("residual")) and not norm_first:
                    continue
                candidate = _block_variant(X, p, h, norm_first, slip)
                if np.allclose(got, candidate, rtol=rtol, atol=atol):
                    return [Finding(problem, hint)]
        return []

    return diagnose


def _block_params(seed: int, d: int, h: int, d_ff: int) -> tuple[np.ndarray, dict]:
    rng = np.random.default_rng(seed)
    p = init_block_params(d, h, d_ff, rng=rng)
    for name in BLOCK_PARAM_NAMES:  # non-trivial biases and gains: 0 and 1 would hide slips
        if name.startswith("b_") or name.endswith("_beta"):
            p[name] = rng.normal(scale=0.5, size=p[name].shape)
        elif name.endswith("_gamma"):
            p[name] = 1 + rng.normal(scale=0.3, size=p[name].shape)
    return rng.normal(size=(2, 5, d)), p


def check_encoder_block(fn: Callable[..., npt.ArrayLike], *, hint: bool = False) -> CheckReport:
    """Check the reader's encoder block, post-LN and pre-LN.

    Parameters
    ----------
    fn : callable
        ``fn(X, params, h, norm_first) -> Y``: ``X`` of shape ``(b, n, d_model)``,
        ``params`` a dict with the keys of :func:`helpers.transformer.init_block_params`,
        ``h`` the number of heads, ``norm_first`` a bool; returns the block's output
        with ReLU and ``eps = 1e-5`` (post-LN for ``norm_first=False``, pre-LN for
        ``True``).
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case passed. The report recognises the other order, ``ln1`` and
        ``ln2`` swapped, a pre-LN residual that adds the normalised input, an extra final
        norm in pre-LN, missing residual connections (both, or either one by name), the
        norm applied before the residual sum, missing attention biases, and GELU instead
        of ReLU.

    Examples
    --------
    >>> from helpers.checks import check_encoder_block
    >>> def identity(X, params, h, norm_first):  # the residual path alone
    ...     return X
    >>> check_encoder_block(identity).status
    'failed'
    """
    specs = []
    for norm_first in (False, True):
        for seed, h in ((70 + norm_first, 2), (72 + norm_first, 4)):
            X, p = _block_params(seed, 8, h, 16)
            expected, _ = encoder_block(X, p, h, norm_first=norm_first)
            label = "pre-LN" if norm_first else "post-LN"
            inputs = {"X": X, **p}

            def arrange(X, *arrays, h=h, norm_first=norm_first):
                return X, dict(zip(BLOCK_PARAM_NAMES, arrays, strict=True)), h, norm_first

            text = (
                "norm_first=True: pre-LN, the order the chapter leaves out"
                if norm_first
                else "norm_first=False: post-LN, the chapter's own order"
            )
            specs.append(
                _Spec(
                    Case(msg("{label}, {h} heads", label=label, h=h), inputs, expected, text),
                    arrange,
                    msg(
                        "X: {x_shape}; d_ff = 16; h = {h}; norm_first = {norm_first}",
                        x_shape=X.shape,
                        h=h,
                        norm_first=norm_first,
                    ),
                    _block_diagnose(h, norm_first),
                )
            )
    return _run(
        fn,
        "check_encoder_block",
        specs,
        see=_ORDERS,
        more="each sublayer, attention then the feed-forward network, is wrapped by a "
        "residual connection and a layer norm of its own; the two orders differ only in "
        "where the norm sits relative to the residual sum. Write one sublayer in both "
        "orders, then chain the two",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_fold_layer_norm (exercise 6.1): a layer norm's gain and shift folded away
# ---------------------------------------------------------------------------

_FOLD_NAMES = ("W_folded", "b_folded")

_FOLD_HINT = (
    "write the layer norm's output as the gain times the normalised token plus the shift, "
    "pass it through the layer, and sort the terms: those that contain the normalised token "
    "make the new weights, the others the new bias"
)
_FOLD_MORE = (
    "the gain scales each coordinate of the token before the layer mixes the coordinates: "
    "ask which index of W a coordinate meets; the shift is the same input for every token: "
    "ask what the layer makes of an input that never changes, and keep the layer's own bias"
)

# slip -> (W_folded, b_folded) computed with it, and what the report says about each part
_FOLD_SLIPS: dict[str, tuple[str, str]] = {
    "columns": (
        "gamma scales the columns of W; it multiplies x_hat before W does, so each gamma_i "
        "meets row i of W (the input it belongs to), not a column",
        "which index of W does the i-th feature of the normalised token meet on its way "
        "through the layer?",
    ),
    "divided": (
        "W is divided by gamma: folding a gain into the next layer multiplies by it",
        "the normalised token is multiplied by gamma, then by W: what does gamma do to the "
        "weights?",
    ),
    "W unchanged": (
        "W_folded is W: the gain gamma is not folded in",
        "the normalised token is multiplied by gamma before it reaches W: that factor must "
        "now live in the weights",
    ),
    "b unchanged": (
        "b_folded is b: the shift beta is not folded in, but it passes through W too",
        "beta is added to every token before W: what does W make of it?",
    ),
    "beta added": (
        "beta is added to the bias as it is, without passing through W",
        "beta is a token-sized vector added before W: what does W make of it?",
    ),
    "beta times gamma": (
        "beta is multiplied by gamma: the shift is added after the gain, so gamma never touches it",
        "beta enters after the gain: only W acts on it",
    ),
    "no b": (
        "the layer's own bias b is missing from b_folded",
        "the folded bias must still contain what the layer added before",
    ),
    "minus": (
        "the sign of the shift's contribution is flipped",
        "beta is added, not subtracted, before W",
    ),
    "column vector": (
        "beta meets the columns of W, as a column vector would; tokens are rows here, and a "
        "row goes through W from the left",
        "in the row-vector convention a vector goes through W from the left, as every token does",
    ),
}


def _fold_variant(gamma, beta, W, b, slip: str = "right") -> dict[str, np.ndarray]:
    W_f = gamma[:, None] * W
    b_f = beta @ W + b
    with np.errstate(all="ignore"):
        if slip == "columns" and W.shape[0] == W.shape[1]:
            W_f = W * gamma[None, :]
        elif slip == "divided":
            W_f = W / gamma[:, None]
        elif slip == "W unchanged":
            W_f = W
        elif slip == "b unchanged":
            b_f = b
        elif slip == "beta added" and W.shape[0] == W.shape[1]:
            b_f = b + beta
        elif slip == "beta times gamma":
            b_f = (gamma * beta) @ W + b
        elif slip == "no b":
            b_f = beta @ W
        elif slip == "minus":
            b_f = b - beta @ W
        elif slip == "column vector" and W.shape[0] == W.shape[1]:
            b_f = W @ beta + b
    return {"W_folded": W_f, "b_folded": b_f}


def _fold_diagnose(name: str) -> Diagnose:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        args = [np.asarray(case.inputs[k]) for k in ("gamma", "beta", "W", "b")]
        expected = _fold_variant(*args)[name]
        rtol, atol = case.tolerances()
        for slip, (problem, hint) in _FOLD_SLIPS.items():
            candidate = _fold_variant(*args, slip)[name]
            if (
                candidate.shape == got.shape
                and not np.allclose(candidate, expected, rtol=rtol, atol=atol)
                and np.allclose(got, candidate, rtol=rtol, atol=atol)
            ):
                return [Finding(problem, hint)]
        return []

    return diagnose


def _fold_pick(name: str) -> Callable[[object], object]:
    def pick(result: object) -> object:
        if isinstance(result, Mapping):
            if name in result:
                return result[name]
            raise _Unusable(
                "a dict without " + repr(name),
                msg("the result has no entry {name!r}", name=name),
                "return the pair (W_folded, b_folded)",
            )
        if isinstance(result, (tuple, list)) and len(result) == 2:
            return result[_FOLD_NAMES.index(name)]
        raise _Unusable(
            type(result).__name__,
            "expected the pair (W_folded, b_folded)",
            "return the new weights and the new bias, in that order",
        )

    return pick


def check_fold_layer_norm(fn: Callable[..., object], *, hint: bool = False) -> CheckReport:
    """Check the reader's folding of a layer norm's gain and shift into the next layer.

    Parameters
    ----------
    fn : callable
        ``fn(gamma, beta, W, b) -> (W_folded, b_folded)``: ``gamma`` and ``beta`` of shape
        ``(d,)``, the gain and the shift of a layer norm, ``W`` of shape ``(d, d_out)`` and
        ``b`` of shape ``(d_out,)``, the linear layer that reads it. Returns the weights and
        the bias, of the shapes of ``W`` and ``b``, such that
        ``layer_norm(x, gamma, beta) @ W + b == layer_norm(x, 1, 0) @ W_folded + b_folded``
        for every token ``x``; the inputs must not change. A dict with the keys
        ``"W_folded"`` and ``"b_folded"`` is accepted too.
    hint : bool, default False
        Show the fuller hint under the failures.

    Returns
    -------
    CheckReport
        Truthy iff both arrays match in every case (a square layer, two rectangular ones,
        and a layer norm with nothing to fold). The report recognises the gain applied to
        the columns of ``W``, ``W`` divided by the gain, the gain or the shift left out,
        the shift added without passing through ``W`` or multiplied by the gain, the
        layer's own bias forgotten, a flipped sign and ``W @ beta`` in place of a row
        vector times ``W``.

    Examples
    --------
    Adding the shift to the bias as it is, and leaving the weights alone:

    >>> import numpy as np
    >>> from helpers.checks import check_fold_layer_norm
    >>> def fold_nothing_through_w(gamma, beta, W, b):
    ...     return W, b + beta
    >>> report = check_fold_layer_norm(fold_nothing_through_w)
    >>> [r.problem.split(":")[0] for r in report.failures if "square" in r.name]
    ['W_folded is W', 'beta is added to the bias as it is, without passing through W']
    """
    layouts = [
        ("a square layer, d = d_out = 4", 71, 4, 4, True),
        ("W of shape (6, 3)", 72, 6, 3, True),
        ("W of shape (3, 8)", 73, 3, 8, True),
        ("gamma = 1 and beta = 0, W of shape (5, 2)", 74, 5, 2, False),
    ]
    specs = []
    for label, seed, d, d_out, random_norm in layouts:
        rng = np.random.default_rng(seed)
        if random_norm:
            gamma = rng.choice([-1.0, 1.0], size=d) * rng.uniform(0.5, 2.0, size=d)
            beta = rng.normal(size=d)
        else:
            gamma, beta = np.ones(d), np.zeros(d)
        W, b = rng.normal(size=(d, d_out)), rng.normal(size=d_out)
        right = _fold_variant(gamma, beta, W, b)
        inputs = {"gamma": gamma, "beta": beta, "W": W, "b": b}
        shown = msg("gamma, beta: ({d},); W: ({d}, {d_out}); b: ({d_out},)", d=d, d_out=d_out)
        for name in _FOLD_NAMES:
            specs.append(
                _Spec(
                    Case(
                        msg("{name}, {label}", name=name, label=label),
                        inputs,
                        right[name],
                        _FOLD_HINT,
                    ),
                    _append(),
                    shown,
                    _fold_diagnose(name),
                    _fold_pick(name),
                )
            )
    return _run(
        fn,
        "check_fold_layer_norm",
        specs,
        see=section(6, "Layer normalisation"),
        more=_FOLD_MORE,
        hint=hint,
    )

"""Self-checks of chapter 3 (multi-head attention), built on :mod:`helpers.checks.core`.

The reader's functions take Python numbers (``num_heads``, ``causal``, ``bias``) next to
their arrays, so each case calls the function with those bound and the report shows
the arrays by shape (``X: (4, 8)``) rather than entry by entry. When an answer is
wrong, the diagnosis recomputes the layer with each usual slip (and pairs of them) and
names the one that reproduces the reader's numbers.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from helpers.attention import attention_backward, scaled_dot_product_attention
from helpers.checks.core import (
    Case,
    CaseResult,
    CheckReport,
    Diagnose,
    Finding,
    _fmt_num,
    _name_of,
    run_checks,
    section,
)
from helpers.i18n import join, localize, msg
from helpers.masks import causal_mask
from helpers.multihead import (
    merge_heads,
    mha_parameter_count,
    multi_head_attention,
    split_heads,
)

__all__ = ["check_mha_backward", "check_mha_parameter_count", "check_multi_head_attention"]

_WEIGHT_NAMES = ("W_Q", "W_K", "W_V", "W_O")
_GRAD_NAMES = ("dW_Q", "dW_K", "dW_V", "dW_O", "dX")


# ---------------------------------------------------------------------------
# Running cases whose function takes Python numbers besides arrays
# ---------------------------------------------------------------------------


class _Unusable(Exception):
    """The reader's result has no array to compare (e.g. a missing dict entry)."""

    def __init__(self, got: str, problem: str, hint: str) -> None:
        super().__init__(problem)
        self.got, self.problem, self.hint = got, problem, hint


@dataclasses.dataclass(frozen=True)
class _Spec:
    """A case, how its arrays become the function's arguments, how the report shows them.

    ``arrange(*arrays)`` returns the positional arguments of the reader's function:
    the case's arrays (fresh copies, checked for changes in place) with the Python
    numbers it needs inserted where they belong.
    """

    case: Case
    arrange: Callable[..., tuple[object, ...]]
    shown: str
    diagnose: Diagnose | None = None
    pick: Callable[[object], object] | None = None  # the array to compare, from fn's result
    exact_integer: bool = False  # show expected and got as whole numbers, not to 6 digits


_IN_PLACE_HINT = (
    "the caller's arrays must stay as they were: compute new arrays rather than writing "
    "into an argument (an augmented assignment or a slice assignment on it)"
)


def _run(
    fn: Callable[..., object],
    check_name: str,
    specs: Sequence[_Spec],
    *,
    see: str = "",
    more: str = "",
    hint: bool = False,
) -> CheckReport:
    """Run every spec as a one-case check and collect the results in one report.

    ``see``, ``more`` and ``hint`` are those of :func:`helpers.checks.core.run_checks`.
    """
    run_checks(fn, [], check_name=check_name)  # raises TypeError if fn is not callable
    results: list[CaseResult] = []
    for spec in specs:
        unusable: list[_Unusable] = []
        returned: list[object] = []

        def call(
            *arrays: np.ndarray, spec: _Spec = spec, unusable: list = unusable, returned=returned
        ) -> object:
            result = fn(*spec.arrange(*arrays))
            if spec.pick is not None:
                try:
                    result = spec.pick(result)
                except _Unusable as why:
                    unusable.append(why)
                    return np.zeros_like(spec.case.expected)
            returned.append(result)
            return result

        def diagnose(case: Case, got: np.ndarray, spec: _Spec = spec, unusable=unusable):
            # nothing to diagnose in the zeros that stand for an unusable result
            return [] if unusable or spec.diagnose is None else spec.diagnose(case, got)

        diagnose.nan_aware = getattr(spec.diagnose, "nan_aware", False)  # type: ignore[attr-defined]

        report = run_checks(call, [spec.case], check_name=check_name, diagnose=diagnose)
        result = dataclasses.replace(report.results[0], input=spec.shown)
        if "in place" in result.problem:  # the core's hint speaks of softmax logits
            result = dataclasses.replace(result, hint=_IN_PLACE_HINT)
        if spec.exact_integer:
            result = dataclasses.replace(result, expected=_whole(spec.case.expected))
            if returned and _is_real_scalar(returned[0]):
                result = dataclasses.replace(result, got=_whole(returned[0]))
        if unusable:
            first = unusable[0]
            result = dataclasses.replace(
                result, passed=False, got=first.got, problem=first.problem, hint=first.hint
            )
        results.append(result)
    return CheckReport(
        check=check_name,
        function=_name_of(fn),
        results=tuple(results),
        see=see,
        more=more,
        hinted=hint,
    )


def _is_real_scalar(value: object) -> bool:
    try:
        arr = np.asarray(value)
    except Exception:
        return False
    return arr.shape == () and arr.dtype.kind in "iuf"


def _whole(value: object) -> str:
    """A count as Python prints it (``1050624``); 6 digits would hide an off-by-one."""
    v = np.asarray(value).item()
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _append(*numbers: object) -> Callable[..., tuple[object, ...]]:
    """``arrange``: the case's arrays, then ``numbers``."""
    return lambda *arrays: (*arrays, *numbers)


def _heads_before_last(num_heads: int) -> Callable[..., tuple[object, ...]]:
    """``arrange``: ``num_heads`` inserted before the last array (``grad_output``)."""
    return lambda *arrays: (*arrays[:-1], num_heads, arrays[-1])


def _then_true(arrange: Callable[..., tuple[object, ...]]) -> Callable[..., tuple[object, ...]]:
    """``arrange``, then ``True`` (the ``causal`` argument, passed positionally)."""
    return lambda *arrays: (*arrange(*arrays), True)


def _shapes_line(X: np.ndarray, weights: Mapping[str, np.ndarray], *rest: str) -> str:
    w = next(iter(weights.values()))
    return join(
        "; ",
        [
            f"X: {X.shape}",
            msg("{names}: {w_shape} each", names=", ".join(weights), w_shape=w.shape),
            *rest,
        ],
    )


def _random_layer(seed: int, n: int, d_model: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``X`` of shape ``(n, d_model)`` and four weights scaled so the scores are O(1)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d_model))
    scale = 1 / math.sqrt(d_model)
    return X, {k: rng.normal(scale=scale, size=(d_model, d_model)) for k in _WEIGHT_NAMES}


# ---------------------------------------------------------------------------
# check_multi_head_attention
# ---------------------------------------------------------------------------

_DEFINITION = section(3, "Definition")
_ONE_PROJECTION = section(3, "One projection for all heads")
_CAUSAL_TEXT = "with causal=True, query i may attend to the keys j <= i only"
_SPLIT_HINT = msg(
    "head i owns d_k consecutive columns of Q, K and V ({one_projection})",
    one_projection=_ONE_PROJECTION,
)
_MERGE_HINT = msg(
    "the merge undoes the split: token t's row holds head 1's output for t, "
    "then head 2's, and so on ({one_projection})",
    one_projection=_ONE_PROJECTION,
)
_MHA_MORE = (
    "write one head first: its queries, keys and values are a block of d_k consecutive "
    "columns of the three projections of X, and it attends as in chapter 2, with its own "
    "scaling; then put the heads' outputs side by side in the same order and apply the "
    "output projection. A causal mask hides, for every head, the keys after the query"
)

# Each kind of slip: the variants a reader may write instead of the right one (the
# first of each tuple), with what the report says about each.
_SLIPS: dict[str, tuple[str, ...]] = {
    "heads": ("split", "one big head"),
    "split": ("blocks", "interleaved"),
    "merge": ("blocks", "interleaved", "no transpose"),
    "scale": ("d_k", "d_model", "none"),
    "weights": ("X @ W", "X @ W.T"),
    "W_O": ("applied", "missing"),
    "mask": ("past", "none", "future"),
    "softmax": ("keys", "queries"),
}


def _slip_text(kind: str, variant: str, d_model: int, num_heads: int) -> Finding:
    d_k = d_model // num_heads
    texts = {
        ("heads", "one big head"): (
            "this is a single attention over all d_model columns, not num_heads heads",
            "each head attends on its own block of d_model / num_heads columns",
        ),
        ("split", "interleaved"): (
            "the heads' columns are interleaved: head i got columns i, i + h, i + 2h, ... "
            "(a reshape to (n, d_k, h)) instead of the block i*d_k, ..., (i+1)*d_k - 1",
            _SPLIT_HINT,
        ),
        ("merge", "interleaved"): (
            "the heads are merged column-interleaved (a reshape from (n, d_k, h)): head "
            "i's output must fill columns i*d_k, ..., (i+1)*d_k - 1",
            _MERGE_HINT,
        ),
        ("merge", "no transpose"): (
            "the heads are merged by reshaping (h, n, d_k) straight to (n, h*d_k), which "
            "mixes up the tokens: move the head axis next to d_k first",
            _MERGE_HINT,
        ),
        ("scale", "d_model"): (
            msg(
                "the scores are divided by sqrt(d_model) = sqrt({d_model}) instead of "
                "sqrt(d_k) = sqrt({d_k}), d_k = d_model / num_heads",
                d_model=d_model,
                d_k=d_k,
            ),
            "each head scales its scores by its own width",
        ),
        ("scale", "none"): (
            "the scores are not divided by sqrt(d_k)",
            "each head scales its scores as chapter 2's attention does",
        ),
        ("weights", "X @ W.T"): (
            "the weights are applied transposed (PyTorch's nn.Linear stores W^T)",
            "the book's tokens are rows multiplied on the right by the weights, as the "
            "statement's Q = X W_Q says",
        ),
        ("W_O", "missing"): (
            "the output is the concatenation of the heads, without the output projection W_O",
            "the layer ends with the output projection",
        ),
        ("mask", "none"): (
            "the causal mask is not applied: query i also attends to later keys",
            _CAUSAL_TEXT,
        ),
        ("mask", "future"): (
            "the mask is the wrong way round: query i attends to keys j >= i instead of j <= i",
            "in a mask, row i is query i and column j is key j",
        ),
        ("softmax", "queries"): (
            "the softmax is taken over the queries (axis -2), so the columns of the weights "
            "sum to 1 instead of the rows",
            "each query's weights sum to 1 over the keys",
        ),
    }
    problem, hint = texts[kind, variant]
    return Finding(problem, hint)


def _mha_variant(
    X: np.ndarray,
    weights: Mapping[str, np.ndarray],
    num_heads: int,
    causal: bool,
    slips: Mapping[str, str],
) -> np.ndarray:
    """The layer as written with the given slips (the right variant where not named)."""
    choice = {kind: slips.get(kind, variants[0]) for kind, variants in _SLIPS.items()}
    W = {k: (w.T if choice["weights"] == "X @ W.T" else w) for k, w in weights.items()}
    n, d_model = X.shape
    h = 1 if choice["heads"] == "one big head" else num_heads
    d_k_true = d_model // num_heads
    d_k = d_model // h

    def split(M: np.ndarray) -> np.ndarray:  # (n, d_model) -> (h, n, d_k)
        if choice["split"] == "blocks":
            return M.reshape(n, h, d_k).transpose(1, 0, 2)
        return M.reshape(n, d_k, h).transpose(2, 0, 1)

    Q, K, V = split(X @ W["W_Q"]), split(X @ W["W_K"]), split(X @ W["W_V"])
    S = Q @ K.transpose(0, 2, 1)  # (h, n, n)
    divisor = {"d_k": d_k_true, "d_model": d_model, "none": 1}[choice["scale"]]
    S = S / math.sqrt(divisor)
    if causal and choice["mask"] != "none":
        allowed = causal_mask(n) if choice["mask"] == "past" else causal_mask(n).T
        S = np.where(allowed, S, -np.inf)
    axis = -1 if choice["softmax"] == "keys" else -2
    A = np.exp(S - S.max(axis=axis, keepdims=True))
    A /= A.sum(axis=axis, keepdims=True)
    heads = A @ V  # (h, n, d_k)
    if choice["merge"] == "blocks":
        C = heads.transpose(1, 0, 2).reshape(n, d_model)
    elif choice["merge"] == "interleaved":
        C = heads.transpose(1, 2, 0).reshape(n, d_model)
    else:
        C = heads.reshape(n, d_model)
    return C @ W["W_O"] if choice["W_O"] == "applied" else C


def _slip_combinations(causal: bool, num_heads: int) -> list[dict[str, str]]:
    """Every combination of up to 3 slips that can change the output, fewest first."""
    kinds = [k for k in _SLIPS if causal or k != "mask"]
    combos = []
    for size in (1, 2, 3):
        for chosen in itertools.combinations(kinds, size):
            if "heads" in chosen and {"split", "merge"} & set(chosen):
                continue  # one big head has nothing to split or merge
            if num_heads == 1 and {"heads", "split", "merge"} & set(chosen):
                continue  # no effect with a single head
            for variants in itertools.product(*(_SLIPS[k][1:] for k in chosen)):
                combos.append(dict(zip(chosen, variants, strict=True)))
    return combos


def _mha_diagnose(num_heads: int, causal: bool) -> Diagnose:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        X = case.inputs["X"]
        weights = {k: case.inputs[k] for k in _WEIGHT_NAMES}
        rtol, atol = case.tolerances()
        with np.errstate(all="ignore"):
            for slips in _slip_combinations(causal, num_heads):
                candidate = _mha_variant(X, weights, num_heads, causal, slips)
                if np.allclose(got, candidate, rtol=rtol, atol=atol):
                    d_model = X.shape[1]
                    return [_slip_text(k, v, d_model, num_heads) for k, v in slips.items()]
        return []

    return diagnose


def check_multi_head_attention(
    fn: Callable[..., npt.ArrayLike], *, hint: bool = False
) -> CheckReport:
    """Check the reader's multi-head self-attention layer.

    Parameters
    ----------
    fn : callable
        ``fn(X, W_Q, W_K, W_V, W_O, num_heads, causal=False) -> output``: ``X`` of
        shape ``(n, d_model)``, the four weights ``(d_model, d_model)`` (row vectors,
        ``Q = X @ W_Q``), ``num_heads`` an int dividing ``d_model``; returns the
        ``(n, d_model)`` output of multi-head self-attention. ``causal`` is passed
        (positionally, as ``True``) only in the causal cases, so a function without it
        still runs the others.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every case passed. For a wrong answer the report names the slip
        (or pair of slips) that reproduces it: heads split or merged with the wrong
        reshape order, ``1/sqrt(d_model)`` instead of ``1/sqrt(d_k)``, no scaling, a
        missing ``W_O``, weights applied as ``X @ W.T``, one attention over all
        columns instead of ``h`` heads, a missing or reversed causal mask, the
        softmax over the wrong axis.

    Notes
    -----
    Cases: 2 heads, one head (``h = 1``, where ``d_k = d_model``: reshape and scale
    slips cannot show there), 4 heads of width 2, and 2 and 4 heads with
    ``causal=True``.

    Examples
    --------
    A single attention over all ``d_model`` columns, a common first attempt (a correct
    layer is for the reader to write):

    >>> from helpers import scaled_dot_product_attention
    >>> from helpers.checks import check_multi_head_attention
    >>> def one_head(X, W_Q, W_K, W_V, W_O, num_heads, causal=False):
    ...     return scaled_dot_product_attention(X @ W_Q, X @ W_K, X @ W_V)[0] @ W_O
    >>> report = check_multi_head_attention(one_head)
    >>> print(report.failures[0].problem)  # doctest: +NORMALIZE_WHITESPACE
    this is a single attention over all d_model columns, not num_heads heads; the scores are
    divided by sqrt(d_model) = sqrt(4) instead of sqrt(d_k) = sqrt(2), d_k = d_model /
    num_heads
    """
    layouts = (
        ("2 heads", 10, 3, 4, 2, False, "two heads, each on d_k = 2 columns of Q, K and V"),
        (
            "one head (h = 1)",
            11,
            3,
            4,
            1,
            False,
            "one head: a single attention over all d_model columns, then W_O",
        ),
        (
            "4 heads of width 2",
            12,
            4,
            8,
            4,
            False,
            "four heads of width 2: which columns belong to which head matters here",
        ),
        ("2 heads, causal", 13, 4, 4, 2, True, _CAUSAL_TEXT),
        ("4 heads, causal", 14, 4, 8, 4, True, _CAUSAL_TEXT),
    )
    specs = []
    for name, seed, n, d_model, h, causal, text in layouts:
        X, weights = _random_layer(seed, n, d_model)
        mask = causal_mask(n) if causal else None
        expected, _ = multi_head_attention(X, X, num_heads=h, mask=mask, **weights)
        specs.append(
            _Spec(
                Case(name, {"X": X, **weights}, expected, text),
                _append(h, True) if causal else _append(h),
                _shapes_line(
                    X, weights, msg("num_heads = {h}", h=h), msg("causal = {causal}", causal=causal)
                ),
                _mha_diagnose(h, causal),
            )
        )
    return _run(fn, "check_multi_head_attention", specs, see=_DEFINITION, more=_MHA_MORE, hint=hint)


# ---------------------------------------------------------------------------
# check_mha_parameter_count
# ---------------------------------------------------------------------------


def _count_diagnose(d: int, h: int, bias: bool) -> Diagnose:
    d_k = d // h
    b = 4 * d if bias else 0
    per_head_full = "each head's W_Q^(i), W_K^(i), W_V^(i) were counted as d_model x d_model"
    per_head_hint = (
        "each head's W_Q^(i) has d_model / num_heads columns: the heads split the "
        "columns of one projection among them"
    )
    bias_hint = "a bias has one entry per output coordinate of its projection"
    four = "the layer has four projections, the output projection W_O included"
    candidates: list[tuple[int, Finding]] = [
        (3 * h * d * d + d * d + b, Finding(per_head_full, per_head_hint)),
        (
            3 * h * d * d + d * d + (3 * h * d + d if bias else 0),
            Finding(per_head_full, per_head_hint),
        ),
        (4 * h * d * d + b, Finding(per_head_full + ", W_O as well", per_head_hint)),
        (
            4 * d * d_k + (4 * d_k if bias else 0),
            Finding(
                "this counts the matrices of a single head (d_model x d_k)",
                "the layer has num_heads heads",
            ),
        ),
        (
            3 * d * d + (3 * d if bias else 0),
            Finding("W_O (d_model x d_model) and its bias are missing", four),
        ),
        (
            3 * d * d + b,
            Finding("W_O (d_model x d_model) is missing", four),
        ),
    ]
    if bias:
        candidates += [
            (4 * d * d, Finding("the biases are missing", bias_hint)),
            (
                4 * d * d + 3 * d,
                Finding("the bias b_O of the output projection is missing", bias_hint),
            ),
            (4 * d * d + 4, Finding("each bias was counted as one number", bias_hint)),
            (
                4 * d * d + 3 * h * d + d,
                Finding(
                    "the biases were counted per head as d_model each",
                    "the heads split a bias vector as they split the projection's columns",
                ),
            ),
        ]
    else:
        candidates.append(
            (
                4 * d * d + 4 * d,
                Finding(
                    "biases were counted, but bias=False means there are none",
                    "with bias=False the projections have weights only",
                ),
            )
        )

    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        for value, finding in candidates:
            if float(got) == value and value != int(case.expected):
                return [finding]
        return []

    return diagnose


def check_mha_parameter_count(
    fn: Callable[[int, int, bool], object], *, hint: bool = False
) -> CheckReport:
    """Check the reader's count of the parameters of a multi-head attention layer.

    Parameters
    ----------
    fn : callable
        ``fn(d_model, num_heads, bias) -> int``: the number of trainable parameters
        of one multi-head attention layer (``W_Q``, ``W_K``, ``W_V``, ``W_O`` and, if
        ``bias``, their biases), called with Python ints and a bool.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every count is exact. The report recognises counting each head's
        matrices as ``d_model x d_model``, a missing ``W_O``, missing biases (or
        biases counted with ``bias=False``), biases counted per head, and counting one
        head only.

    Notes
    -----
    Cases: ``(512, 8)`` with and without biases, ``(64, 1)`` and ``(64, 16)`` (the
    same count: it does not depend on the number of heads), and ``(768, 12)``, the
    layer of BERT-base.

    Examples
    --------
    >>> from helpers.checks import check_mha_parameter_count
    >>> def queries_only(d_model, num_heads, bias):  # W_Q alone
    ...     return d_model * d_model
    >>> check_mha_parameter_count(queries_only).status
    'failed'
    """
    layouts = (
        ("d_model = 512, 8 heads, with biases", 512, 8, True),
        ("d_model = 512, 8 heads, no biases", 512, 8, False),
        ("d_model = 64, 1 head", 64, 1, True),
        ("d_model = 64, 16 heads", 64, 16, True),
        ("d_model = 768, 12 heads (BERT-base)", 768, 12, True),
    )
    texts = {
        "d_model = 512, 8 heads, with biases": "every projection's weights and biases",
        "d_model = 512, 8 heads, no biases": "bias=False: the weights only",
        "d_model = 64, 1 head": "one head, of width d_k = d_model",
        "d_model = 64, 16 heads": "16 heads of width 4: the same count as one head of width 64",
        "d_model = 768, 12 heads (BERT-base)": "the attention layer of BERT-base",
    }
    specs = [
        _Spec(
            Case(
                name,
                {},
                np.array(mha_parameter_count(d, h, bias=b)),
                texts[name],
                rtol=0.0,
                atol=0.0,
            ),
            _append(d, h, b),
            msg("d_model = {d}, num_heads = {h}, bias = {b}", d=d, h=h, b=b),
            _count_diagnose(d, h, b),
            exact_integer=True,
        )
        for name, d, h, b in layouts
    ]
    return _run(
        fn,
        "check_mha_parameter_count",
        specs,
        see=section(3, "Counting parameters"),
        more="list the layer's arrays with their shapes: the heads split the columns of the "
        "query, key and value projections among them, they do not each get a copy",
        hint=hint,
    )


# ---------------------------------------------------------------------------
# check_mha_backward
# ---------------------------------------------------------------------------


def _mha_grads(
    X: np.ndarray,
    weights: Mapping[str, np.ndarray],
    num_heads: int,
    G: np.ndarray,
    *,
    causal: bool = False,
    softmax_backward: str = "right",
) -> dict[str, np.ndarray]:
    """Gradients of ``sum(G * MHA(X))``, with the three paths into ``dX`` kept apart.

    ``causal`` applies the causal mask. ``softmax_backward`` is ``"right"`` or a slip:
    ``"dS = dA"`` (the softmax skipped) or ``"dS = A * dA"`` (the ``- rowsum`` term
    forgotten).
    """
    W = weights
    Q, K, V = (split_heads(X @ W[k], num_heads) for k in ("W_Q", "W_K", "W_V"))  # (h, n, d_k)
    mask = causal_mask(X.shape[0]) if causal else None
    heads, A = scaled_dot_product_attention(Q, K, V, mask)
    C = merge_heads(heads)  # (n, d_model)
    dheads = split_heads(G @ W["W_O"].T, num_heads)  # (h, n, d_k)
    if softmax_backward == "right":
        dQ, dK, dV = attention_backward(Q, K, V, A, dheads, mask)
    else:
        scale = 1 / math.sqrt(Q.shape[-1])
        dA = dheads @ V.transpose(0, 2, 1)
        dS = dA if softmax_backward == "dS = dA" else A * dA
        dQ, dK, dV = (
            scale * dS @ K,
            scale * dS.transpose(0, 2, 1) @ Q,
            A.transpose(0, 2, 1) @ dheads,
        )
    dQ, dK, dV = merge_heads(dQ), merge_heads(dK), merge_heads(dV)  # (n, d_model)
    paths = {"Q": dQ @ W["W_Q"].T, "K": dK @ W["W_K"].T, "V": dV @ W["W_V"].T}
    return {
        "dW_Q": X.T @ dQ,
        "dW_K": X.T @ dK,
        "dW_V": X.T @ dV,
        "dW_O": C.T @ G,
        "dX": paths["Q"] + paths["K"] + paths["V"],
        **{msg("dX via {p}", p=p): g for p, g in paths.items()},
    }


def _backward_diagnose(name: str, num_heads: int, causal: bool = False) -> Diagnose:
    def diagnose(case: Case, got: np.ndarray) -> list[Finding]:
        X, G = case.inputs["X"], case.inputs["grad_output"]
        weights = {k: case.inputs[k] for k in _WEIGHT_NAMES}
        rtol, atol = case.tolerances()
        right = _mha_grads(X, weights, num_heads, G, causal=causal)
        expected = right[name]

        def same(a: np.ndarray) -> bool:
            return a.shape == got.shape and np.allclose(got, a, rtol=rtol, atol=atol)

        if causal and same(_mha_grads(X, weights, num_heads, G)[name]):
            return [
                Finding(
                    "it is the gradient of the layer WITHOUT the causal mask: with "
                    "causal=True the forward pass hides the later keys, and the backward "
                    "pass must use those masked weights (a masked weight is 0 and its score "
                    "gets no gradient)",
                    "the backward pass goes through the forward pass that was computed, "
                    "mask included",
                )
            ]

        if name.startswith("dW") and same(expected.T):
            return [
                Finding(
                    "it is the transpose of the answer",
                    "the gradient of a weight has the weight's shape, its rows indexed like "
                    "the weight's rows",
                )
            ]
        for other in ("dW_Q", "dW_K", "dW_V", "dW_O"):
            if other != name and same(right[other]):
                return [Finding(msg("this is {other}, not {name}", other=other, name=name))]
        if name == "dX":
            for used in (("Q",), ("K", "V"), ("Q", "V"), ("Q", "K"), ("V",)):
                if same(sum(right[msg("dX via {p}", p=p)] for p in used)):
                    missing = [p for p in "QKV" if p not in used]
                    return [
                        Finding(
                            msg(
                                "only the path(s) through {used} are included; the path(s) through "
                                "{missing} are missing",
                                used=", ".join(used),
                                missing=", ".join(missing),
                            ),
                            "in self-attention X makes the queries, the keys and the values: "
                            "the chain rule adds every path",
                        )
                    ]
        for slip in ("dS = dA", "dS = A * dA"):
            slipped = _mha_grads(X, weights, num_heads, G, causal=causal, softmax_backward=slip)
            if same(slipped[name]):
                return [
                    Finding(
                        msg("it matches the softmax's backward taken as {slip}", slip=slip),
                        'the softmax\'s Jacobian has two terms (chapter 1, "The Jacobian")',
                    )
                ]
        norm = float(np.sum(expected * expected))
        if norm > 0:
            c = float(np.sum(got * expected)) / norm
            if same(c * expected):
                d_k = X.shape[1] // num_heads
                known = {
                    -1.0: ("the sign is flipped", ""),
                    math.sqrt(d_k): (
                        msg(
                            "it is sqrt(d_k) = {sqrt} times too large",
                            sqrt=_fmt_num(math.sqrt(d_k)),
                        ),
                        "the scaling of the scores belongs to their derivative too",
                    ),
                    1 / math.sqrt(d_k): (
                        msg(
                            "it is sqrt(d_k) = {sqrt} times too small",
                            sqrt=_fmt_num(math.sqrt(d_k)),
                        ),
                        "the scaling of the scores enters the gradient once",
                    ),
                }
                for value, (problem, hint) in known.items():
                    if math.isclose(c, value, rel_tol=1e-6):
                        return [Finding(problem, hint)]
                return [Finding(msg("it is {c} times the right gradient", c=_fmt_num(c)))]
        return []

    return diagnose


def _pick(name: str, wrt: tuple[str, ...]) -> Callable[[object], object]:
    def pick(result: object) -> object:
        if isinstance(result, Mapping):
            if name in result:
                return result[name]
            keys = ", ".join(repr(k) for k in result)
            raise _Unusable(
                msg("a dict with keys {keys}", keys=keys) if keys else "an empty dict",
                msg("the result has no entry {name!r}", name=name),
                msg("return a dict with the keys {names}", names=", ".join(repr(k) for k in wrt)),
            )
        if isinstance(result, (tuple, list)) and len(result) == len(wrt):
            return result[wrt.index(name)]
        raise _Unusable(
            type(result).__name__,
            msg(
                "expected a dict of gradients (or a tuple in the order {names})",
                names=", ".join(wrt),
            ),
            msg("return a dict with the keys {names}", names=", ".join(repr(k) for k in wrt)),
        )

    return pick


def check_mha_backward(
    fn: Callable[..., object], *, wrt: Sequence[str] = _GRAD_NAMES, hint: bool = False
) -> CheckReport:
    """Check the reader's gradients of multi-head self-attention.

    Parameters
    ----------
    fn : callable
        ``fn(X, W_Q, W_K, W_V, W_O, num_heads, grad_output, causal=False) -> grads``:
        for the layer ``Y = MHA(X)`` of :func:`check_multi_head_attention`
        (self-attention, no biases, with the causal mask when ``causal`` is true) and
        ``L = sum(grad_output * Y)``, so that ``dL/dY = grad_output`` of shape
        ``(n, d_model)``, returns a dict with the gradients
        named in ``wrt``: ``"dW_Q"``, ``"dW_K"``, ``"dW_V"``, ``"dW_O"`` of shape
        ``(d_model, d_model)`` and ``"dX"`` of shape ``(n, d_model)``, the *total*
        gradient with respect to ``X`` (through ``Q``, ``K`` and ``V``). A tuple in the
        order of ``wrt`` is accepted too.
    wrt : sequence of str, default ("dW_Q", "dW_K", "dW_V", "dW_O", "dX")
        The gradients to check, for an exercise that asks for only some of them.
    hint : bool, default False
        Add a fuller hint to a failing report.

    Returns
    -------
    CheckReport
        Truthy iff every gradient matches, in three layouts (2 heads, 1 head, and 2
        heads with ``causal=True``, passed positionally after ``grad_output``, so a
        function without ``causal`` fails only that one). The report recognises a
        backward pass that ignores the causal mask, a transposed weight gradient,
        gradients swapped between
        weights, ``dX`` missing the path through ``Q``, ``K`` or ``V``, the softmax's
        backward taken as ``dS = dA`` or ``dS = A * dA``, a flipped sign, a missing or
        doubled ``1/sqrt(d_k)``, and any other constant factor.

    Raises
    ------
    ValueError
        If ``wrt`` names an unknown gradient.

    Examples
    --------
    >>> from helpers.checks import check_mha_backward
    >>> def only_weights(X, W_Q, W_K, W_V, W_O, num_heads, grad_output, causal=False):
    ...     return {"dW_Q": W_Q, "dW_K": W_K, "dW_V": W_V, "dW_O": W_O}  # no dX either
    >>> print(check_mha_backward(only_weights, wrt=("dX",)).failures[0].problem)
    the result has no entry 'dX'
    """
    wrt = tuple(wrt)
    unknown = [w for w in wrt if w not in _GRAD_NAMES]
    if unknown or not wrt:
        raise ValueError(
            localize(
                msg(
                    "wrt must name some of {names}; got {wrt!r}",
                    names=", ".join(_GRAD_NAMES),
                    wrt=wrt,
                )
            )
        )
    layouts = (
        ("2 heads", 20, 4, 6, 2, False),
        ("1 head", 21, 3, 4, 1, False),
        ("2 heads, causal", 22, 4, 6, 2, True),
    )
    texts = {
        "2 heads": "each gradient has the shape of its array; dX is the total gradient, "
        "through the queries, the keys and the values",
        "1 head": "one head: chapter 2's gradients of attention, with the projections and W_O",
        "2 heads, causal": "with causal=True the backward pass goes through the masked "
        "forward pass: a hidden key's weight is 0",
    }
    specs = []
    for label, seed, n, d_model, h, causal in layouts:
        X, weights = _random_layer(seed, n, d_model)
        G = np.random.default_rng(seed + 100).normal(size=(n, d_model))
        right = _mha_grads(X, weights, h, G, causal=causal)
        arrange = _heads_before_last(h)
        if causal:
            arrange = _then_true(arrange)
        for name in wrt:
            specs.append(
                _Spec(
                    Case(
                        msg("{name} ({label})", name=name, label=label),
                        {"X": X, **weights, "grad_output": G},
                        right[name],
                        texts[label],
                    ),
                    arrange,
                    _shapes_line(
                        X,
                        weights,
                        msg("num_heads = {h}", h=h),
                        msg("grad_output: {g_shape}", g_shape=G.shape),
                        msg("causal = {causal}", causal=causal),
                    ),
                    _backward_diagnose(name, h, causal),
                    _pick(name, wrt),
                )
            )
    return _run(
        fn,
        "check_mha_backward",
        specs,
        see=section(2, "The backward pass"),
        more="go backwards through the layer: the output projection first (its weight and "
        "the concatenated heads), then each head's attention backward pass with the mask of "
        "the forward pass, then the three projections of X, whose paths into X add up",
        hint=hint,
    )

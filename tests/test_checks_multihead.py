"""Tests of chapter 3's self-checks: right answers pass, typical wrong answers are named."""

from __future__ import annotations

import numpy as np
import pytest

import helpers
from helpers.checks import (
    check_mha_backward,
    check_mha_parameter_count,
    check_multi_head_attention,
)
from tests.report_text import assert_refused, failed, flat

# ---------------------------------------------------------------------------
# From-scratch answers, as a reader would write them
# ---------------------------------------------------------------------------


def reader_mha(
    X,
    W_Q,
    W_K,
    W_V,
    W_O,
    num_heads,
    causal=False,
    *,
    split="blocks",
    merge="blocks",
    divide_by="d_k",
    use_W_O=True,
    mask="past",
    transposed=False,
    softmax_axis=-1,
):
    """A vectorised NumPy layer; the keyword arguments reproduce the usual slips."""
    n, d_model = X.shape
    h = num_heads
    d_k = d_model // h
    W = {"Q": W_Q, "K": W_K, "V": W_V, "O": W_O}
    if transposed:
        W = {k: w.T for k, w in W.items()}

    def heads(M):
        if split == "blocks":
            return M.reshape(n, h, d_k).transpose(1, 0, 2)
        return M.reshape(n, d_k, h).transpose(2, 0, 1)

    Q, K, V = heads(X @ W["Q"]), heads(X @ W["K"]), heads(X @ W["V"])
    S = Q @ K.transpose(0, 2, 1) / np.sqrt({"d_k": d_k, "d_model": d_model, "none": 1}[divide_by])
    if causal and mask != "none":
        lower = np.tril(np.ones((n, n), dtype=bool))
        S = np.where(lower if mask == "past" else lower.T, S, -np.inf)
    A = np.exp(S - S.max(axis=softmax_axis, keepdims=True))
    A = A / A.sum(axis=softmax_axis, keepdims=True)
    out = A @ V  # (h, n, d_k)
    if merge == "blocks":
        C = out.transpose(1, 0, 2).reshape(n, d_model)
    elif merge == "interleaved":
        C = out.transpose(1, 2, 0).reshape(n, d_model)
    else:
        C = out.reshape(n, d_model)
    return C @ W["O"] if use_W_O else C


def loop_mha(X, W_Q, W_K, W_V, W_O, num_heads, causal=False):
    """The other common correct answer: a loop over heads with column slices."""
    n, d_model = X.shape
    d_k = d_model // num_heads
    heads = []
    for i in range(num_heads):
        cols = slice(i * d_k, (i + 1) * d_k)
        Q, K, V = X @ W_Q[:, cols], X @ W_K[:, cols], X @ W_V[:, cols]
        S = Q @ K.T / np.sqrt(d_k)
        if causal:
            S[np.triu_indices(n, k=1)] = -np.inf
        A = np.exp(S - S.max(axis=1, keepdims=True))
        heads.append(A / A.sum(axis=1, keepdims=True) @ V)
    return np.hstack(heads) @ W_O


def helpers_mha(X, W_Q, W_K, W_V, W_O, num_heads, causal=False):
    mask = helpers.causal_mask(len(X)) if causal else None
    return helpers.multi_head_attention(X, X, W_Q, W_K, W_V, W_O, num_heads, mask)[0]


def without_causal_argument(X, W_Q, W_K, W_V, W_O, num_heads):
    return reader_mha(X, W_Q, W_K, W_V, W_O, num_heads)


def slip(**kwargs):
    def fn(X, W_Q, W_K, W_V, W_O, num_heads, causal=False):
        return reader_mha(X, W_Q, W_K, W_V, W_O, num_heads, causal, **kwargs)

    fn.__name__ = "mha_" + "_".join(f"{k}_{v}" for k, v in kwargs.items())
    return fn


MHA_CASES = [
    "2 heads",
    "one head (h = 1)",
    "4 heads of width 2",
    "2 heads, causal",
    "4 heads, causal",
]
MULTI_HEAD_CASES = [c for c in MHA_CASES if c != "one head (h = 1)"]
CAUSAL_CASES = ["2 heads, causal", "4 heads, causal"]

# ---------------------------------------------------------------------------
# check_multi_head_attention
# ---------------------------------------------------------------------------


def test_the_books_layer_is_refused():
    assert_refused(
        check_multi_head_attention(helpers_mha), "helpers.multihead.multi_head_attention"
    )


@pytest.mark.parametrize("fn", [reader_mha, loop_mha], ids=lambda f: f.__name__)
def test_correct_layers_pass(fn):
    report = check_multi_head_attention(fn)
    assert report
    assert [r.name for r in report.results] == MHA_CASES
    text = flat(report)
    assert f"check_multi_head_attention({fn.__name__}): All 5 checks passed" in text
    assert "FAILED" not in text


def test_a_layer_without_the_causal_argument_fails_only_the_causal_cases():
    report = check_multi_head_attention(without_causal_argument)
    assert set(failed(report)) == set(CAUSAL_CASES)
    assert "raised TypeError" in report.failures[0].got


@pytest.mark.parametrize(
    ("slips", "cases", "problem", "hint"),
    [
        (
            {"split": "interleaved"},
            MULTI_HEAD_CASES,
            "the heads' columns are interleaved: head i got columns i, i + h, i + 2h, ... "
            "(a reshape to (n, d_k, h))",
            "head i owns d_k consecutive columns of Q, K and V",
        ),
        (
            {"split": "interleaved", "merge": "interleaved"},
            MULTI_HEAD_CASES,
            ("the heads' columns are interleaved", "the heads are merged column-interleaved"),
            "head i owns d_k consecutive columns of Q, K and V",
        ),
        (
            {"merge": "no transpose"},
            MULTI_HEAD_CASES,
            "reshaping (h, n, d_k) straight to (n, h*d_k), which mixes up the tokens",
            "the merge undoes the split",
        ),
        (
            {"divide_by": "d_model"},
            MULTI_HEAD_CASES,
            "the scores are divided by sqrt(d_model) = sqrt(4) instead of sqrt(d_k) = sqrt(2)",
            "each head scales its scores by its own width",
        ),
        (
            {"divide_by": "none"},
            MHA_CASES,
            "the scores are not divided by sqrt(d_k)",
            "each head scales its scores as chapter 2's attention does",
        ),
        (
            {"use_W_O": False},
            MHA_CASES,
            "the concatenation of the heads, without the output projection W_O",
            "the layer ends with the output projection",
        ),
        (
            {"transposed": True},
            MHA_CASES,
            "the weights are applied transposed",
            "the book's tokens are rows multiplied on the right by the weights",
        ),
        (
            {"mask": "none"},
            CAUSAL_CASES,
            "the causal mask is not applied: query i also attends to later keys",
            "with causal=True, query i may attend to the keys j <= i only",
        ),
        (
            {"mask": "future"},
            CAUSAL_CASES,
            "the mask is the wrong way round: query i attends to keys j >= i",
            "row i is query i and column j is key j",
        ),
        (
            {"softmax_axis": -2},
            MHA_CASES,
            "the softmax is taken over the queries (axis -2)",
            "each query's weights sum to 1 over the keys",
        ),
        (
            {"divide_by": "d_model", "use_W_O": False},
            MHA_CASES,
            "divided by sqrt(d_model) = sqrt(4) instead of sqrt(d_k) = sqrt(2), d_k = d_model "
            "/ num_heads; the output is the concatenation of the heads, without the output "
            "projection W_O",
            "each head scales its scores by its own width",
        ),
    ],
    ids=[
        "interleaved split",
        "interleaved split and merge",
        "merge without transpose",
        "sqrt(d_model)",
        "no scale",
        "no W_O",
        "X @ W.T",
        "no causal mask",
        "mask reversed",
        "softmax over queries",
        "sqrt(d_model) and no W_O",
    ],
)
def test_wrong_layers_are_diagnosed(slips, cases, problem, hint):
    report = check_multi_head_attention(slip(**slips))
    assert not report
    problems = failed(report)
    assert set(problems) == set(cases)
    first = report.failures[0]
    for part in (problem,) if isinstance(problem, str) else problem:
        assert part in problems[first.name]
    assert hint in " ".join(first.hint.split())


def test_one_big_head_is_recognised():
    def one_head(X, W_Q, W_K, W_V, W_O, num_heads, causal=False):
        return reader_mha(X, W_Q, W_K, W_V, W_O, 1, causal, divide_by="d_model")

    problems = failed(check_multi_head_attention(one_head))
    assert set(problems) == set(MULTI_HEAD_CASES)
    assert "a single attention over all d_model columns" in problems["2 heads"]


def test_the_scale_slip_of_the_4_head_case_names_its_own_widths():
    report = check_multi_head_attention(slip(divide_by="d_model"))
    assert (
        "sqrt(d_model) = sqrt(8) instead of sqrt(d_k) = sqrt(2)"
        in failed(report)["4 heads of width 2"]
    )


def test_the_report_shows_shapes_and_numbers_not_whole_matrices_of_input():
    report = check_multi_head_attention(slip(use_W_O=False))
    first = report.failures[0]
    assert first.input == (
        "X: (3, 4); W_Q, W_K, W_V, W_O: (4, 4) each; num_heads = 2; causal = False"
    )
    assert 'FAILED: 4 heads, causal: the same problem as "2 heads"' in flat(report)

    def noisy(X, W_Q, W_K, W_V, W_O, num_heads, causal=False):  # values differ everywhere
        return reader_mha(X, W_Q, W_K, W_V, W_O, num_heads, causal) + 0.01

    text = flat(check_multi_head_attention(noisy))  # the smallest case whole, the others briefly
    assert text.count("input:") == 1 and "FAILED: 4 heads, causal: values differ" in text
    assert first.expected.count("\n") == 2  # the (3, 4) output, row by row


def test_an_undiagnosed_wrong_answer_gets_a_property_not_the_formula():
    def noisy(X, W_Q, W_K, W_V, W_O, num_heads, causal=False):
        return reader_mha(X, W_Q, W_K, W_V, W_O, num_heads, causal) + 0.01

    report = check_multi_head_attention(noisy)
    assert set(failed(report)) == set(MHA_CASES)
    assert "values differ" in report.failures[0].problem
    assert "two heads, each on d_k = 2 columns of Q, K and V" in flat(report)
    assert "concat" not in flat(check_multi_head_attention(noisy, hint=True))


def test_wrong_shape_and_in_place_changes_are_reported():
    def per_head(X, W_Q, W_K, W_V, W_O, num_heads, causal=False):
        return np.zeros((num_heads, *X.shape))

    def scales_x(X, W_Q, W_K, W_V, W_O, num_heads, causal=False):
        X /= 1.0  # harmless value, but an in-place write all the same
        X += 0.0
        out = reader_mha(X, W_Q, W_K, W_V, W_O, num_heads, causal)
        X += 1.0
        return out

    assert (
        "expected shape (3, 4), got shape (2, 3, 4)"
        in failed(check_multi_head_attention(per_head))["2 heads"]
    )
    report = check_multi_head_attention(scales_x)
    assert "changed its input X in place" in failed(report)["2 heads"]
    assert "compute new arrays rather than writing into an argument" in report.failures[0].hint


def test_passing_a_result_instead_of_a_function_is_a_type_error():
    with pytest.raises(TypeError, match=r"check_multi_head_attention expects your function"):
        check_multi_head_attention(np.zeros((3, 4)))


def test_the_report_is_deterministic():
    text = repr(check_multi_head_attention(slip(split="interleaved")))
    with np.printoptions(precision=2, suppress=True, linewidth=40):
        assert repr(check_multi_head_attention(slip(split="interleaved"))) == text
    assert "0x" not in text


# ---------------------------------------------------------------------------
# check_mha_parameter_count
# ---------------------------------------------------------------------------

COUNT_CASES = [
    "d_model = 512, 8 heads, with biases",
    "d_model = 512, 8 heads, no biases",
    "d_model = 64, 1 head",
    "d_model = 64, 16 heads",
    "d_model = 768, 12 heads (BERT-base)",
]


def right_count(d_model, num_heads, bias):
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def helpers_count(d_model, num_heads, bias):
    return helpers.mha_parameter_count(d_model, num_heads, bias=bias)


def per_head_count(d_model, num_heads, bias):
    d_k = d_model // num_heads
    return num_heads * 3 * d_model * d_k + d_model * d_model + (4 * d_model if bias else 0)


def test_the_books_count_is_refused():
    assert_refused(
        check_mha_parameter_count(helpers_count), "helpers.multihead.mha_parameter_count"
    )


@pytest.mark.parametrize("fn", [right_count, per_head_count])
def test_correct_counts_pass(fn):
    report = check_mha_parameter_count(fn)
    assert report
    assert [r.name for r in report.results] == COUNT_CASES
    assert "All 5 checks passed" in flat(report)


@pytest.mark.parametrize(
    ("fn", "cases", "problem", "hint"),
    [
        (
            lambda d, h, b: 3 * h * d * d + d * d + (4 * d if b else 0),
            set(COUNT_CASES) - {"d_model = 64, 1 head"},
            "each head's W_Q^(i), W_K^(i), W_V^(i) were counted as d_model x d_model",
            "each head's W_Q^(i) has d_model / num_heads columns",
        ),
        (
            lambda d, h, b: 4 * h * d * d + (4 * d if b else 0),
            set(COUNT_CASES) - {"d_model = 64, 1 head"},
            "counted as d_model x d_model, W_O as well",
            "the heads split the columns of one projection among them",
        ),
        (
            lambda d, h, b: 4 * d * d,
            set(COUNT_CASES) - {"d_model = 512, 8 heads, no biases"},
            "the biases are missing",
            "a bias has one entry per output coordinate of its projection",
        ),
        (
            lambda d, h, b: 3 * d * d + (3 * d if b else 0),
            set(COUNT_CASES),
            "W_O (d_model x d_model) and its bias are missing",
            "the layer has four projections, the output projection W_O included",
        ),
        (
            lambda d, h, b: 4 * d * d + 4 * d,
            {"d_model = 512, 8 heads, no biases"},
            "biases were counted, but bias=False means there are none",
            "with bias=False the projections have weights only",
        ),
        (
            lambda d, h, b: 4 * d * d + (3 * h * d + d if b else 0),
            set(COUNT_CASES) - {"d_model = 512, 8 heads, no biases", "d_model = 64, 1 head"},
            "the biases were counted per head as d_model each",
            "the heads split a bias vector as they split the projection's columns",
        ),
        (
            lambda d, h, b: 4 * d * (d // h) + (4 * (d // h) if b else 0),
            set(COUNT_CASES) - {"d_model = 64, 1 head"},
            "this counts the matrices of a single head (d_model x d_k)",
            "the layer has num_heads heads",
        ),
    ],
    ids=[
        "per-head d x d",
        "W_O per head too",
        "no biases",
        "no W_O",
        "biases when none",
        "biases per head",
        "one head",
    ],
)
def test_wrong_counts_are_diagnosed(fn, cases, problem, hint):
    report = check_mha_parameter_count(fn)
    assert not report
    problems = failed(report)
    assert set(problems) == cases
    first = report.failures[0]
    assert problem in problems[first.name]
    assert hint in " ".join(first.hint.split())


def test_counts_must_be_exact():
    report = check_mha_parameter_count(lambda d, h, b: right_count(d, h, b) + 1)
    assert set(failed(report)) == set(COUNT_CASES)
    assert "d_model = 512, num_heads = 8, bias = True" in flat(report)
    first = report.failures[0]
    assert (first.expected, first.got) == ("1050624", "1050625")  # not 6 digits: 1.05062e+06
    assert "largest difference 1" in first.problem
    halves = check_mha_parameter_count(lambda d, h, b: right_count(d, h, b) + 0.5)
    assert halves.failures[0].got == "1050624.5"


def test_count_arguments_are_python_numbers():
    seen = []

    def spy(d_model, num_heads, bias):
        seen.append((type(d_model), type(num_heads), type(bias)))
        return right_count(d_model, num_heads, bias)

    assert check_mha_parameter_count(spy)
    assert set(seen) == {(int, int, bool)}


# ---------------------------------------------------------------------------
# check_mha_backward
# ---------------------------------------------------------------------------

GRAD_NAMES = ["dW_Q", "dW_K", "dW_V", "dW_O", "dX"]


def helpers_grads(X, W_Q, W_K, W_V, W_O, num_heads, grad_output, causal=False):
    mask = helpers.causal_mask(len(X)) if causal else None
    g = helpers.multi_head_attention_backward(
        X, X, W_Q, W_K, W_V, W_O, num_heads, grad_output, mask=mask
    )
    return {**g, "dX": g["dX_q"] + g["dX_kv"]}


def reader_grads(X, W_Q, W_K, W_V, W_O, num_heads, grad_output, causal=False, *, slip_=None):
    """A from-scratch backward pass, loop-free over heads; ``slip_`` reproduces slips."""
    n, d_model = X.shape
    h, d_k = num_heads, d_model // num_heads

    def split(M):
        return M.reshape(n, h, d_k).transpose(1, 0, 2)

    def merge(M):
        return M.transpose(1, 0, 2).reshape(n, d_model)

    Q, K, V = split(X @ W_Q), split(X @ W_K), split(X @ W_V)
    S = Q @ K.transpose(0, 2, 1) / np.sqrt(d_k)
    if causal and slip_ != "mask ignored":
        S = np.where(np.tril(np.ones((n, n), dtype=bool)), S, -np.inf)
    A = np.exp(S - S.max(axis=-1, keepdims=True))
    A /= A.sum(axis=-1, keepdims=True)
    C = merge(A @ V)
    G = grad_output
    dC = split(G @ W_O.T)
    dV = A.transpose(0, 2, 1) @ dC
    dA = dC @ V.transpose(0, 2, 1)
    dS = A * (dA - (dA * A).sum(axis=-1, keepdims=True))
    if slip_ == "dS = dA":
        dS = dA
    scale = 1.0 if slip_ == "no scale" else 1 / np.sqrt(d_k)
    dQ, dK = merge(dS @ K) * scale, merge(dS.transpose(0, 2, 1) @ Q) * scale
    dV = merge(dV)
    grads = {
        "dW_Q": X.T @ dQ,
        "dW_K": X.T @ dK,
        "dW_V": X.T @ dV,
        "dW_O": C.T @ G,
        "dX": dQ @ W_Q.T + dK @ W_K.T + dV @ W_V.T,
    }
    if slip_ == "dW_O transposed":
        grads["dW_O"] = G.T @ C
    if slip_ == "query path only":
        grads["dX"] = dQ @ W_Q.T
    if slip_ == "no value path":
        grads["dX"] = dQ @ W_Q.T + dK @ W_K.T
    if slip_ == "swapped":
        grads["dW_Q"], grads["dW_K"] = grads["dW_K"], grads["dW_Q"]
    if slip_ == "sign":
        grads["dW_V"] = -grads["dW_V"]
    if slip_ == "factor":
        grads["dW_V"] = 2.5 * grads["dW_V"]
    return grads


def reader_slip(name):
    def fn(X, W_Q, W_K, W_V, W_O, num_heads, grad_output, causal=False):
        return reader_grads(X, W_Q, W_K, W_V, W_O, num_heads, grad_output, causal, slip_=name)

    fn.__name__ = "grads_" + name.replace(" ", "_")
    return fn


def test_the_books_gradients_are_refused():
    assert_refused(
        check_mha_backward(helpers_grads), "helpers.multihead.multi_head_attention_backward"
    )


@pytest.mark.parametrize("fn", [reader_grads], ids=lambda f: f.__name__)
def test_correct_gradients_pass(fn):
    report = check_mha_backward(fn)
    assert report
    assert [r.name for r in report.results] == [
        f"{g} ({layout})" for layout in ("2 heads", "1 head", "2 heads, causal") for g in GRAD_NAMES
    ]
    assert "All 15 checks passed" in flat(report)


def test_a_tuple_in_the_order_of_wrt_is_accepted():
    def as_tuple(*args):
        g = reader_grads(*args)
        return g["dW_O"], g["dX"]

    assert check_mha_backward(as_tuple, wrt=("dW_O", "dX"))
    report = check_mha_backward(as_tuple, wrt=("dX", "dW_O"))
    assert set(failed(report)) == {
        "dX (2 heads)",
        "dW_O (2 heads)",
        "dX (1 head)",
        "dW_O (1 head)",
        "dX (2 heads, causal)",
        "dW_O (2 heads, causal)",
    }


@pytest.mark.parametrize(
    ("name", "cases", "problem"),
    [
        ("dW_O transposed", {"dW_O"}, "it is the transpose of the answer"),
        (
            "query path only",
            {"dX"},
            "only the path(s) through Q are included; the path(s) through K, V are missing",
        ),
        (
            "no value path",
            {"dX"},
            "only the path(s) through Q, K are included; the path(s) through V are missing",
        ),
        ("swapped", {"dW_Q", "dW_K"}, "this is dW_K, not dW_Q"),
        ("sign", {"dW_V"}, "the sign is flipped"),
        ("factor", {"dW_V"}, "it is 2.5 times the right gradient"),
        ("dS = dA", {"dW_Q", "dW_K", "dX"}, "it matches the softmax's backward taken as dS = dA"),
    ],
)
def test_wrong_gradients_are_diagnosed(name, cases, problem):
    report = check_mha_backward(reader_slip(name))
    assert not report
    problems = failed(report)
    assert {k.split(" ")[0] for k in problems} == cases
    assert problem in problems[report.failures[0].name]


def test_a_missing_scale_in_the_backward_is_named():
    report = check_mha_backward(reader_slip("no scale"), wrt=("dW_Q",))
    problems = failed(report)
    assert "it is sqrt(d_k) = 1.73205 times too large" in problems["dW_Q (2 heads)"]
    assert "it is sqrt(d_k) = 2 times too large" in problems["dW_Q (1 head)"]
    assert "the scaling of the scores belongs to their derivative too" in flat(report)


def test_a_missing_entry_or_a_non_dict_result_is_explained():
    def missing(*args):
        g = reader_grads(*args)
        del g["dW_K"]
        return g

    report = check_mha_backward(missing)
    assert set(failed(report)) == {"dW_K (2 heads)", "dW_K (1 head)", "dW_K (2 heads, causal)"}
    first = report.failures[0]
    assert first.problem == "the result has no entry 'dW_K'"
    assert first.got == "a dict with keys 'dW_Q', 'dW_V', 'dW_O', 'dX'"
    assert "return a dict with the keys 'dW_Q', 'dW_K', 'dW_V', 'dW_O', 'dX'" in flat(report)

    report = check_mha_backward(lambda *args: np.zeros((4, 6)))
    assert len(report.failures) == 15
    assert "expected a dict of gradients" in report.failures[0].problem


def test_gradient_report_shows_shapes():
    report = check_mha_backward(reader_slip("sign"), wrt=("dW_V",))
    assert report.failures[0].input == (  # the smallest failing case first: one head
        "X: (3, 4); W_Q, W_K, W_V, W_O: (4, 4) each; num_heads = 1; grad_output: (3, 4); "
        "causal = False"
    )


@pytest.mark.parametrize("wrt", [(), ("dW_X",), ("dX_q",)])
def test_wrt_must_name_known_gradients(wrt):
    with pytest.raises(ValueError, match=r"wrt must name some of dW_Q, dW_K, dW_V, dW_O, dX"):
        check_mha_backward(reader_grads, wrt=wrt)


def test_checks_are_reexported():
    for name in ("check_multi_head_attention", "check_mha_parameter_count", "check_mha_backward"):
        assert name in helpers.checks.__all__
        assert getattr(helpers.checks, name).__module__ == "helpers.checks.multihead"


def test_a_backward_pass_that_ignores_the_causal_mask_fails_the_causal_case():
    """The exercise asks for causal=True; a backward pass that forgets the mask used to
    pass, because every case was unmasked."""
    report = check_mha_backward(reader_slip("mask ignored"))
    problems = failed(report)
    assert set(problems) == {f"{g} (2 heads, causal)" for g in GRAD_NAMES}
    for problem in problems.values():
        assert "it is the gradient of the layer WITHOUT the causal mask" in problem
    assert "the backward pass goes through the forward pass that was computed" in flat(report)


def test_a_backward_pass_without_the_causal_argument_fails_only_the_causal_case():
    def no_causal(X, W_Q, W_K, W_V, W_O, num_heads, grad_output):
        return reader_grads(X, W_Q, W_K, W_V, W_O, num_heads, grad_output)

    report = check_mha_backward(no_causal)
    assert set(failed(report)) == {f"{g} (2 heads, causal)" for g in GRAD_NAMES}
    assert "TypeError" in report.failures[0].got

"""Tests of chapter 6's self-checks: right answers pass, typical wrong answers are named."""

from __future__ import annotations

import numpy as np
import pytest

import helpers
from helpers.checks import (
    check_block_parameter_count,
    check_encoder_block,
    check_layer_norm,
    check_layer_norm_backward,
    check_llama_block_parameter_count,
    check_rms_norm_backward,
)
from tests.report_text import assert_all_passed, assert_refused, failed, flat

# ---------------------------------------------------------------------------
# check_layer_norm
# ---------------------------------------------------------------------------


def reader_ln(x, gamma, beta, eps, *, slip=None):
    """Layer norm as a reader writes it; ``slip`` reproduces a usual mistake."""
    axis = 0 if slip == "axis 0" else -1
    mu = x.mean(axis=axis, keepdims=True)
    if slip == "one pass":
        var = (x * x).mean(axis=-1, keepdims=True) - mu * mu
    else:
        var = x.var(axis=axis, keepdims=True, ddof=1 if slip in ("ddof=1", "annotated") else 0)
    if slip in ("annotated", "std + eps"):
        x_hat = (x - mu) / (np.sqrt(var) + eps)
    elif slip == "no eps":
        x_hat = (x - mu) / np.sqrt(var)
    else:
        x_hat = (x - mu) / np.sqrt(var + eps)
    if slip == "no gamma":
        return x_hat + beta
    if slip == "no beta":
        return gamma * x_hat
    if slip == "swapped":
        return beta * x_hat + gamma
    return gamma * x_hat + beta


def helpers_ln(x, gamma, beta, eps):
    return helpers.layer_norm(x, gamma, beta, eps=float(eps))


def ln_with_slip(slip):
    def fn(x, gamma, beta, eps):
        return reader_ln(x, gamma, beta, eps, slip=slip)

    fn.__name__ = "ln_" + slip.replace(" ", "_")
    return fn


LN_CASES = [
    "random rows",
    "a batch of sequences",
    "a large common offset",
    "a constant row",
    "d = 2",
]


def test_the_books_layer_norm_is_refused():
    assert_refused(check_layer_norm(helpers_ln), "helpers.transformer.layer_norm")


@pytest.mark.parametrize("fn", [reader_ln], ids=["reader"])
def test_correct_layer_norms_pass(fn):
    report = check_layer_norm(fn)
    assert_all_passed(report)
    assert [r.name for r in report.results] == LN_CASES


@pytest.mark.parametrize(
    ("slip", "cases", "problem"),
    [
        ("ddof=1", LN_CASES[:3] + LN_CASES[4:], "divided by d - 1"),
        ("annotated", LN_CASES[:3] + LN_CASES[4:], "added to the (unbiased) standard deviation"),
        ("axis 0", LN_CASES, "normalised over the rows (axis 0"),
        ("one pass", ["a large common offset"], "cancels catastrophically"),
        ("no gamma", LN_CASES, "gamma is not applied"),
        ("no beta", LN_CASES, "beta is not added"),
        ("swapped", LN_CASES, "gamma and beta are swapped"),
    ],
)
def test_layer_norm_slips_are_named(slip, cases, problem):
    report = check_layer_norm(ln_with_slip(slip))
    assert not report
    problems = failed(report)
    assert set(cases) <= set(problems)
    assert any(problem in text for text in problems.values()), problems


def test_biased_std_plus_eps_is_named():
    def fn(x, gamma, beta, eps):
        mu = x.mean(axis=-1, keepdims=True)
        return gamma * (x - mu) / (x.std(axis=-1, keepdims=True) + eps) + beta

    problems = failed(check_layer_norm(fn))
    assert "eps is added to the standard deviation" in problems["d = 2"]


def test_layer_norm_without_eps_is_named_and_fails_on_the_constant_row_with_a_hint():
    report = check_layer_norm(ln_with_slip("no eps"))
    problems = failed(report)
    assert set(problems) == set(LN_CASES)
    assert "nan" in problems["a constant row"]
    assert "variance 0" in flat(report)
    assert "eps is missing" in problems["d = 2"]


# ---------------------------------------------------------------------------
# check_layer_norm_backward
# ---------------------------------------------------------------------------


def reader_ln_backward(grad_y, x, gamma, eps, *, slip=None):
    d = x.shape[-1]
    mu = x.mean(axis=-1, keepdims=True)
    rstd = 1 / np.sqrt(x.var(axis=-1, keepdims=True, ddof=1 if slip == "ddof=1" else 0) + eps)
    x_hat = (x - mu) * rstd
    g = grad_y if slip == "no gamma" else grad_y * gamma
    mean_g = g.mean(axis=-1, keepdims=True)
    mean_gx = (g * x_hat).mean(axis=-1, keepdims=True)
    if slip == "no mean term":
        dx = (g - x_hat * mean_gx) * rstd
    elif slip == "no x_hat term":
        dx = (g - mean_g) * rstd
    elif slip == "diagonal":
        dx = g * rstd
    else:
        dx = (g - mean_g - x_hat * mean_gx) * rstd
    scaled = x - mu if slip == "x" else x_hat
    dgamma = (grad_y * scaled).reshape(-1, d).sum(axis=0)
    dbeta = grad_y.reshape(-1, d).sum(axis=0)
    if slip == "not summed":
        dgamma, dbeta = grad_y * x_hat, grad_y
    if slip == "mean":
        dgamma, dbeta = dgamma / (x.size // d), dbeta / (x.size // d)
    if slip == "sign":
        dgamma, dbeta = -dgamma, -dbeta
    if slip == "dict":
        return {"dx": dx, "dgamma": dgamma, "dbeta": dbeta}
    return dx, dgamma, dbeta


def helpers_ln_backward(grad_y, x, gamma, eps):
    return helpers.layer_norm_backward(grad_y, x, gamma, eps=float(eps))


def backward_with_slip(slip):
    def fn(grad_y, x, gamma, eps):
        return reader_ln_backward(grad_y, x, gamma, eps, slip=slip)

    fn.__name__ = "ln_backward_" + slip.replace(" ", "_")
    return fn


@pytest.mark.parametrize(
    "fn", [reader_ln_backward, backward_with_slip("dict")], ids=["reader", "dict"]
)
def test_correct_layer_norm_backwards_pass(fn):
    assert_all_passed(check_layer_norm_backward(fn))


def test_the_books_layer_norm_backward_is_refused():
    assert_refused(
        check_layer_norm_backward(helpers_ln_backward), "helpers.transformer.layer_norm_backward"
    )


@pytest.mark.parametrize(
    ("slip", "names", "problem"),
    [
        ("no mean term", ["dx"], "the term - mean(g) is missing"),
        ("no x_hat term", ["dx"], "the term - x_hat * mean(g * x_hat) is missing"),
        ("diagonal", ["dx"], "only the diagonal of the Jacobian"),
        ("no gamma", ["dx"], "not multiplied by gamma"),
        ("ddof=1", ["dx", "dgamma"], "unbiased variance"),
        ("x", ["dgamma"], "dgamma is sum(grad_y * (x - mean))"),
        ("sign", ["dgamma", "dbeta"], "the sign is flipped"),
        ("mean", ["dgamma", "dbeta"], "the mean over the rows (tokens) instead of the sum"),
    ],
)
def test_layer_norm_backward_slips_are_named(slip, names, problem):
    report = check_layer_norm_backward(backward_with_slip(slip))
    problems = failed(report)
    wrong = {name.split(" ")[0] for name in problems}
    assert wrong == set(names)
    assert all(problem in text for text in problems.values()), problems


def test_layer_norm_backward_not_summed_over_rows_is_named():
    report = check_layer_norm_backward(backward_with_slip("not summed"))
    problems = failed(report)
    assert set(problems) == {
        f"{g} ({lay})" for g in ("dgamma", "dbeta") for lay in ("rows", "a batch of sequences")
    }
    for name, text in problems.items():
        assert f"{name.split()[0]} is not summed over the tokens" in text, problems
    assert "has the shape of gamma, (d,)" in flat(report)


def test_layer_norm_backward_missing_key_is_reported():
    def fn(grad_y, x, gamma, eps):
        dx, dgamma, _ = reader_ln_backward(grad_y, x, gamma, eps)
        return {"dx": dx, "dgamma": dgamma}

    problems = failed(check_layer_norm_backward(fn))
    assert set(problems) == {"dbeta (rows)", "dbeta (a batch of sequences)"}
    assert all("no entry 'dbeta'" in p for p in problems.values())


# ---------------------------------------------------------------------------
# check_rms_norm_backward
# ---------------------------------------------------------------------------


def reader_rms_backward(grad_y, x, gamma, eps, *, slip=None):
    """RMSNorm's backward pass as a reader writes it; ``slip`` reproduces a usual mistake."""
    d = x.shape[-1]
    r = np.sqrt((x**2).mean(axis=-1, keepdims=True) + (0 if slip == "no eps" else eps))
    x_hat = x / r
    g = grad_y if slip == "no gamma" else grad_y * gamma
    mean_gx = (g * x_hat).mean(axis=-1, keepdims=True)
    if slip == "layer norm":
        dx = (g - g.mean(axis=-1, keepdims=True) - x_hat * mean_gx) / r
    elif slip == "diagonal":
        dx = g / r
    elif slip == "sum":
        dx = (g - x_hat * (g * x_hat).sum(axis=-1, keepdims=True)) / r
    else:
        dx = (g - x_hat * mean_gx) / r
    dgamma = (grad_y * (x if slip == "x" else x_hat)).reshape(-1, d).sum(axis=0)
    if slip == "not summed":
        dgamma = grad_y * x_hat
    if slip == "mean":
        dgamma = dgamma / (x.size // d)
    if slip == "sign":
        dx, dgamma = -dx, -dgamma
    if slip == "dict":
        return {"dx": dx, "dgamma": dgamma}
    return dx, dgamma


def rms_backward_with_slip(slip):
    def fn(grad_y, x, gamma, eps):
        return reader_rms_backward(grad_y, x, gamma, eps, slip=slip)

    fn.__name__ = "rms_backward_" + slip.replace(" ", "_")
    return fn


def test_rms_backward_reference_equals_autograd():
    torch = pytest.importorskip("torch")
    from helpers.checks.transformer import _rms_grads

    rng = np.random.default_rng(5)
    x, G = rng.normal(size=(2, 3, 5)) + 0.7, rng.normal(size=(2, 3, 5))
    gamma = 1 + 0.5 * rng.normal(size=5)
    xt = torch.tensor(x, requires_grad=True)
    gt = torch.tensor(gamma, requires_grad=True)
    y = torch.nn.functional.rms_norm(xt, (5,), weight=gt, eps=0.5)
    assert np.allclose(y.detach().numpy(), helpers.rms_norm(x, gamma, eps=0.5), atol=1e-14)
    (y * torch.tensor(G)).sum().backward()
    ours = _rms_grads(G, x, gamma, 0.5)
    assert np.allclose(ours["dx"], xt.grad.numpy(), atol=1e-12)  # float64 autograd
    assert np.allclose(ours["dgamma"], gt.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize(
    "fn", [reader_rms_backward, rms_backward_with_slip("dict")], ids=["reader", "dict"]
)
def test_correct_rms_backwards_pass(fn):
    assert_all_passed(check_rms_norm_backward(fn))


@pytest.mark.parametrize(
    ("slip", "names", "problem"),
    [
        ("layer norm", ["dx"], "it is layer norm's backward pass"),
        ("diagonal", ["dx"], "only the diagonal of the Jacobian"),
        ("sum", ["dx"], "the term through r is d times too large"),
        ("no gamma", ["dx"], "not multiplied by gamma"),
        ("no eps", ["dx", "dgamma"], "eps is missing from r"),
        ("x", ["dgamma"], "dgamma is sum(grad_y * x) instead of sum(grad_y * x / r)"),
        ("mean", ["dgamma"], "the mean over the rows (tokens) instead of the sum"),
        ("not summed", ["dgamma"], "dgamma is not summed over the tokens"),
        ("sign", ["dx", "dgamma"], "the sign is flipped"),
    ],
)
def test_rms_backward_slips_are_named(slip, names, problem):
    report = check_rms_norm_backward(rms_backward_with_slip(slip))
    problems = failed(report)
    assert {name.split(" ")[0] for name in problems} == set(names)
    assert all(problem in text for text in problems.values()), problems


# ---------------------------------------------------------------------------
# check_llama_block_parameter_count
# ---------------------------------------------------------------------------


def right_llama(d_model, d_ff):
    return 4 * d_model**2 + 3 * d_model * d_ff + 2 * d_model


def test_correct_llama_counts_pass():
    assert_all_passed(check_llama_block_parameter_count(right_llama))
    # LLaMA-7B: 32 blocks, a final norm, untied embeddings of 32000 x 4096: 6.74 billion
    total = 32 * right_llama(4096, 11008) + 4096 + 2 * 32000 * 4096
    assert total == 6_738_415_616


@pytest.mark.parametrize(
    ("wrong", "problem"),
    [
        (lambda d, f: right_llama(d, f) - d * f, "one of the three SwiGLU matrices is missing"),
        (lambda d, f: right_llama(d, f) + 2 * d, "counted with a shift each"),
        (lambda d, f: right_llama(d, f) + 4 * d, "attention biases are counted"),
        (lambda d, f: right_llama(d, f) + 2 * f + d, "feed-forward biases are counted"),
        (lambda d, f: right_llama(d, f) + 6 * d + 2 * f, "biases are counted on every linear"),
        (lambda d, f: 4 * d * d + 3 * d * f, "the two RMSNorms' gains (2 d_model) are missing"),
        (lambda d, f: right_llama(d, f) - d, "only one RMSNorm is counted"),
        (lambda d, f: right_llama(d, f) + d, "three RMSNorms are counted"),
        (lambda d, f: right_llama(d, f) - d * d, "output projection W_O is missing"),
        (lambda d, f: helpers.block_parameter_count(d, 1, f), None),
    ],
)
def test_llama_count_slips_are_named(wrong, problem):
    problems = failed(check_llama_block_parameter_count(wrong))
    assert len(problems) == 4
    if problem is not None:
        assert all(problem in text for text in problems.values()), problems


# ---------------------------------------------------------------------------
# check_block_parameter_count
# ---------------------------------------------------------------------------


def right_count(d_model, d_ff):
    return 4 * d_model**2 + 4 * d_model + 2 * d_model * d_ff + d_ff + d_model + 4 * d_model


def test_correct_counts_pass():
    assert_all_passed(check_block_parameter_count(right_count))
    assert_refused(
        check_block_parameter_count(lambda d, f: helpers.block_parameter_count(d, 1, f)),
        "helpers.transformer.block_parameter_count",
    )


@pytest.mark.parametrize(
    ("wrong", "problem"),
    [
        (lambda d, f: right_count(d, f) - 4 * d, "the two layer norms' gains and shifts"),
        (lambda d, f: right_count(d, f) - 2 * d, "only one layer norm is counted"),
        (lambda d, f: right_count(d, f) - f - d, "feed-forward biases b_1 (d_ff) and b_2"),
        (lambda d, f: right_count(d, f) - f + d, "b_1 is counted with d_model entries"),
        (lambda d, f: 4 * d * d + 2 * d * f, "only the weight matrices"),
        (lambda d, f: 4 * d * d + 2 * d * f + 4 * d, "the biases are missing"),
        (lambda d, f: right_count(d, f) - d * d - d, "output projection W_O"),
        (lambda d, f: right_count(d, f) - d * f, "only one of the feed-forward matrices"),
    ],
)
def test_count_slips_are_named(wrong, problem):
    report = check_block_parameter_count(wrong)
    problems = failed(report)
    assert len(problems) >= 4  # d_ff = d_model = 8 can coincide with another slip
    assert sum(problem in text for text in problems.values()) >= 4, problems


def test_count_off_by_one_is_shown_exactly():
    report = check_block_parameter_count(lambda d, f: right_count(d, f) + 1)
    text = flat(report)
    assert "3152384" in text and "3152385" in text  # whole numbers, not rounded to 6 digits


# ---------------------------------------------------------------------------
# check_encoder_block
# ---------------------------------------------------------------------------


def reader_block(X, params, h, norm_first, *, slip=None):
    """A block from the helpers' pieces; ``slip`` reproduces a usual mistake."""
    p = params

    def ln(x, name):
        if slip == "norms swapped":
            name = {"ln1": "ln2", "ln2": "ln1"}[name]
        return helpers.layer_norm(x, p[name + "_gamma"], p[name + "_beta"])

    def mha(x):
        biases = {} if slip == "no biases" else {k: p[k] for k in ("b_Q", "b_K", "b_V", "b_O")}
        return helpers.multi_head_attention(
            x, x, p["W_Q"], p["W_K"], p["W_V"], p["W_O"], h, **biases
        )[0]

    def ffn(x):
        act = "gelu" if slip == "gelu" else "relu"
        return helpers.feed_forward(x, p["W_1"], p["b_1"], p["W_2"], p["b_2"], activation=act)

    if slip == "order swapped":
        norm_first = not norm_first
    if norm_first:
        u = ln(X, "ln1")
        keep_x = 0 if slip == "no residual around attention" else 1
        Z = u if slip in ("normalised residual", "normalised residual, attention") else keep_x * X
        Z = Z + mha(u)
        v = ln(Z, "ln2")
        keep_z = 0 if slip == "no residual around the feed-forward" else 1
        Y = v if slip in ("normalised residual", "normalised residual, ffn") else keep_z * Z
        Y = Y + ffn(v)
        return ln(Y, "ln2") if slip == "final norm" else Y
    if slip == "no residual":
        return ln(ffn(ln(mha(X), "ln1")), "ln2")
    if slip == "no residual around attention":
        Z = ln(mha(X), "ln1")
        return ln(Z + ffn(Z), "ln2")
    if slip == "no residual around the feed-forward":
        return ln(ffn(ln(X + mha(X), "ln1")), "ln2")
    if slip == "norm before the sum":
        Z = X + ln(mha(X), "ln1")
        return Z + ln(ffn(Z), "ln2")
    Z = ln(X + mha(X), "ln1")
    return ln(Z + ffn(Z), "ln2")


def block_with_slip(slip):
    def fn(X, params, h, norm_first):
        return reader_block(X, params, h, norm_first, slip=slip)

    fn.__name__ = "block_" + slip.replace(" ", "_")
    return fn


BLOCK_CASES = ["post-LN, 2 heads", "post-LN, 4 heads", "pre-LN, 2 heads", "pre-LN, 4 heads"]


def test_correct_blocks_pass():
    report = check_encoder_block(reader_block)
    assert_all_passed(report)
    assert [r.name for r in report.results] == BLOCK_CASES


def test_the_books_block_is_refused():
    # the statement builds the block from helpers.layer_norm, helpers.multi_head_attention and
    # helpers.feed_forward (reader_block does): those stay allowed; encoder_block is the answer
    assert_refused(
        check_encoder_block(lambda X, p, h, nf: helpers.encoder_block(X, p, h, norm_first=nf)[0]),
        "helpers.transformer.encoder_block",
    )


@pytest.mark.parametrize(
    ("slip", "cases", "problem"),
    [
        ("order swapped", BLOCK_CASES, "it computes the other order"),
        ("norms swapped", BLOCK_CASES, "ln1 and ln2 are swapped"),
        ("normalised residual", BLOCK_CASES[2:], "the residual adds the normalised input"),
        (
            "normalised residual, attention",
            BLOCK_CASES[2:],
            "the attention sublayer's residual adds the normalised input",
        ),
        (
            "normalised residual, ffn",
            BLOCK_CASES[2:],
            "the feed-forward sublayer's residual adds the normalised input",
        ),
        ("final norm", BLOCK_CASES[2:], "an extra layer norm"),
        ("no residual", BLOCK_CASES[:2], "the residual connections are missing"),
        (
            "no residual around attention",
            BLOCK_CASES,
            "the attention sublayer's residual connection is missing",
        ),
        (
            "no residual around the feed-forward",
            BLOCK_CASES,
            "the feed-forward sublayer's residual connection is missing",
        ),
        ("norm before the sum", BLOCK_CASES[:2], "before the residual sum"),
        ("no biases", BLOCK_CASES, "attention biases b_Q, b_K, b_V, b_O are left out"),
        ("gelu", BLOCK_CASES, "uses GELU"),
    ],
)
def test_block_slips_are_named(slip, cases, problem):
    report = check_encoder_block(block_with_slip(slip))
    problems = failed(report)
    assert list(problems) == cases
    assert all(problem in text for text in problems.values()), problems


def test_block_that_modifies_params_in_place_is_reported():
    def fn(X, params, h, norm_first):
        params["W_1"] *= 2
        return reader_block(X, params, h, norm_first)

    report = check_encoder_block(fn)
    assert not report
    assert all("in place" in r.problem for r in report.failures)


# ---------------------------------------------------------------------------
# check_fold_layer_norm (exercise 6.1): the gain and shift folded into the next layer
# ---------------------------------------------------------------------------


def fold_by_rows(gamma, beta, W, b):
    return gamma[:, None] * W, beta @ W + b


def fold_by_diag(gamma, beta, W, b):
    """Another right answer: diag(gamma) W, and beta as a one-row matrix."""
    return {"W_folded": np.diag(gamma) @ W, "b_folded": (beta[None, :] @ W)[0] + b}


@pytest.mark.parametrize("fn", [fold_by_rows, fold_by_diag])
def test_correct_folds_pass(fn):
    assert_all_passed(helpers.checks.check_fold_layer_norm(fn))


def test_a_fold_really_is_what_the_check_says():
    # What passes the check gives the same outputs as the layer norm and the layer it folds.
    rng = np.random.default_rng(5)
    x, gamma, beta = rng.normal(size=(7, 6)), rng.normal(size=6), rng.normal(size=6)
    W, b = rng.normal(size=(6, 4)), rng.normal(size=4)
    W_f, b_f = fold_by_rows(gamma, beta, W, b)
    before = helpers.layer_norm(x, gamma, beta) @ W + b
    after = helpers.layer_norm(x, np.ones(6), np.zeros(6)) @ W_f + b_f
    assert np.allclose(before, after)


@pytest.mark.parametrize(
    ("fn", "case", "problem"),
    [
        (
            lambda g, be, W, b: (W * g, be @ W + b),
            "W_folded, a square layer, d = d_out = 4",
            "gamma scales the columns of W",
        ),
        (
            lambda g, be, W, b: (W / g[:, None], be @ W + b),
            "W_folded, W of shape (6, 3)",
            "W is divided by gamma",
        ),
        (
            lambda g, be, W, b: (W, be @ W + b),
            "W_folded, W of shape (3, 8)",
            "the gain gamma is not folded in",
        ),
        (
            lambda g, be, W, b: (g[:, None] * W, b),
            "b_folded, W of shape (6, 3)",
            "the shift beta is not folded in",
        ),
        (
            lambda g, be, W, b: (g[:, None] * W, b + be),
            "b_folded, a square layer, d = d_out = 4",
            "without passing through W",
        ),
        (
            lambda g, be, W, b: (g[:, None] * W, (g * be) @ W + b),
            "b_folded, W of shape (3, 8)",
            "beta is multiplied by gamma",
        ),
        (
            lambda g, be, W, b: (g[:, None] * W, be @ W),
            "b_folded, W of shape (6, 3)",
            "own bias b is missing",
        ),
        (
            lambda g, be, W, b: (g[:, None] * W, b - be @ W),
            "b_folded, W of shape (6, 3)",
            "sign of the shift's contribution is flipped",
        ),
        (
            lambda g, be, W, b: (g[:, None] * W, W @ be + b),
            "b_folded, a square layer, d = d_out = 4",
            "as a column vector would",
        ),
    ],
)
def test_typical_fold_slips_are_named(fn, case, problem):
    report = helpers.checks.check_fold_layer_norm(fn)
    assert not report
    assert problem in failed(report)[case], failed(report).get(case)


def test_a_fold_that_is_not_a_pair_is_reported():
    report = helpers.checks.check_fold_layer_norm(lambda g, be, W, b: g[:, None] * W)
    assert not report and "expected the pair (W_folded, b_folded)" in flat(report)


def test_a_fold_that_changes_its_inputs_is_reported():
    def in_place(gamma, beta, W, b):
        W *= gamma[:, None]
        b += beta @ (W / gamma[:, None])
        return W, b

    report = helpers.checks.check_fold_layer_norm(in_place)
    assert not report and "in place" in flat(report)


def test_fold_hints_never_show_the_answer():
    wrong = [
        lambda g, be, W, b: (W, b),
        lambda g, be, W, b: (W * g, b + be),
        lambda g, be, W, b: (np.zeros_like(W), np.zeros_like(b)),
    ]
    for fn in wrong:
        text = flat(helpers.checks.check_fold_layer_norm(fn))
        for giveaway in ("gamma[:, None]", "beta @ W", "np.diag", "@ W +", "* W"):
            assert giveaway not in text, (giveaway, text)

"""The book's own implementations are not answers: a function that calls one is refused.

`helpers.checks.core.IMPLEMENTATIONS` declares, for each self-check, the functions of
`helpers` that compute what it grades; `helpers.checks.shortcuts.watching` records calls
into them while the reader's function runs, however the call is reached. A function that
makes one is "not attempted", with a message naming what it called (what a grader reads
too), whatever it returns. Other helpers stay allowed.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
import threading

import numpy as np
import pytest

import helpers
import helpers.theory
from helpers import checks
from helpers.checks import NOT_ATTEMPTED, check_causal_mask, check_min_head_width, run_self_check
from helpers.checks.core import IMPLEMENTATIONS
from helpers.checks.shortcuts import code_of, public_names, watching
from tests.report_text import assert_all_passed, assert_refused

CHECKS = sorted(name for name in checks.__all__ if name.startswith("check_"))
WIDTH = "helpers.theory.min_head_width"


def my_width(L):  # a right answer of exercise 9.1, written by hand
    return int(np.linalg.matrix_rank(L - L.mean(axis=1, keepdims=True)))


# ---------------------------------------------------------------------------
# The declarations
# ---------------------------------------------------------------------------


def test_every_check_declares_what_it_grades():
    assert set(IMPLEMENTATIONS) == set(CHECKS)


@pytest.mark.parametrize("dotted", sorted({n for names in IMPLEMENTATIONS.values() for n in names}))
def test_every_declared_implementation_is_a_function_of_helpers(dotted):
    assert dotted.startswith("helpers.") and not dotted.startswith("helpers.checks")
    code = code_of(dotted)
    assert code.co_filename.endswith(dotted.split(".")[1] + ".py"), code.co_filename


def test_the_declarations_are_plain_data():
    assert json.loads(json.dumps(dict(IMPLEMENTATIONS))) == {
        k: list(v) for k, v in IMPLEMENTATIONS.items()
    }


# ---------------------------------------------------------------------------
# However the call is reached
# ---------------------------------------------------------------------------


def _wrapper(L):
    return helpers.theory.min_head_width(L)


def _getattr(L):
    return getattr(helpers.theory, "min_head_width")(L)  # noqa: B009


def _imported(L):
    from helpers.theory import min_head_width

    return min_head_width(L)


def _nested(L):
    def inner(M):
        return helpers.theory.min_head_width(M)

    return inner(L)


class _CallableObject:
    def __call__(self, L):
        return helpers.theory.min_head_width(L)


def _only_on_large_inputs(L):  # the book's answer on some cases only
    return helpers.theory.min_head_width(L) if L.size > 10 else my_width(L)


def _wrong_and_calls_it(L):  # a wrong answer that calls it is refused as well
    return helpers.theory.min_head_width(L) + 1


ROUTES = {
    "the function itself": helpers.theory.min_head_width,
    "a top-level alias": helpers.min_head_width if hasattr(helpers, "min_head_width") else None,
    "a wrapper": _wrapper,
    "getattr": _getattr,
    "an import inside": _imported,
    "a nested function": _nested,
    "functools.partial": functools.partial(helpers.theory.min_head_width, rtol=1e-9),
    "a lambda": lambda L: helpers.theory.min_head_width(L),
    "a callable object": _CallableObject(),
    "some cases only": _only_on_large_inputs,
    "a wrong answer": _wrong_and_calls_it,
}


@pytest.mark.parametrize("route", [r for r, fn in ROUTES.items() if fn is not None])
def test_a_call_of_the_books_implementation_is_refused_by_any_route(route):
    report = check_min_head_width(ROUTES[route])
    assert_refused(report, WIDTH)
    assert report.message.endswith(
        f"calls {WIDTH}, the book's own version: the exercise asks you to write it"
    )


def test_a_legitimate_answer_that_calls_other_helpers_passes():
    def with_helpers(L):  # helpers.softmax and helpers.theory's private _matrix: allowed
        centred = helpers.softmax(L, axis=-1)  # a call that computes no width
        del centred
        return my_width(L)

    assert_all_passed(check_min_head_width(with_helpers))
    assert_all_passed(check_min_head_width(my_width))


def test_the_attention_helper_is_allowed_where_it_is_not_the_answer():
    # Exercise 2.4, part 1: the mask; the book's attention does not compute a mask.
    def mask_via_attention(n):
        helpers.scaled_dot_product_attention(np.ones((1, 1)), np.ones((1, 1)), np.ones((1, 1)))
        i, j = np.indices((n, n))
        return j <= i

    assert_all_passed(check_causal_mask(mask_via_attention))


def test_a_delegate_called_directly_is_reported_under_its_own_name():
    # linear_attention delegates to _kernel_attention: called alone, it is named itself;
    # called through linear_attention, only the public name is shown.
    assert public_names(["helpers.a.f", "helpers.a._g"]) == ["helpers.a.f"]
    assert public_names(["helpers.a._g"]) == ["helpers.a._g"]
    with watching(IMPLEMENTATIONS["check_causal_linear_attention"]) as called:
        helpers.linear_attention(np.ones((3, 2)), np.ones((3, 2)), np.ones((3, 2)), causal=True)
    assert called == [
        "helpers.linear_attention.linear_attention",
        "helpers.linear_attention._kernel_attention",
    ]


# ---------------------------------------------------------------------------
# The watch itself
# ---------------------------------------------------------------------------


def test_the_watch_records_in_order_of_first_call_and_only_inside_the_block():
    names = ["helpers.masks.causal_mask", "helpers.masks.padding_mask"]
    helpers.causal_mask(2)  # before: not recorded
    with watching(names) as called:
        helpers.padding_mask([1], 2)
        helpers.causal_mask(2)
        helpers.padding_mask([1], 2)
    helpers.causal_mask(2)  # after: not recorded
    assert called == ["helpers.masks.padding_mask", "helpers.masks.causal_mask"]


def test_nested_watches_each_record_their_own_names():
    with watching(["helpers.masks.causal_mask"]) as outer:
        with watching(["helpers.masks.padding_mask"]) as inner:
            helpers.causal_mask(2)
            helpers.padding_mask([1], 2)
        helpers.causal_mask(2)
    assert outer == ["helpers.masks.causal_mask"] and inner == ["helpers.masks.padding_mask"]


def test_the_watch_leaves_no_hook_behind_and_restores_a_profiler():
    def profiler(frame, event, arg):
        return None

    before = sys.getprofile()
    sys.setprofile(profiler)
    try:
        with watching([WIDTH]) as called:
            helpers.theory.min_head_width(np.eye(3))
        assert called == [WIDTH]
        assert sys.getprofile() is profiler
    finally:
        sys.setprofile(before)
    assert sys.getprofile() is before
    if hasattr(sys, "monitoring"):  # Python 3.12+: the tool id is given back
        assert all(sys.monitoring.get_tool(t) != "helpers.checks" for t in range(6))


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="sys.monitoring is Python 3.12+")
def test_with_every_tool_id_taken_the_profiler_hook_is_used():
    taken = [t for t in (3, 4) if sys.monitoring.get_tool(t) is None]
    for tool in taken:
        sys.monitoring.use_tool_id(tool, "another tool")
    try:
        with watching([WIDTH]) as called:
            helpers.theory.min_head_width(np.eye(2))
        assert called == [WIDTH]
    finally:
        for tool in taken:
            sys.monitoring.free_tool_id(tool)


def test_a_running_c_profiler_is_switched_back_on():
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        refused = check_min_head_width(_wrapper)
        passed = check_min_head_width(my_width)
        active = sys.getprofile()
    finally:
        profiler.disable()
    assert_refused(refused, WIDTH)
    assert_all_passed(passed)
    if not hasattr(sys, "monitoring"):  # 3.11: the hook was handed back to cProfile
        assert active is profiler


def test_the_watch_sees_threads_started_inside_it():
    with watching([WIDTH]) as called:
        thread = threading.Thread(target=helpers.theory.min_head_width, args=(np.eye(3),))
        thread.start()
        thread.join()
    assert called == [WIDTH]


def test_calls_made_in_another_process_can_be_recorded():
    # What a grader's stand-in does: ask what is watched, watch it in the student's
    # process, and record here what was called there.
    from helpers.checks.shortcuts import record, watched_names

    assert watched_names() == []
    with watching([WIDTH, "helpers.softmax.softmax"]) as called:
        assert watched_names() == [WIDTH, "helpers.softmax.softmax"]
        record(["helpers.masks.causal_mask", WIDTH])  # an undeclared name is ignored
    assert called == [WIDTH]

    def stand_in(L):  # the student's function ran elsewhere and called the book's own
        record(watched_names())
        return my_width(L)

    assert_refused(check_min_head_width(stand_in), WIDTH)


def test_a_stale_declaration_is_ignored_not_raised():
    with watching(["helpers.theory.no_such_function", "helpers.nowhere.f", "numpy"]) as called:
        helpers.theory.min_head_width(np.eye(2))
    assert called == []


def test_the_watcher_needs_nothing_but_the_standard_library():
    # A grader may run it where helpers.checks is not installed: its source stands alone.
    import helpers.checks.shortcuts as module

    source = inspect.getsource(module)
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert all(
        line.split()[1].split(".")[0] in sys.stdlib_module_names | {"__future__"}
        for line in imports
    ), imports


# ---------------------------------------------------------------------------
# What a grader reads
# ---------------------------------------------------------------------------


def test_run_self_check_reports_a_book_call_as_not_attempted():
    result = run_self_check("check_min_head_width", {"f": _wrapper}, "f")
    assert result.status == NOT_ATTEMPTED
    assert result.message == (
        f"this calls {WIDTH}, the book's own version: the exercise asks you to write it"
    )
    data = json.loads(json.dumps(result.to_dict()))
    assert data["status"] == "not attempted" and data["book_calls"] == WIDTH
    assert (
        run_self_check("check_min_head_width", {"f": my_width}, "f").to_dict()["book_calls"] == ""
    )


@pytest.mark.parametrize("name", CHECKS)
def test_every_check_refuses_its_first_declared_implementation(name):
    declared = IMPLEMENTATIONS[name]
    if not declared:
        pytest.skip(f"{name}: no helper computes what it grades")
    book = code_of(declared[0])
    module, _, attr = declared[0].rpartition(".")
    fn = getattr(sys.modules[module], attr)
    assert fn.__code__ is book

    params = [p for p in inspect.signature(fn).parameters.values() if p.default is p.empty]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = {p.name: None for p in params if p.kind == p.KEYWORD_ONLY}

    def calls_it(*args, **kwargs):  # enters the book's function, then gives up
        try:
            fn(*[None] * len(positional), **keywords)
        except Exception:
            pass
        raise ValueError("not an answer")

    report = getattr(checks, name)(calls_it)
    assert report.status == NOT_ATTEMPTED and report.book_calls == (declared[0],)

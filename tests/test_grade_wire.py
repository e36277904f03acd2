"""What a kernel sends back to the grader is parsed strictly (scripts/grade_wire.py)."""

from __future__ import annotations

import base64
import io
import sys

import numpy as np
import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import grade
import grade_wire
from grade_wire import BadMessage, decode, encode, parse_npy


def npy(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def test_values_round_trip():
    value = (np.arange(6.0).reshape(2, 3), np.float32(1.5), 3, None, [True, "x"], {"a": 2.0})
    back = decode(encode(value))
    assert isinstance(back, tuple) and len(back) == len(value)
    np.testing.assert_array_equal(back[0], value[0])
    assert back[1] == value[1] and type(back[1]) is np.float32
    assert back[2:5] == (3, None, [True, "x"]) and back[5] == {"a": 2.0}


def test_an_object_array_is_refused_and_its_pickle_never_runs():
    data = npy(np.array([print], dtype=object), allow_pickle=True)
    with pytest.raises(BadMessage, match="dtype object"):
        parse_npy(data)


def test_a_header_that_lies_about_the_size_is_refused():
    data = npy(np.zeros(4))
    lying = data.replace(b"(4,)", b"(10000000000,)".ljust(4))
    with pytest.raises(BadMessage):
        parse_npy(lying)
    with pytest.raises(BadMessage):
        parse_npy(data[:-8])  # truncated


def test_malformed_or_oversized_answers_are_refused():
    deep: dict = {"t": "none"}
    for _ in range(grade_wire.MAX_DEPTH + 2):
        deep = {"t": "list", "items": [deep]}
    for bad in (
        deep,
        {"t": "int", "v": "1e3"},
        {"t": "str", "v": "x" * (grade_wire.MAX_TEXT + 1)},
        {"t": "other", "type": "not an identifier"},
        {"t": "array", "npy": "not base64!"},
        {"t": "exec", "v": "print(1)"},
        ["not", "a", "dict"],
    ):
        with pytest.raises(BadMessage):
            decode(bad)
    many = {"t": "list", "items": [{"t": "none"}] * (grade_wire.MAX_NODES + 1)}
    with pytest.raises(BadMessage):
        decode(many)
    text = base64.b64encode(npy(np.zeros(4))).decode()
    assert decode({"t": "array", "npy": text}).shape == (4,)


def test_a_returned_object_keeps_its_type_name_and_its_array():
    text = base64.b64encode(npy(np.ones(3))).decode()
    stand_in = decode({"t": "other", "type": "Tensor", "npy": text})
    assert type(stand_in).__name__ == "Tensor"
    np.testing.assert_array_equal(np.asarray(stand_in), np.ones(3))


@pytest.mark.parametrize("value", ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"])
def test_spreadsheet_formulas_are_written_as_text(value):
    assert grade.spreadsheet_safe(value) == "'" + value
    assert grade.spreadsheet_safe("alice") == "alice"


def test_a_next_token_table_is_sent_as_its_table_and_other_functions_are_refused():
    """check_beam_search passes a function that is a table; it travels as the table (the
    kernel rebuilds the lookup), and any other function cannot be sent."""
    from helpers.checks.models import _table_fn

    table = np.log(np.full((3, 3, 3), 1 / 3))
    node = encode((_table_fn(table), np.array([0, 1]), 3))
    fn_node = node["items"][0]
    assert fn_node["t"] == "table-fn"
    np.testing.assert_array_equal(parse_npy(base64.b64decode(fn_node["npy"])), table)
    with pytest.raises(TypeError, match="cannot send a function"):
        encode(lambda tokens: tokens)
    # the kernel's lookup is the check's own
    assert "table[tokens[:, -2], tokens[:, -1]]" in grade_wire.KERNEL_CODE


# ---------------------------------------------------------------------------
# The watch for the book's own code (the kernel's side run here, in a namespace of its own)
# ---------------------------------------------------------------------------

ENTROPY = "helpers.softmax.entropy"


def test_the_armed_watch_sees_the_books_code_however_it_is_reached(monkeypatch):
    import functools
    import threading

    import helpers

    keys = grade_wire.watch_keys([ENTROPY, "helpers.softmax.softmax", "helpers.no_such"])
    assert sorted(keys) == [ENTROPY, "helpers.softmax.softmax"]
    namespace: dict = {}
    before = sys.getprofile(), threading.getprofile()
    try:
        exec(grade_wire.arm_source(keys), namespace)
        watcher, called = namespace["__grade_watch__"]
        p = np.array([0.5, 0.5])
        getattr(sys.modules["help" + "ers"], "ent" + "ropy")(p)  # getattr
        module = sys.modules["helpers.softmax"]
        hidden = module.entropy  # the module's attribute rebound, the code kept
        monkeypatch.setattr(module, "entropy", lambda p: 0.0)
        called.clear()
        functools.partial(hidden)(p)  # a partial
        assert called == {ENTROPY}
        thread = threading.Thread(target=helpers.softmax, args=(p,))  # a thread
        thread.start()
        thread.join()
        helpers.softmax_jacobian(p)  # another helper: not watched
        on = sys.getprofile() is watcher and threading.getprofile() is watcher
    finally:
        sys.setprofile(before[0])
        threading.setprofile(before[1])
    assert on
    assert called == {ENTROPY, "helpers.softmax.softmax"}


def fake_remote(reply) -> tuple[grade_wire.Remote, list[dict]]:
    """A Remote whose kernel answers each request with ``reply(request)`` (a list of
    answers), watching for helpers.softmax.entropy; and the requests it was sent."""
    requests: list[dict] = []

    def write_request(name: str, text: str) -> str:
        requests.append(grade.json.loads(text))
        return name

    remote = grade_wire.Remote(
        lambda source, timeout: {"answers": reply(requests[-1])}, write_request
    )
    remote.start_check((ENTROPY,))
    return remote, requests


def test_what_the_kernel_saw_is_recorded_in_the_checks_own_watch():
    from helpers.checks.shortcuts import watching

    seen = {"called": [ENTROPY, "helpers.softmax.softmax"], "intact": True}
    remote, requests = fake_remote(
        lambda r: [{"id": r["id"], "result": {"t": "none"}, "watch": seen}]
    )
    stand_in = grade_wire.RemoteFunction(remote, "my_entropy", "my_entropy", 10)
    with watching([ENTROPY]) as called:
        assert stand_in(np.array([1.0])) is None
    assert requests[-1]["watch"] is True
    assert called == [ENTROPY]  # (softmax is not what check_entropy watches)
    assert remote.book_calls == [ENTROPY] and not remote.watch_off


def test_a_request_answered_twice_is_an_error_and_an_answer_without_report_a_watch_off():
    def twice(request):
        forged = {"id": request["id"], "result": {"t": "none"}}
        ours = {"id": request["id"], "watch": {"called": [ENTROPY], "intact": True}}
        return [forged, grade_wire.answer_stub(ours)]

    remote, _ = fake_remote(twice)
    stand_in = grade_wire.RemoteFunction(remote, "my_entropy", "my_entropy", 10)
    with pytest.raises(grade_wire.GradingAborted, match="2 answers came back to one request"):
        stand_in(np.array([1.0]))
    assert remote.book_calls == [ENTROPY] and not remote.watch_off

    remote, _ = fake_remote(lambda r: [{"id": r["id"], "result": {"t": "none"}}])
    stand_in = grade_wire.RemoteFunction(remote, "my_entropy", "my_entropy", 10)
    assert stand_in(np.array([1.0])) is None
    assert remote.watch_off and remote.book_calls == []

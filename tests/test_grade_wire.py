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

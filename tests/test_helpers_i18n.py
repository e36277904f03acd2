"""Self-check reports in Korean (helpers/i18n.py, helpers/locales/ko.po,
scripts/helpers_i18n.py).

With ``helpers.set_language("ko")`` every fixed word of a report is Korean and every number,
shape and name is the English report's; with English (the default) the reports are byte
for byte what they were. The catalogue has a Korean translation for every message of the
code, with the same placeholders, and its template is current. The verdict a grader reads
does not depend on the language.
"""

from __future__ import annotations

import inspect
import pickle
import re
import shutil
import sys
from collections import Counter

import numpy as np
import pytest

import helpers
from helpers import checks
from helpers.checks import run_self_check
from helpers.i18n import catalogue, join, localize, msg, read_po
from tests.conftest import ROOT
from tests.report_text import NOT_SCANNED, hint_texts, recipe_in

sys.path.insert(0, str(ROOT / "scripts"))
import helpers_i18n

CHECKS = sorted(name for name in checks.__all__ if name.startswith("check_"))


@pytest.fixture
def korean():
    helpers.set_language("ko")
    yield
    helpers.set_language("en")


def zeros_like_first(*args, **kwargs):
    return np.zeros_like(np.asarray(args[0], dtype=float)) if args else 0.0


def raises(*args, **kwargs):
    raise ValueError("not yet")


def not_written(*args, **kwargs):
    raise NotImplementedError


WRONG = [zeros_like_first, raises, not_written]


def report_of(name: str, fn, language: str) -> str:
    """The report of check `name` on `fn` in `language`, with the fuller hint if it has one."""
    check = getattr(checks, name)
    asked = {"hint": True} if "hint" in inspect.signature(check).parameters else {}
    helpers.set_language(language)
    try:
        with np.errstate(all="ignore"):
            return repr(check(fn, **asked))
    finally:
        helpers.set_language("en")


# ---------------------------------------------------------------------------
# The catalogue
# ---------------------------------------------------------------------------


def test_every_message_has_a_korean_translation_and_the_template_is_current():
    assert helpers_i18n.problems("ko") == []


def test_the_catalogue_check_catches_what_it_is_for(tmp_path, monkeypatch):
    """A message without a translation, a translation that drops a placeholder, an
    obsolete entry, and a template older than the code are each reported."""
    locales = tmp_path / "locales"
    shutil.copytree(helpers_i18n.LOCALES, locales)
    monkeypatch.setattr(helpers_i18n, "LOCALES", locales)
    monkeypatch.setattr(helpers_i18n, "TEMPLATE", locales / "messages.pot")
    entries = helpers_i18n.extract()
    assert helpers_i18n.problems("ko", entries) == []
    translated = read_po(locales / "ko.po")
    del translated["Passed: {names}."]
    translated["the output sums to {sums}, not 1"] = "출력의 합이 1이 아닙니다"
    translated["an old message"] = "오래된 메시지"
    text = helpers_i18n.catalogue_text("ko", {**entries, "an old message": []}, translated)
    (locales / "ko.po").write_text(text, encoding="utf-8")
    found = helpers_i18n.problems("ko", {**entries, "a message added to the code": []})
    assert f"{locales}/messages.pot is stale: run scripts/helpers_i18n.py extract" in found
    assert "no ko translation: 'Passed: {names}.'" in found
    assert "no ko translation: 'a message added to the code'" in found
    assert any(p.startswith("placeholders differ: 'the output sums to {sums}") for p in found)
    assert "obsolete ko entry (no longer in the code): 'an old message'" in found
    assert len(found) == 5


def test_the_extraction_finds_templates_and_prose_but_not_docstrings_or_fstrings(tmp_path):
    source = tmp_path / "module.py"
    source.write_text(
        '"""A docstring with words."""\n'
        "def f(x):\n"
        '    """Another docstring."""\n'
        '    a = msg("got {x}", x=x)\n'
        '    b = f"an f-string {x} left alone"\n'
        '    return a, b, "a plain hint", "dotted.name", "; "\n',
        encoding="utf-8",
    )
    assert [text for text, _ in helpers_i18n.messages_of(source)] == ["got {x}", "a plain hint"]


def test_placeholders_are_compared_with_their_conversions_and_formats():
    assert helpers_i18n.fields("{a} and {b!r} at {c:.1f}") == ["{a}", "{b!r}", "{c:.1f}"]
    assert helpers_i18n.fields("{c:.2f} {a}") != helpers_i18n.fields("{a} {c:.1f}")


def test_the_po_reader_reads_escapes_continuations_and_skips_fuzzy(tmp_path):
    po = tmp_path / "x.po"
    po.write_text(
        'msgid ""\nmsgstr ""\n"Language: ko\\n"\n\n'
        '#: here\nmsgid "a \\"quoted\\" "\n"word"\nmsgstr "인용된 "\n"말\\n"\n\n'
        '#, fuzzy\nmsgid "unsure"\nmsgstr "불확실"\n\n'
        'msgid "untranslated"\nmsgstr ""\n',
        encoding="utf-8",
    )
    assert read_po(po) == {'a "quoted" word': "인용된 말\n"}
    po.write_text('msgid "x"\nmsgstr "\\q"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        read_po(po)


def test_the_catalogue_ships_inside_the_package():
    assert (ROOT / "helpers" / "locales" / "ko.po").is_file()
    assert '"locales/*.po"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert len(catalogue("ko")) == len(helpers_i18n.extract())


# ---------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------


def test_a_message_is_its_english_text(korean):
    text = msg(
        "expected {shape_text}, got shape {got_shape}",
        shape_text="a single number, shape ()",
        got_shape=(2,),
    )
    assert text == "expected a single number, shape (), got shape (2,)"
    assert isinstance(text, str) and text.startswith("expected")
    assert pickle.loads(pickle.dumps(text)) == text
    assert type(pickle.loads(pickle.dumps(text))) is str
    # translated when shown: the argument that is a message too, the shape exactly
    assert localize(text) == "하나의 수, 모양 ()을(를) 기대했는데 모양 (2,)를 받았습니다"
    assert (
        localize(text, "en")
        == str.__str__(text)
        == "expected a single number, shape (), got shape (2,)"
    )
    assert str(text) == localize(text)  # printed in the language set
    assert f"{text}" == msg("{m}", m=text) == "expected a single number, shape (), got shape (2,)"
    assert localize("not a message [1, 2]") == "not a message [1, 2]"
    joined = join("; ", ["the output contains nan", 'RuntimeWarning: "overflow"'])
    assert joined == 'the output contains nan; RuntimeWarning: "overflow"'
    assert localize(joined) == '출력에 nan이 있습니다; RuntimeWarning: "overflow"'


def test_an_unknown_language_is_refused():
    with pytest.raises(ValueError, match="language must be one of"):
        helpers.set_language("fr")
    assert helpers.get_language() == "en"


# ---------------------------------------------------------------------------
# Reports in Korean
# ---------------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


@pytest.mark.parametrize(
    "name", ["check_softmax", "check_attention", "check_causal_mask", "check_layer_norm"]
)
@pytest.mark.parametrize("wrong", WRONG, ids=lambda f: f.__name__)
def test_a_korean_report_shows_the_numbers_of_the_english_one(name, wrong):
    english, korean = report_of(name, wrong, "en"), report_of(name, wrong, "ko")
    assert english != korean
    assert Counter(_NUMBER.findall(korean)) == Counter(_NUMBER.findall(english))


def test_a_korean_report_of_a_slip():
    def naive_softmax(z):
        return np.exp(z) / np.exp(z).sum()

    text = report_of("check_softmax", naive_softmax, "ko")
    assert text.startswith("check_softmax(naive_softmax): 8개 중 5개 통과, 3개 실패.")
    assert "실패: 큰 로짓\n    입력:     z = [1000, 1001, 1002]\n" in text
    assert "    기대값:   [0.0900306, 0.244728, 0.665241]\n" in text
    assert '참고: 1장 "오버플로 없이 소프트맥스 계산하기".' in text


_GLUE = {"the", "a", "an", "of", "is", "are", "to", "and", "not", "in", "with", "must", "be"}


def _english_prose(text: str) -> list[str]:
    """Runs of three or more plain lowercase English words, one of them a word that only
    prose has ("the", "of", ...; a list of names such as "dx, dgamma, dbeta" is not prose).
    Not counted: numpy's RuntimeWarning (quoted, numpy's own words) and the text of an
    exception the reader's function raised (its own words), up to the next field."""
    text = re.sub(r'RuntimeWarning: (?:"[^"]*"(?:,\s*)?)+', "", text)
    text = re.sub(r"\w+(?:Error|Exception) 발생: .*?(?=\n {4}\S|\Z)", "", text, flags=re.S)
    runs, run = [], []
    for token in [*text.split(), ""]:
        if re.fullmatch(r"[a-z]{2,}[,.;:]?", token):
            run.append(token)
            continue
        if len(run) >= 3 and _GLUE & {word.strip(",.;:") for word in run}:
            runs.append(" ".join(run))
        run = []
    return runs


def test_the_english_prose_detector_finds_english():
    assert _english_prose("값이 다릅니다: the output contains nan") == ["the output contains nan"]
    assert (
        _english_prose('출력에 nan이 있습니다; RuntimeWarning: "overflow encountered in exp"') == []
    )


@pytest.mark.parametrize("wrong", WRONG, ids=lambda f: f.__name__)
@pytest.mark.parametrize("name", CHECKS)
def test_every_korean_report_is_korean(name, wrong):
    text = report_of(name, wrong, "ko")
    assert not _english_prose(text), f"{name}: English left: {_english_prose(text)}"


@pytest.mark.parametrize("name", sorted(set(CHECKS) - NOT_SCANNED))
def test_no_korean_hint_gives_a_recipe(name, korean):
    with np.errstate(all="ignore"):
        report = getattr(checks, name)(zeros_like_first)
    for text in hint_texts(report):
        # a Korean particle follows a number without a space ("1e-300은"): the detector
        # reads numbers as words that end at a space
        shown = re.sub(r"(\d)(?=[가-힣])", r"\1 ", localize(text))
        assert not recipe_in(shown), f"{name} hints {recipe_in(shown)!r}: {shown!r}"


# ---------------------------------------------------------------------------
# Grading does not depend on the language
# ---------------------------------------------------------------------------


def _verdicts(language: str) -> list[dict]:
    def right(z):
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def calls_the_book(z):
        return helpers.softmax(z)

    namespace = {"right": right, "zeros": zeros_like_first, "todo": not_written}
    namespace["calls"] = calls_the_book
    helpers.set_language(language)
    try:
        with np.errstate(all="ignore"):
            return [
                run_self_check("check_softmax", namespace, name).to_dict()
                for name in ["right", "zeros", "todo", "calls", "undefined"]
            ] + [run_self_check("check_nothing", namespace, "right").to_dict()]
    finally:
        helpers.set_language("en")


def test_a_verdict_is_the_same_in_every_language_only_its_message_is_translated():
    english, korean = _verdicts("en"), _verdicts("ko")
    drop = lambda rows: [{k: v for k, v in r.items() if k != "message"} for r in rows]  # noqa: E731
    assert drop(korean) == drop(english)
    assert [r["status"] for r in korean] == [
        "passed", "failed", "not attempted", "not attempted", "not attempted", "error"
    ]  # fmt: skip
    assert korean[4]["message"] == "undefined이(가) 정의되지 않았습니다: 시도하지 않음"
    assert english[4]["message"] == "undefined is not defined: not attempted"
    assert korean[1]["message"] != english[1]["message"]
    assert all(type(r["message"]) is str for r in korean)  # plain text for the grader's CSV

"""scripts/i18n.py check on small made-up catalogues: it finds each problem it names (an
untranslated, fuzzy or stale entry, maths or code or a reference changed, no Korean, a
translation that MyST would read as a list item), and accepts a complete catalogue; and
the export/import round trip of a catalogue is byte-identical."""

from __future__ import annotations

import importlib.util

import polib
import pytest

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("book_i18n", ROOT / "scripts" / "i18n.py")
i18n = importlib.util.module_from_spec(spec)
spec.loader.exec_module(i18n)

PARAGRAPH = "The largest logit receives {glue:text}`p_max` of the probability, by {eq}`eq-softmax`."
GOOD = "가장 큰 로짓의 확률은 {glue:text}`p_max`이며, 식 {eq}`eq-softmax`에서 나온다."
MATHS = "\\operatorname{softmax}(\\mathbf z)_i = \\frac{e^{z_i}}{\\sum_j e^{z_j}}"


def catalogue(entries, path):
    po = polib.POFile(wrapwidth=0)
    po.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    for msgid, msgstr, *flags in entries:
        entry = polib.POEntry(msgid=msgid, msgstr=msgstr)
        entry.flags = list(flags)
        po.append(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    po.save(str(path))


@pytest.fixture
def book(tmp_path, monkeypatch):
    """A book of one page: its extracted English and its Korean catalogue."""
    monkeypatch.setattr(i18n, "ROOT", tmp_path)
    monkeypatch.setattr(i18n, "POT", tmp_path / "_build" / "gettext")
    catalogue(
        [(PARAGRAPH, ""), ("Four properties", ""), (MATHS, "")],
        tmp_path / "_build" / "gettext" / "notebooks" / "01.pot",
    )

    def korean(*entries):
        catalogue(entries, tmp_path / "locales" / "ko" / "LC_MESSAGES" / "notebooks" / "01.po")
        return i18n.check()

    return korean


def test_a_complete_catalogue_passes(book):
    assert book((PARAGRAPH, GOOD), ("Four properties", "네 가지 성질"), (MATHS, MATHS)) == []


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        ([(PARAGRAPH, ""), ("Four properties", "네 가지 성질")], "untranslated"),
        ([(PARAGRAPH, GOOD, "fuzzy"), ("Four properties", "네 가지 성질")], "fuzzy"),
        ([(PARAGRAPH, GOOD)], "stale, the English has a new message"),
        (
            [(PARAGRAPH, GOOD), ("Four properties", "네 가지 성질"), ("Three properties", "세")],
            "stale, a message the English no longer has",
        ),
        (
            [(PARAGRAPH, GOOD.replace("p_max", "p_min")), ("Four properties", "네 가지 성질")],
            "differ",
        ),
        (
            [
                (PARAGRAPH, GOOD.replace("{eq}`eq-softmax`", "(1.1)")),
                ("Four properties", "네 가지 성질"),
            ],
            "differ",
        ),
        ([(PARAGRAPH, PARAGRAPH), ("Four properties", "네 가지 성질")], "left in English"),
        (
            [
                (PARAGRAPH, "Largest logit: {glue:text}`p_max` of it, by {eq}`eq-softmax`."),
                ("Four properties", "네 가지 성질"),
            ],
            "no Korean",
        ),
        ([(PARAGRAPH, GOOD), ("Four properties", "1. 네 가지 성질")], "list item or a heading"),
    ],
)
def test_each_problem_is_found(book, entries, problem):
    entries = [*entries, (MATHS, MATHS)] if len(entries) < 3 else entries
    found = book(*entries)
    assert any(problem in line for line in found), found


def test_a_display_equation_needs_no_translation_and_prose_does():
    assert i18n.nothing_to_translate(MATHS)
    assert i18n.nothing_to_translate("`softmax`")
    assert not i18n.nothing_to_translate("For every $\\tau > 0$,")
    assert not i18n.nothing_to_translate(PARAGRAPH)


def test_export_import_round_trip_is_byte_identical(tmp_path):
    path = tmp_path / "01.po"
    catalogue([(PARAGRAPH, GOOD), ("\n" + MATHS + "\n", "\n" + MATHS + "\n")], path)
    before = path.read_bytes()
    text = tmp_path / "01.txt"
    assert i18n.export_entries(path, text, everything=True) == 2
    assert i18n.import_entries(path, text) == 2
    assert path.read_bytes() == before

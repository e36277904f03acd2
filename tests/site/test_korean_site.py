"""The Korean edition as published: _build/pages/ko/ and _build/pages/ko/student/.

Every page-level check of test_site.py and test_student_site.py runs on the Korean
editions too (their `edition` parameter); these are the checks only a second language
needs, read from the same page loads (tests/site/pages.py, `LoadedPage.language`):

- No English sentence is left in the prose a reader reads (paragraphs, headings, list
  items, captions, table cells, admonition titles of the article; maths, code, outputs,
  the bibliography and citations left out). The allowance, stated: an English term of at
  most `WORDS_IN_A_GLOSS` words in parentheses right after its Korean one or after an
  acronym ("층 정규화(layer normalization)", "ALiBi (Attention with Linear Biases)"),
  English in quotation marks (a quotation, with its original after it in parentheses; a
  label of another program's interface, "Save a copy in Drive"; a message as the program
  prints it; an example sentence), and runs of fewer than `WORDS_IN_A_SENTENCE` Latin
  words (names: "Vaswani 외", "PyTorch", "Hugging Face"). A block with no Hangul at all and two Latin words or more
  is English too (a heading "Four properties" left untranslated); so is an exercise's
  title left in English ("연습 문제 1.1 (Warm-up: softmax by hand)": not a gloss).
- No English sentence is left in the outputs either (the lines of printed text, the
  explorers' descriptions, captions and alt texts, the output pictures' alt texts: the
  Korean execution's, scripts/ko_edition.py), with one more allowance there, stated in
  `code_and_maths_out`: what Python prints as code or maths (a call or an index with its
  arguments, an array in brackets, a name with `_` or `.` in it, Python's and NumPy's
  literal words such as `inf`, `nan`, `True`, `float32`, an `<object ...>` or a dict's
  repr, a sequence of one-letter tokens (the toy data "a b c a b c"), a name right
  before `=`, `<`, `>`) is not prose; nor are the words of the strings the chapter's code
  keeps in English on purpose, flagged `keep-english` in its code catalogue (keys that
  glue keys or fields are made from, data such as a toy corpus: `kept_words`), nor
  NumPy's own IndexError message; the rest of the line is checked as prose is.
- Korean text is drawn in a font that has Korean glyphs (no missing-glyph boxes): the
  fonts Chromium drew each checked element's own text with, by DevTools, hold at least
  as many glyphs of a Korean-capable font as the text has Hangul syllables.
- Every page of every edition links the same page in the other language, in the same
  tab, and that page is published; <html lang> names the page's language.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.conftest import ROOT
from tests.site.pages import BOOKS, KO, PAGES, PUBLISHED, STUDENT_LOADED, STUDENTS

pytestmark = pytest.mark.browser

KOREAN = ["ko", "ko_student"]
WORDS_IN_A_SENTENCE = 5
WORDS_IN_A_GLOSS = 5
_PARENTHESIS = re.compile(r"\(([^()]*)\)")
_QUOTED = re.compile(r"“[^”]*”|\"[^\"]*\"|‘[^’]*’")
# the original of a quotation: a parenthesis right after the closing quotation mark
_ORIGINAL = re.compile(r"([”\"’])\s?\(([^()]*)\)")
# what may come right before a gloss: Hangul (and a space at most) or an acronym (RoPE, MoE)
_BEFORE_GLOSS = re.compile(r"(?:[\uac00-\ud7a3] ?|\b[A-Z][A-Za-z]*[A-Z]\w* ?)$")
_LATIN_RUN = re.compile(r"[A-Za-z][\w'’.-]*(?:[ ,:;]+[A-Za-z][\w'’.-]*)*")
_HANGUL = re.compile("[\uac00-\ud7a3]")
# Families with Korean glyphs: Noto Sans/Serif CJK (Debian's fonts-noto-cjk), Noto Sans
# KR, Nanum, and the systems' own (Apple SD Gothic Neo, Malgun Gothic).
_KOREAN_FONT = re.compile(r"CJK|\bKR\b|Korean|Nanum|Gothic|Malgun|Apple SD", re.I)


def english_left(text: str) -> list[str]:
    """The English of one block of prose beyond the allowance (see the module)."""

    def gloss(match: re.Match) -> str:
        short = len(re.findall(r"[A-Za-z][\w'’.-]*", match.group(1))) <= WORDS_IN_A_GLOSS
        after_term = _BEFORE_GLOSS.search(text[: match.start()])
        return " " if short and after_term else match.group(0)

    text = _QUOTED.sub(" ", _ORIGINAL.sub(r"\1", text))
    bare = _PARENTHESIS.sub(gloss, text)
    runs = [m.group(0) for m in _LATIN_RUN.finditer(bare)]
    long = [r for r in runs if len(re.findall(r"[A-Za-z][\w'’.-]*", r)) >= WORDS_IN_A_SENTENCE]
    # an English phrase in parentheses that glosses nothing (an exercise's title left)
    long += [
        m.group(0)
        for m in _PARENTHESIS.finditer(bare)
        if not _HANGUL.search(m.group(1)) and len(re.findall(r"[A-Za-z]{2,}", m.group(1))) >= 3
    ]
    if long:
        return long
    words = sum(len(re.findall(r"[A-Za-z][\w'’.-]*[A-Za-z]", r)) for r in runs)
    if not _HANGUL.search(text) and words >= 2:  # a hyphenated term is one word
        return [text]
    return []


_CALL = re.compile(r"[A-Za-z_][\w.]*(?:\([^()]*\)|\[[^\[\]]*\])")
_BRACKETS = re.compile(r"\[[^\[\]]*\]|\{[^{}]*\}")  # a list's or a dict's repr
_CODE_NAME = re.compile(r"[A-Za-z]\w*(?:[_.]\w+)+|\w+_")
_LITERAL = re.compile(
    r"\b(?:inf|nan|True|False|None|dtype|float(?:16|32|64)|u?int(?:8|16|32|64))\b"
)
_REPR = re.compile(r"<[A-Za-z][^<>]*>")
_BEFORE_OPERATOR = re.compile(r"[A-Za-z]\w*(?=\s*(?:[=<>≤≥≈]|!=))")
# A library's own error message, printed as the library words it (a chapter that shows
# what NumPy says when an index is past the end): NumPy's IndexError, and nothing else.
# A sequence of one-letter tokens, the toy data a chapter runs on ("a b c a b c").
_LETTERS = re.compile(r"(?<![\w'’])(?:[A-Za-z]\s+){2,}[A-Za-z](?![\w'’])")
_LIBRARY_MESSAGE = re.compile(r"index -?\d+ is out of bounds for axis \d+ with size \d+")


def code_and_maths_out(line: str) -> str:
    """A line of an output without what Python prints as code or maths (the allowance of
    the outputs, see the module)."""
    previous = None
    while previous != line:  # calls inside calls, arrays inside arrays
        previous, line = line, _BRACKETS.sub(" ", _CALL.sub(" ", line))
    for pattern in (_LIBRARY_MESSAGE, _LETTERS, _REPR, _CODE_NAME, _LITERAL, _BEFORE_OPERATOR):
        line = pattern.sub(" ", line)
    return line


def english_left_in_output(line: str, kept: frozenset[str] = frozenset()) -> list[str]:
    """`kept`: the words the chapter's code keeps in English on purpose (`kept_words`)."""
    text = code_and_maths_out(line)
    if kept:
        text = re.sub(
            r"[A-Za-z][\w.-]*", lambda m: " " if m.group(0).lower() in kept else m.group(0), text
        )
    return english_left(text)


def kept_words(doc: str) -> frozenset[str]:
    """The words of the strings that a chapter's code catalogue keeps in English, flagged
    `keep-english` (scripts/code_i18n.py): the values the code reads (a dictionary's keys
    that a glue key or an f-string's field is made from, the kinds a function compares),
    and data (a toy corpus, special tokens). What a chapter prints from them stays English;
    every other English word of an output must be translated."""
    import polib

    po = ROOT / "locales" / "ko" / "LC_MESSAGES" / "code" / f"{Path(doc).name}.po"
    if not po.exists():
        return frozenset()
    words = set()
    for entry in polib.pofile(str(po)):
        if "keep-english" in entry.flags:
            words |= {w.lower() for w in re.findall(r"[A-Za-z][\w.-]*", entry.msgid)}
    return frozenset(words - {"f", "r", "rf", "fr"})


def test_the_english_check_of_outputs_allows_code_and_maths_only():
    assert english_left_in_output("logsumexp and log_softmax agree with helpers on the batch.")
    assert english_left_in_output("Run this cell to make the explorer live")
    assert english_left_in_output("entropy 1.06 of at most 1.61 nats")
    assert not english_left_in_output("np.exp(big)                = [inf inf inf]")
    assert not english_left_in_output("softmax(float32 z32) = [0.2689 0.7311] float32")
    assert not english_left_in_output("<Figure size 640x320 with 2 Axes>")
    assert not english_left_in_output(
        "tau = 0.1 : p = [0.  0.5 0.  0.5 0. ], 소프트 argmax = 3.0000"
    )
    assert not english_left_in_output("||J(0)||_2 = 1.2885 = ||W_V||_2")
    assert not english_left_in_output("τ = 1: 엔트로피 1.06나트 (최대 1.61나트)")
    assert not english_left_in_output(
        "위치 512: index 512 is out of bounds for axis 0 with size 512"
    )
    assert not english_left_in_output("시퀀스 a b c a b c에 적용한 결과")
    assert not english_left_in_output("{'better': 23, 'equal': 7, 'worse': 0, 'exact': 14}")
    assert not english_left_in_output(
        "input model sees   label", kept_words("n/07_bert_gpt_and_moe")
    )
    assert english_left_in_output("the model sees the label here")
    row = "all induction heads  3.912  3.900"
    assert english_left_in_output(row)
    assert not english_left_in_output(row, kept_words("notebooks/08_induction_heads"))
    assert english_left_in_output("all induction heads  3.912", kept_words("x/none"))


def test_the_english_check_finds_english_and_allows_what_it_states():
    assert english_left("The largest logit receives 0.62 of the probability.")
    assert english_left("Four properties")
    assert english_left("연습 문제 1.1 (Warm-up: softmax by hand)")
    assert not english_left("ALiBi (Attention with Linear Biases)는 거리에 비례하는 벌점을 준다.")
    assert english_left("소프트맥스는 점수를 확률로 바꾼다. It is smooth and easy to use here.")
    assert not english_left("소프트맥스는 점수를 확률로 바꾼다.")
    assert not english_left("층 정규화(layer normalization)는 평균을 뺀다.")
    assert english_left("층 정규화(layer normalization of every token in the batch)는 평균을 뺀다.")
    assert not english_left("Vaswani 외가 제안한 Transformer의 어텐션")
    assert not english_left("PyTorch와 Hugging Face transformers로 확인한다.")
    assert not english_left("Colab")
    assert not english_left("log-sum-exp") and not english_left("post-LN")
    assert not english_left('"The dog bit the man"과 "the man bit the dog"은 같은 출력을 준다.')
    assert not english_left(
        '"단순한 역전파로"(by simple back-propagation, along with the rest of the model) 학습한다.'
    )
    assert english_left("학습한다 (by simple back-propagation, along with the rest of the model).")


# The pages each edition loads in Chromium (a student edition's other pages are its
# book's without the solutions: tests/site/test_student_site.py).
LOADED = {"book": PAGES, "ko": PAGES, "student": STUDENT_LOADED, "ko_student": STUDENT_LOADED}


def loaded_pages(editions: list[str]) -> list:
    return [pytest.param(e, d, id=f"{e}-{d}") for e in editions for d in LOADED[e]]


@pytest.mark.parametrize(("edition", "doc"), loaded_pages(KOREAN))
def test_no_english_sentence_left_in_the_prose(loaded, edition, doc):
    page = loaded(edition, doc, "light")
    assert page.language["prose"], f"{doc}: no prose found on the page"
    left = [(text[:90], english_left(text)) for text in page.language["prose"]]
    left = [item for item in left if item[1]]
    assert not left, f"{edition} {doc}: English left in the Korean prose:\n" + "\n".join(
        f"  {text!r}: {runs}" for text, runs in left[:15]
    )


@pytest.mark.parametrize(("edition", "doc"), loaded_pages(KOREAN))
def test_no_english_sentence_left_in_the_outputs(loaded, edition, doc):
    """The outputs are the Korean execution's (scripts/ko_edition.py): printed sentences,
    self-check reports and explorers' words in Korean."""
    page = loaded(edition, doc, "light")
    kept = kept_words(doc)
    left = [(text[:90], english_left_in_output(text, kept)) for text in page.language["outputs"]]
    left = [item for item in left if item[1]]
    assert not left, f"{edition} {doc}: English left in the Korean outputs:\n" + "\n".join(
        f"  {text!r}: {runs}" for text, runs in left[:15]
    )


@pytest.mark.parametrize(("edition", "doc"), loaded_pages(KOREAN))
def test_korean_text_is_drawn_in_a_korean_font(loaded, edition, doc):
    checked = loaded(edition, doc, "light").language.get("fonts", [])
    assert checked, f"{doc}: no element with Korean text of its own was found to check"
    for item in checked:
        korean = sum(f["glyphCount"] for f in item["fonts"] if _KOREAN_FONT.search(f["familyName"]))
        assert korean >= item["hangul"], (
            f"{edition} {doc}: {item['selector']} {item['text']!r}: {item['hangul']} Hangul "
            f"syllables, drawn with {item['fonts']} (a font without Korean glyphs draws boxes)"
        )


def _published(url: str, site_root: str) -> tuple[str, bool]:
    path = urlparse(url).path
    root = urlparse(site_root).path.rstrip("/")
    rel = path[len(root) :].lstrip("/") if root and path.startswith(root) else path.lstrip("/")
    return rel, (PUBLISHED / rel).exists()


OTHER = {"book": "ko/", "ko": "", "student": "ko/student/", "ko_student": "student/"}


@pytest.mark.parametrize(("edition", "doc"), loaded_pages(BOOKS + STUDENTS))
def test_the_language_switch_leads_to_the_same_page(loaded, request, edition, doc):
    page = loaded(edition, doc, "light")
    assert page.language["lang"] == ("ko" if edition in KOREAN else "en"), page.language["lang"]
    href = page.language["switch"]
    assert href, f"{edition} {doc}: no link to the page in the other language"
    assert page.language["switchTarget"] is None, "the other language opens in a new tab"
    # the English book is served alone (_build/html); the other editions within the
    # published site, whose root is the server's
    site = request.getfixturevalue(f"{edition}_site")
    server_root = site if edition == "book" else re.sub(r"/(ko/student|student|ko)$", "", site)
    rel, exists = _published(href, server_root)
    assert rel == f"{OTHER[edition]}{doc}.html", f"{edition} {doc}: the switch leads to {rel}"
    assert exists, f"{edition} {doc}: {rel} is not published"


@pytest.mark.parametrize("doc", PAGES)
@pytest.mark.parametrize("edition", STUDENTS)
def test_every_student_page_links_its_page_in_the_other_language(edition, doc):
    """From the HTML, on the pages of the student editions that are not loaded (the link's
    href as written; the loaded pages' test above checks it as the browser resolves it)."""
    root = {"student": PUBLISHED / "student", "ko_student": KO / "student"}[edition]
    html = (root / f"{doc}.html").read_text(encoding="utf-8")
    found = re.findall(r'<a class="[^"]*btn-language-switch[^"]*"[^>]*href="([^"]*)"', html)
    found += re.findall(r'<a [^>]*href="([^"]*)"[^>]*class="[^"]*btn-language-switch', html)
    assert len(found) == 1, f"{edition} {doc}: {len(found)} language links"
    target = (root / doc).parent / found[0]
    expected = PUBLISHED / f"{OTHER[edition]}{doc}.html"
    assert target.resolve() == expected.resolve(), f"{edition} {doc}: leads to {found[0]}"
    assert expected.exists(), f"{edition} {doc}: {expected} is not published"


def test_the_korean_book_is_published_beside_the_english_one():
    for doc in PAGES:
        assert (KO / f"{doc}.html").exists() and (KO / "student" / f"{doc}.html").exists(), doc
    assert '<html lang="ko"' in (KO / f"{PAGES[0]}.html").read_text(encoding="utf-8")

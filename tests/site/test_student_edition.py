"""The student edition (`make student`): every exercise, no solution."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT

TEACHER = ROOT / "_build" / "html" / "notebooks"
STUDENT = ROOT / "_build" / "student" / "_build" / "html" / "notebooks"


def chapters():
    return sorted(p.name for p in TEACHER.glob("*.html"))


def test_both_editions_were_built():
    if not STUDENT.exists() or not TEACHER.exists():
        pytest.fail("build both editions first: make book and make student")
    assert chapters()
    assert sorted(p.name for p in STUDENT.glob("*.html")) == chapters()


@pytest.mark.parametrize("name", chapters())
def test_student_chapter_keeps_exercises_and_drops_solutions(name):
    teacher = (TEACHER / name).read_text()
    student = (STUDENT / name).read_text()
    exercises = len(re.findall(r'class="exercise admonition', teacher))
    assert exercises >= 4, "a chapter should have at least four exercises"
    assert len(re.findall(r'class="exercise admonition', student)) == exercises
    assert re.search(r'class="solution[ "]', teacher), "the full edition shows solutions"
    assert not re.search(r'class="solution[ "]', student), (
        "a solution leaked into the student edition"
    )
    assert "(student edition)" in student

"""book/exercises.yml lists every exercise of every chapter, with checks that exist.

The list is the single source of the instructor's page (book/_ext/instructors.py) and of
the grader (scripts/grade.py), so it must agree with the chapters: every exercise label of
every chapter, in order, and for each self-check a `helpers.checks` function that the
exercise's statement names and its solution calls on the function listed.
"""

from __future__ import annotations

import copy
import importlib.util
import re

import nbformat
import pytest
import yaml

import helpers.checks
from tests.conftest import ROOT

LIST = ROOT / "book" / "exercises.yml"
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
DIFFICULTIES = {"warm-up", "core", "challenge"}
EXERCISE = re.compile(r"```\{exercise\}[^\n]*\n(?::[^\n]*\n)*?:label: (\S+)\n(.*?)\n```", re.S)
CHECK_CALL = re.compile(r"helpers\.checks\.(check_\w+)\((\w+)")

_spec = importlib.util.spec_from_file_location("instructors", ROOT / "book/_ext/instructors.py")
instructors = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(instructors)


def chapter_exercises(path) -> dict[str, dict]:
    """label -> {"statement": text, "calls": {(check, function)}} in the order of the chapter.

    The calls are the `helpers.checks.check_*(fn)` calls in the code cells from the
    exercise to the next one (its solution).
    """
    found: dict[str, dict] = {}
    current = None
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            for match in EXERCISE.finditer(cell.source):
                current = match.group(1)
                found[current] = {"statement": match.group(2), "calls": set()}
        elif cell.cell_type == "code" and current is not None:
            found[current]["calls"] |= set(CHECK_CALL.findall(cell.source))
    return found


def problems(data: dict) -> list[str]:
    """Everything that is wrong with the list `data` (the parsed book/exercises.yml)."""
    out = []
    listed = [c["notebook"] for c in data["chapters"]]
    chapters = [p.stem for p in CHAPTERS]
    out += [f"{s}: chapter not listed in book/exercises.yml" for s in chapters if s not in listed]
    out += [
        f"{s}: listed, but there is no notebooks/{s}.ipynb" for s in listed if s not in chapters
    ]
    if [s for s in listed if s in chapters] != [s for s in chapters if s in listed]:
        out.append(f"chapters listed out of order: {listed}")
    for chapter in data["chapters"]:
        stem = chapter["notebook"]
        if stem not in chapters:
            continue
        actual = chapter_exercises(ROOT / "notebooks" / f"{stem}.ipynb")
        labels = [e["label"] for e in chapter["exercises"]]
        out += [f"{stem}: exercise {x} is not listed" for x in actual if x not in labels]
        out += [
            f"{stem}: listed exercise {x} is not in the chapter" for x in labels if x not in actual
        ]
        if [x for x in labels if x in actual] != [x for x in actual if x in labels]:
            out.append(f"{stem}: exercises listed out of order")
        for e in chapter["exercises"]:
            where = f"{stem}: {e['label']}"
            required = {"label", "topic", "difficulty", "minutes", "checks"}
            if not required <= set(e) <= required | {"points"}:
                out.append(f"{where}: fields {sorted(e)}")
                continue
            points = e.get("points", {})
            parts = {"written"} | {c.get("check") for c in e["checks"]}
            parts |= {c.get("function") for c in e["checks"]}
            if not isinstance(points, dict) or any(
                k not in parts or isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0
                for k, v in points.items()
            ):
                out.append(
                    f"{where}: points must map 'written', a listed check or function to a "
                    f"positive number, not {points!r}"
                )
            topic = e["topic"]
            if not isinstance(topic, str) or not topic.strip() or "\n" in topic or len(topic) > 90:
                out.append(f"{where}: the topic must be one line of at most 90 characters")
            if e["difficulty"] not in DIFFICULTIES:
                out.append(f"{where}: difficulty {e['difficulty']!r} not in {DIFFICULTIES}")
            if not (isinstance(e["minutes"], int) and 5 <= e["minutes"] <= 240):
                out.append(f"{where}: minutes must be a whole number from 5 to 240")
            if e["label"] not in actual:
                continue
            statement, calls = actual[e["label"]]["statement"], actual[e["label"]]["calls"]
            listed_calls = set()
            for c in e["checks"]:
                check, function = c.get("check"), c.get("function")
                listed_calls.add((check, function))
                if check not in helpers.checks.__all__ or not callable(
                    getattr(helpers.checks, check, None)
                ):
                    out.append(f"{where}: {check} is not a check in helpers.checks")
                for name in (check, function):
                    if f"{name}(" not in statement and f"{name}`" not in statement:
                        out.append(f"{where}: the exercise's statement does not name {name}")
                if (check, function) not in calls:
                    out.append(f"{where}: the solution never calls {check}({function})")
            out += [
                f"{where}: the solution calls {check}({function}), which is not listed"
                for check, function in sorted(calls - listed_calls)
            ]
    return out


@pytest.fixture(scope="module")
def data():
    return yaml.safe_load(LIST.read_text())


def test_the_list_agrees_with_the_chapters_and_the_checks(data):
    assert problems(data) == []


def test_every_chapter_has_exercises_and_most_have_checks(data):
    for chapter in data["chapters"]:
        assert len(chapter["exercises"]) >= 4, chapter["notebook"]
        assert any(e["checks"] for e in chapter["exercises"]), chapter["notebook"]


def test_a_missing_exercise_or_a_wrong_name_is_found(data):
    # The same check on copies of the list with one mistake each: each must be reported.
    first = data["chapters"][0]
    stem = first["notebook"]
    checked = next(e for e in first["exercises"] if e["checks"])
    cases = []

    broken = copy.deepcopy(data)
    del broken["chapters"][0]["exercises"][0]
    cases.append((broken, f"{stem}: exercise {first['exercises'][0]['label']} is not listed"))

    broken = copy.deepcopy(data)
    broken["chapters"][0]["exercises"][0]["label"] = "ex-no-such-exercise"
    cases.append((broken, f"{stem}: listed exercise ex-no-such-exercise is not in the chapter"))

    broken = copy.deepcopy(data)
    del broken["chapters"][-1]
    cases.append((broken, f"{data['chapters'][-1]['notebook']}: chapter not listed"))

    for field, value, message in [
        ("check", "check_no_such_thing", "check_no_such_thing is not a check in helpers.checks"),
        ("function", "my_other_name", "the solution never calls"),
    ]:
        broken = copy.deepcopy(data)
        chapter = broken["chapters"][0]
        entry = next(e for e in chapter["exercises"] if e["label"] == checked["label"])
        entry["checks"][0][field] = value
        cases.append((broken, f"{stem}: {checked['label']}: {message}"))

    broken = copy.deepcopy(data)
    entry = next(e for e in broken["chapters"][0]["exercises"] if e["label"] == checked["label"])
    entry["checks"] = []
    cases.append((broken, f"{stem}: {checked['label']}: the solution calls"))

    broken = copy.deepcopy(data)
    broken["chapters"][0]["exercises"][0]["difficulty"] = "hard"
    cases.append((broken, "difficulty 'hard'"))

    for points in ({"written": 0}, {"my_no_such_function": 2}, {"written": True}, [3]):
        broken = copy.deepcopy(data)
        broken["chapters"][0]["exercises"][0]["points"] = points
        cases.append((broken, "points must map 'written', a listed check or function"))

    broken = copy.deepcopy(data)
    broken["chapters"][0]["exercises"][0]["weight"] = 2
    cases.append((broken, "fields ["))

    for broken, message in cases:
        found = problems(broken)
        assert any(message in p for p in found), (message, found)

    # and valid points are accepted: the written part and a listed function or check
    fine = copy.deepcopy(data)
    entry = next(e for e in fine["chapters"][0]["exercises"] if e["label"] == checked["label"])
    entry["points"] = {"written": 3, checked["checks"][0]["function"]: 2.5}
    assert problems(fine) == problems(data)


def test_the_instructors_page_shows_every_exercise(data):
    page = (ROOT / "book" / "instructors.md").read_text()
    assert "```{exercise-table}" in page
    assert "book/instructors" in (ROOT / "_toc.yml").read_text()
    for chapter in data["chapters"]:
        table = "\n".join(instructors.table_markdown(chapter, "https://colab.example/x.ipynb"))
        for e in chapter["exercises"]:
            assert f"{{ref}}`{e['label']}`" in table
            assert e["topic"] in table and f"{e['minutes']} min" in table
            for c in e["checks"]:
                assert f"`{c['check']}({c['function']})`" in table
        assert table.count("\n* - ") == len(chapter["exercises"]) + 1  # and the header

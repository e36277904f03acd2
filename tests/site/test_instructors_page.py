"""The instructor's page of the built site: a table row and a link for every exercise."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.conftest import ROOT

PAGE = ROOT / "_build" / "html" / "book" / "instructors.html"


def test_the_page_links_every_exercise_and_student_notebook():
    if not PAGE.exists():
        pytest.fail("build the book first: make book")
    html = PAGE.read_text()
    data = yaml.safe_load((ROOT / "book" / "exercises.yml").read_text())
    for chapter in data["chapters"]:
        stem = chapter["notebook"]
        for e in chapter["exercises"]:
            # A resolved reference, numbered as on the chapter's page ("Exercise 1.3").
            link = re.search(
                rf'href="../notebooks/{stem}.html#{e["label"]}"><span[^>]*>Exercise (\d+)\.\d+<',
                html,
            )
            assert link, f"no link to {e['label']}"
        assert f"/blob/main/editions/student/{stem}.ipynb" in html
    assert html.count("<tr") == sum(len(c["exercises"]) + 1 for c in data["chapters"])
    # The numbers quoted from the code are there, not the role's raw text.
    assert "book-value" not in html and "1e-06" in html

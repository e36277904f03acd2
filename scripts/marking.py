"""The marking sheets of `make grade`: one HTML page per chapter for the work read by hand.

For every part no self-check grades (a written answer: a proof, a derivation, a
prediction; a function without a check), in the book's order, a sheet shows the book's
solution, then every student's answer to that part, rendered (Markdown, and maths typeset
by a copy of MathJax beside the page: no network), each with a field for points and one
for a comment. The students who left the part as its starting cell are listed once,
with 0 points. What the marker enters is kept in the browser (localStorage) as they go;
"Save marks" downloads ``marks-CHAPTER.json``, which `make marks` (scripts/gradebook.py)
merges into the CSV and the grade books.

A student's answer is shown as text: the Markdown renderer escapes any HTML in it, so an
answer cannot run a script in the marker's browser.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MATHJAX = ROOT / "node_modules" / "mathjax" / "es5"

STYLE = """
body { font: 16px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 0 auto; padding: 1rem;
       color: #1b1b1b; background: #fff; }
header { position: sticky; top: 0; background: #fff; border-bottom: 1px solid #ccc;
         padding: .5rem 0; z-index: 1; display: flex; gap: 1rem; align-items: center;
         flex-wrap: wrap; }
section.part { border-top: 3px solid #345; margin-top: 2rem; }
details.solution { background: #f3f6f9; padding: .5rem 1rem; border-radius: 4px; }
article.answer { border: 1px solid #ccc; border-radius: 4px; margin: .5rem 0;
                 padding: .25rem .75rem; }
article.answer h4 { margin: 0; }
article.answer p { margin: .25rem 0; }
article.answer.marked { border-color: #2a7; }
.mark { display: flex; gap: .75rem; align-items: center; flex-wrap: wrap;
        border-top: 1px dashed #ccc; padding: .25rem 0; }
.mark input { width: 4rem; font-size: 1rem; }
.mark textarea { flex: 1; min-width: 12rem; height: 1.8rem; font: inherit; resize: vertical; }
pre { background: #f6f6f6; padding: .5rem; overflow-x: auto; }
.maths, mjx-container[display="true"] { overflow-x: auto; overflow-y: hidden; max-width: 100%; }
section.part { scroll-margin-top: 4rem; }
.none { color: #555; }
@media (prefers-color-scheme: dark) {
  body, header { background: #15181c; color: #e6e6e6; }
  details.solution, pre { background: #22272e; }
}
"""
SCRIPT = """
const sheet = document.body.dataset.sheet;
const store = "marks:" + sheet;
const saved = JSON.parse(localStorage.getItem(store) || "{}");
function collect() {
  const marks = {};
  for (const a of document.querySelectorAll("article.answer")) {
    const p = a.querySelector("input").value, c = a.querySelector("textarea").value;
    if (p !== "" || c !== "") {
      marks[a.dataset.key] = {points: p === "" ? null : Number(p), comment: c};
    }
    a.classList.toggle("marked", p !== "");
  }
  return marks;
}
function update() {
  const marks = collect();
  localStorage.setItem(store, JSON.stringify(marks));
  const done = Object.values(marks).filter(m => m.points !== null).length;
  document.getElementById("count").textContent =
    done + " of " + document.querySelectorAll("article.answer").length + " answers marked";
}
for (const a of document.querySelectorAll("article.answer")) {
  const m = saved[a.dataset.key];
  if (m) {
    a.querySelector("input").value = m.points ?? "";
    a.querySelector("textarea").value = m.comment || "";
  }
  a.querySelector("input").addEventListener("input", update);
  a.querySelector("textarea").addEventListener("input", update);
}
document.getElementById("save").addEventListener("click", () => {
  const data = {version: 1, sheet: sheet, marks: collect()};
  const link = document.createElement("a");
  const blob = new Blob([JSON.stringify(data, null, 1)], {type: "application/json"});
  link.href = URL.createObjectURL(blob);
  link.download = "marks-" + sheet + ".json";
  link.click();
});
update();
"""


def render_markdown(text: str) -> str:
    """Markdown as HTML, raw HTML escaped, maths left as \\( \\) and \\[ \\] for MathJax."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    def maths(content: str, options: dict) -> str:
        if options.get("display_mode"):
            return f'<div class="maths">\\[{html.escape(content)}\\]</div>'
        return f"<span>\\({html.escape(content)}\\)</span>"

    md = MarkdownIt("commonmark", {"html": False}).use(dollarmath_plugin, renderer=maths)
    return md.render(text)


def book_solutions(stem: str) -> dict[str, str]:
    """Exercise label -> its solution in the chapter (its text, and its code in fences)."""
    path = ROOT / "notebooks" / f"{stem}.ipynb"
    if not path.exists():
        return {}
    pieces = []
    for cell in json.loads(path.read_text()).get("cells", []):
        source = "".join(cell.get("source", []))
        if cell.get("cell_type") == "code":
            source = f"\n```python\n{source}\n```\n"
        pieces.append(source)
    text = "\n\n".join(pieces)
    found = {}
    pattern = r"```\{solution-start\}\s+(\S+)[^\n]*\n(?::[^\n]*\n)*```\n(.*?)```\{solution-end\}"
    for match in re.finditer(pattern, text, re.S):
        found[match.group(1)] = match.group(2).strip()
    return found


def copy_mathjax(folder: Path) -> bool:
    """MathJax beside the sheets (once); False when node_modules has none (`make book`)."""
    if not (MATHJAX / "tex-chtml.js").exists():
        return False
    target = folder / "mathjax"
    if not (target / "tex-chtml.js").exists():
        shutil.copytree(MATHJAX, target, ignore=shutil.ignore_patterns("sre", "*.map"))
    return True


def write_sheets(submissions, chapters: dict, folder: Path) -> list[Path]:
    """One sheet per chapter with parts to mark by hand; return their paths."""
    import grade

    folder.mkdir(parents=True, exist_ok=True)
    mathjax = copy_mathjax(folder)
    written = []
    for stem, exercises in chapters.items():
        mine = [s for s in submissions if s.chapter == stem and s.rows]
        rows = [r for s in mine for r in s.rows if not r["check"] and r.get("max_points")]
        if not rows:
            continue
        numbers = grade.student_edition_exercises(stem)
        solutions = book_solutions(stem)
        parts = []
        for item in grade.hand_items(stem, exercises):
            label, _, function = item
            these = [r for r in rows if (r["exercise"], r["function"]) == (label, function)]
            if these:
                parts.append(_part(label, function, these, numbers, solutions))
        page = folder / f"{stem}.html"
        title = grade.chapter_titles([stem]).get(stem, stem)
        page.write_text(
            _page(stem, title, parts, mathjax), encoding="utf-8", errors="backslashreplace"
        )
        written.append(page)
    return written


def _part(label, function, rows, numbers, solutions) -> str:
    number = numbers.get(label, {}).get("number", label)
    what = f"<code>{html.escape(function)}</code>" if function else "written answer"
    most = rows[0]["max_points"]
    out = [
        f'<section class="part" id="{html.escape(label)}-{html.escape(function or "written")}">',
        f"<h2>Exercise {html.escape(str(number))}: {what} ({_points(most)})</h2>",
    ]
    solution = solutions.get(label)
    if solution:
        out.append('<details class="solution"><summary>The book\'s solution</summary>')
        out.append(render_markdown(solution) + "</details>")
    blank = [r["student"] for r in rows if r["status"] != "manual"]
    for r in rows:
        if r["status"] != "manual":
            continue
        key = "|".join((r["student"], r["chapter"], r["exercise"], r["function"]))
        answer = r.get("answer", "")
        body = (
            f"<pre><code>{html.escape(answer)}</code></pre>"
            if function
            else render_markdown(answer)
        )
        out.append(
            f'<article class="answer" data-key="{html.escape(key)}">'
            f"<h4>{html.escape(r['student'])}</h4>{body}"
            f'<div class="mark"><label>Points (of {most:g}) '
            f'<input type="number" min="0" max="{most:g}" step="0.5" '
            f'aria-label="points for {html.escape(r["student"])}"></label>'
            f'<textarea aria-label="comment for {html.escape(r["student"])}" '
            'placeholder="Comment (goes to the student)"></textarea></div></article>'
        )
    if blank:
        names = ", ".join(html.escape(b) for b in blank)
        out.append(f'<p class="none">Not attempted (0 points): {names}</p>')
    out.append("</section>")
    return "\n".join(out)


def _points(value: float) -> str:
    return f"{value:g} point" + ("" if value == 1 else "s")


def _page(stem: str, title: str, parts: list[str], mathjax: bool) -> str:
    script = (
        '<script>window.MathJax = {tex: {inlineMath: [["\\\\(", "\\\\)"]]}};</script>'
        '<script defer src="mathjax/tex-chtml.js"></script>'
        if mathjax
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Marking: {html.escape(title)}</title><style>{STYLE}</style>{script}</head>
<body data-sheet="{html.escape(stem)}">
<header><strong>Marking: {html.escape(title)}</strong>
<span id="count"></span><button id="save" type="button">Save marks</button></header>
<main>
<p>Each part below is read by hand: the book's solution, then every answer. Enter points
and a comment; they are kept in this browser as you go. <strong>Save marks</strong>
downloads <code>marks-{html.escape(stem)}.json</code>: merge it with
<code>make marks RESULTS=results.csv MARKS=marks-{html.escape(stem)}.json</code>.</p>
{"".join(parts)}
</main>
<script>{SCRIPT}</script>
</body></html>
"""

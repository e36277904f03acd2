"""The Colab edition: every chapter as a Jupyter notebook that reads like the site.

A Sphinx builder (``colab``) that writes, for every chapter notebook, a copy in which the
MyST markup of the markdown cells is rendered into plain Jupyter markdown, from the
*resolved* doctree: Sphinx has already substituted the glued values, numbered equations,
theorems, exercises and figures, resolved references and citations. Code cells, their
outputs, metadata and tags are copied from the chapter, except that the first code cell
(the Colab install cell) starts collapsed and no output keeps a widget view.

How markdown cells are found in the doctree: myst-nb keeps no boundary between markdown
cells, so while this builder runs, ``source-read`` prepends a MyST comment
``% colab-edition-cell N`` to markdown cell N. The comments survive into the doctree in
document order (also when sphinx-exercise moves the nodes between ``solution-start`` and
``solution-end`` into a solution), and code cells are myst-nb containers that carry their
``cell_index``. The converter walks the doctree in order and cuts it into cells there.

What becomes what (the site shows the same):

- glue roles: the glued text; ``{ref}``, ``{numref}``, ``{eq}``, ``{prf:ref}``, ``{doc}``:
  links with the site's link text: within the notebook (``#id``) when the target is in
  the chapter (a section, equation, theorem, exercise, figure or table, which then
  carries an ``<a id="id">`` with the site's id), else to the page and anchor of the
  online book; ``{cite}``: the author-year text linking to the bibliography page;
- display maths: ``$$ ... \\tag{2.1} $$`` with the site's equation number; inside a
  block quote on one line (see ``remove_math``: no "> " may land inside a formula);
- theorems, lemmas, definitions, ... and admonitions: a block quote under a bold title;
  dropdown admonitions and toggles: ``<details>``; proofs: *Proof.* ... ∎;
- exercises: a heading "Exercise 2.1 (title)"; solutions: a heading "Solution to
  Exercise 2.1" one level deeper, collapsed when the notebook opens (JupyterLab's
  ``jp-MarkdownHeadingCollapsed``, Colab's ``collapsed_sections``), so that its text and
  code cells stay hidden until the reader opens them;
- figures made by a code cell: a caption cell after it ("Fig. 2.1 ..."); figure
  directives and glued figures: the picture (a data URI) and its caption;
- label targets: removed; tables: pipe tables; lists, quotes, code blocks as usual.

What the edition adds (cells whose metadata says ``role``): a first cell, above the
title, saying how to run the notebook (``about``: Runtime ▸ Run all, the install cell, the
explorers, the folded solutions); and a last cell after the exercises (``end``), a
heading one level above the solutions' that ends the last solution's section. Without
it the last solution's cells were the notebook's last: JupyterLab's Run All leaves the
last cell active and unfolds the heading above it, and saving then stored the last
solution open. Glue cells (scripts/glue_cells.py) keep no output: theirs is a value
for the site, which JupyterLab cannot show and drew as an empty band under the cell.

Anything else stops the build with an error that names the chapter, the cell and the
construct (``ColabEditionError``): a chapter never reaches Colab with raw markup.

scripts/colab_edition.py runs this builder and writes editions/colab/.

Why not sphinx-tojupyter's ``jupyter`` builder (QuantEcon's tool; version 0.6.0 was tried
on this book with Sphinx 7.4, myst-nb 1.4, sphinx-exercise and sphinx-proof): it builds,
substitutes glued text and numbers equations, but it turns every code cell into a fenced
code block inside a markdown cell (no code cells, outputs, tags or install cell left), writes
exercise titles as "##  (title)Exercise 2.1", gives solutions as plain "## Solution"
headings that break the section levels and are not collapsed, repeats "Proof." in proofs,
links references to local .ipynb files instead of the site, and leaves raw TeX in link text.
"""

from __future__ import annotations

import base64
import copy
import json
import mimetypes
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

from docutils import nodes
from sphinx import addnodes
from sphinx.builders import Builder
from sphinx.util import logging

logger = logging.getLogger(__name__)

MARK = "colab-edition-cell"
# Cell metadata that marks what the edition added or how a cell relates to the chapter
# (chapter_cell; role: exercise or caption; exercise: the label of an exercise's cell;
# solution: the exercise label of a solution's cell), and notebook metadata (chapter;
# site: the online book's address; exercises: label -> number; solutions: label -> the
# ids of its cells), for readers of the edition: scripts/student_edition.py replaces
# the solutions with starting cells from them.
META = "colab_edition"

ADMONITION_TITLES = {
    "attention": "Attention",
    "caution": "Caution",
    "danger": "Danger",
    "error": "Error",
    "hint": "Hint",
    "important": "Important",
    "note": "Note",
    "tip": "Tip",
    "warning": "Warning",
    "seealso": "See also",
}


class ColabEditionError(Exception):
    """A construct the converter cannot render (the message names chapter and cell)."""


# --------------------------------------------------------------------------- helpers


def site_url(config) -> str:
    """The online book's base URL, ending in "/".

    ``html_baseurl`` when it is set; otherwise the GitHub Pages address of the
    repository configured in _config.yml (https://OWNER.github.io/REPO/).
    """
    base = (config.html_baseurl or "").strip()
    if base:
        return base.rstrip("/") + "/"
    repo = (config.html_theme_options or {}).get("repository_url", "")
    parts = urlparse(repo).path.strip("/").split("/")
    if urlparse(repo).netloc != "github.com" or len(parts) != 2:
        raise ColabEditionError(
            f"cannot derive the site's address from repository url {repo!r}: set html.baseurl"
        )
    return f"https://{parts[0]}.github.io/{parts[1]}/"


_ESCAPE = re.compile(r"([\\`*_<>$|~])")  # not [ ]: \[ starts display maths in Jupyter
_LINE_START = re.compile(r"^([#>+=-]|\d+[.)])(?=\s|$)")


def escape(text: str) -> str:
    """Plain text as markdown that renders as exactly this text."""
    return _ESCAPE.sub(r"\\\1", text)


def escape_line_start(text: str) -> str:
    """A paragraph's text, kept from starting a heading, quote, list or rule.

    A backslash escapes only punctuation (CommonMark), so "1. step" becomes "1\\. step":
    "\\1. step" would show its backslash.
    """
    start = _LINE_START.match(text)
    if start is None:
        return text
    if start.group(1)[0].isdigit():
        end = start.end(1) - 1  # the "." or ")" after the digits
        return text[:end] + "\\" + text[end:]
    return "\\" + text


def code_span(text: str) -> str:
    ticks = max((len(m) for m in re.findall(r"`+", text)), default=0) + 1
    fence = "`" * ticks
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


# ------------------------------------------------------------- maths as Jupyter finds it
#
# JupyterLab (and Jupyter Notebook before it) takes the maths out of a markdown cell
# before the markdown parser sees it, and puts it back into the HTML afterwards:
# removeMath and replaceMath of @jupyterlab/rendermime (src/latex.ts), ported here
# line by line. A formula ends at its closing delimiter, or is dropped at a blank line;
# whatever lies between the delimiters is the formula, quote prefixes included. So a
# display formula inside a block quote must not span lines: the "> " in front of its
# second line would be typeset as part of it.

_MATH_SPLIT = re.compile(
    r"(\$\$?|\\(?:begin|end)\{[a-z]*\*?\}|\\[{}$]|[{}]|(?:\n\s*)+|@@\d+@@|\\\\[()[\]])",
    re.I,
)


def remove_math(text: str, *, html: bool = True) -> tuple[str, list[str]]:
    """JupyterLab's removeMath: (the text with every formula replaced by "@@N@@", the
    formulas). With ``html=False`` the formulas are kept as written (JupyterLab escapes
    ``&``, ``<`` and ``>`` in them for the HTML it builds)."""
    math: list[str] = []
    start = end = last = None
    braces = 0
    if "`" in text or "~~~" in text:
        # Code spans and fenced code are not maths: hide their dollars ("~D").
        text = text.replace("~", "~T")
        text = re.sub(
            r"^(?P<fence>`{3,}|(?:~T){3,})[^`\n]*\n([\s\S]*?)^(?P=fence)`*$",
            lambda m: m.group(0).replace("$", "~D"),
            text,
            flags=re.M,
        )
        text = re.sub(
            r"(^|[^\\])(`+)([^\n]*?[^`\n])\2(?!`)",
            lambda m: m.group(0).replace("$", "~D"),
            text,
            flags=re.M,
        )

        def de_tilde(s: str) -> str:
            return re.sub(r"~([TD])", lambda m: "~" if m.group(1) == "T" else "$", s)
    else:

        def de_tilde(s: str) -> str:
            return s

    def process(i: int, j: int, blocks: list[str]) -> list[str]:
        block = "".join(blocks[i : j + 1])
        if html:
            block = block.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        while j > i:
            blocks[j] = ""
            j -= 1
        blocks[i] = f"@@{len(math)}@@"
        math.append(de_tilde(block))
        return blocks

    blocks = _MATH_SPLIT.split(re.sub(r"\r\n?", "\n", text))
    i = 1
    while i < len(blocks):
        block = blocks[i]
        if block[:1] == "@":
            blocks[i] = f"@@{len(math)}@@"
            math.append(block)
        elif start is not None:
            if block == end:
                if braces:
                    last = i
                else:
                    blocks = process(start, i, blocks)
                    start = end = last = None
            elif re.search(r"\n.*\n", block):
                if last is not None:
                    i = last
                    blocks = process(start, i, blocks)
                start = end = last = None
                braces = 0
            elif block == "{":
                braces += 1
            elif block == "}" and braces:
                braces -= 1
        elif block in ("$", "$$"):
            start, end, braces = i, block, 0
        elif block in ("\\\\(", "\\\\["):
            start, end, braces = i, ("\\\\)" if block[-1] == "(" else "\\\\]"), 0
        elif block[1:6] == "begin":
            start, end, braces = i, "\\end" + block[6:], 0
        i += 2
    if start is not None and last is not None:
        blocks = process(start, last, blocks)
    return de_tilde("".join(blocks)), math


def replace_math(text: str, math: list[str]) -> str:
    """JupyterLab's replaceMath: put the formulas back for "@@N@@"."""

    def back(m: re.Match) -> str:
        formula = math[int(m.group(1))]
        if formula.startswith("\\\\(") and formula.endswith("\\\\)"):
            formula = "\\(" + formula[3:-3] + "\\)"
        elif formula.startswith("\\\\[") and formula.endswith("\\\\]"):
            formula = "\\[" + formula[3:-3] + "\\]"
        return formula

    return re.sub(r"@@(\d+)@@", back, text)


def one_line_maths(text: str) -> str:
    """The text with every formula (as JupyterLab finds them) written on one line."""
    stripped, math = remove_math(text, html=False)
    if not any("\n" in m for m in math):
        return text
    for k, formula in enumerate(math):
        if "\n" in formula:
            if re.search(r"(?<!\\)%", formula):
                raise ColabEditionError(f"a TeX comment in a formula inside a quote: {formula!r}")
            math[k] = re.sub(r"\s*\n\s*", " ", formula)
    return re.sub(r"@@(\d+)@@", lambda m: math[int(m.group(1))], stripped)


def prefix_lines(text: str, first: str, rest: str | None = None) -> str:
    rest = first if rest is None else rest
    if ">" in first + rest:  # a block quote: no formula may span its lines
        text = one_line_maths(text)
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        p = first if i == 0 else rest
        out.append((p + line) if line else p.rstrip())
    return "\n".join(out)


def join_blocks(blocks: list[str]) -> str:
    return "\n\n".join(b.strip("\n") for b in blocks if b and b.strip())


def is_code_cell(node: nodes.Node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") == "cell_code"


def is_marker(node: nodes.Node) -> bool:
    return isinstance(node, nodes.comment) and node.astext().startswith(MARK + " ")


def marker_index(node: nodes.Node) -> int:
    return int(node.astext().split()[1])


def node_kind(node: nodes.Node) -> str:
    return type(node).__name__


# --------------------------------------------------------------------- code cells

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def collapse_install_cell(cell: dict) -> None:
    """The first code cell (the Colab install cell) starts collapsed in JupyterLab, which
    then shows only its first line, a comment that says what the cell does."""
    first_line = "".join(cell["source"]).split("\n", 1)[0]
    if first_line.startswith("# "):
        cell["metadata"].setdefault("jupyter", {})["source_hidden"] = True


#: The first cell of every notebook of the edition (``role: about``).
ABOUT = (
    "> **How to run this notebook.** In Colab, choose **Runtime ▸ Run all**, or run the "
    "cells in order from the top (Shift+Enter). The first code cell installs the book's "
    "`helpers` package in Colab (elsewhere it does nothing). The figures with a slider "
    "(explorers) come alive once their cell has run; until then they show one picture. "
    'Each exercise\'s solution is folded under its "Solution to Exercise" heading: open '
    "it with the arrow beside the heading."
)
GLUE_PREFIX = "application/papermill.record/"

#: The words the edition writes itself, by the book's language (config value ``language``;
#: the Korean edition is built from Korean notebooks, scripts/ko_edition.py). Theorems'
#: names and admonitions' titles come from the catalogues Sphinx and sphinx-proof use on
#: the site (``Words.realtype``, ``Words.admonition``).
WORDS = {
    "en": {
        "about": ABOUT,
        "exercise": "Exercise",
        "solution": "Solution to Exercise {number}",
        "solution_alone": "Solution",
        "figure": "Fig.",
        "table": "Table",
        "proof": "Proof.",
        "show": "Show",
        "end": "End of chapter {number}",
        "end_text": "The exercises end here, and so does the chapter.",
        "next": "Next: [{title}]({url}).",
    },
    "ko": {
        "about": (
            "> **이 노트북을 실행하는 방법.** Colab에서는 **런타임 ▸ 모두 실행**을 고르거나, 맨 "
            "위부터 셀을 차례로 실행한다(Shift+Enter). 첫 번째 코드 셀은 Colab에서 이 책의 "
            "`helpers` 패키지를 설치하고(다른 곳에서는 설치하지 않는다), 자체 점검 메시지와 그림의 "
            "글자를 한국어로 정한다. 슬라이더가 있는 그림(탐색기)은 그 셀을 실행하면 움직이기 "
            '시작하며, 그전에는 그림 하나만 보여 준다. 각 연습 문제의 풀이는 "연습 문제 … 풀이" '
            "제목 아래에 접혀 있으니, 제목 옆의 화살표를 눌러 펼친다."
        ),
        "exercise": "연습 문제",
        "solution": "연습 문제 {number} 풀이",
        "solution_alone": "풀이",
        "figure": "그림",
        "table": "표",
        "proof": "증명.",
        "show": "보기",
        "end": "{number}장의 끝",
        "end_text": "연습 문제는 여기서 끝나며, 이 장도 여기서 끝난다.",
        "next": "다음 장: [{title}]({url}).",
    },
}


class Words:
    """The edition's own words in the book's language."""

    def __init__(self, language: str) -> None:
        if language not in WORDS:
            raise ColabEditionError(f"no words for the language {language!r} (WORDS)")
        self.language = language
        self.words = WORDS[language]

    def __getitem__(self, key: str) -> str:
        return self.words[key]

    def realtype(self, realtype: str) -> str:
        """A theorem's kind as the site names it ("Theorem", in Korean "정리")."""
        if self.language == "en":
            return realtype.title()
        from sphinx.locale import get_translation

        return str(get_translation("proof")(realtype.title()))

    def admonition(self, kind: str) -> str | None:
        if kind not in ADMONITION_TITLES:
            return None
        if self.language == "en":
            return ADMONITION_TITLES[kind]
        from sphinx.locale import admonitionlabels

        return str(admonitionlabels.get(kind, ADMONITION_TITLES[kind]))


def drop_glue_outputs(cell: dict) -> None:
    """A glue cell's outputs hold only values for the site (myst-nb's glue): dropped."""
    outputs = cell.get("outputs", [])
    kept = [
        o
        for o in outputs
        if not o.get("data") or any(not k.startswith(GLUE_PREFIX) for k in o["data"])
    ]
    if len(kept) != len(outputs):
        cell["outputs"] = kept


def drop_widget_views(cell: dict) -> None:
    """No output names a widget model: a stored view cannot be restored (its model lived
    in the kernel that made it), and JupyterLab would show "Error displaying widget:
    model not found" in its place. The other representations of the output stay."""
    for output in cell.get("outputs", []):
        output.get("data", {}).pop(WIDGET_VIEW, None)


# ------------------------------------------------------------------------ the converter


class Converter:
    """Turns one chapter's resolved doctree into the cells of its Colab edition."""

    def __init__(self, builder: ColabBuilder, docname: str, doctree: nodes.document) -> None:
        self.builder = builder
        self.env = builder.env
        self.docname = docname
        self.doctree = doctree
        self.site = builder.site
        self.page = self.site + docname + ".html"
        self.words = builder.words
        self.fignumbers = self.env.toc_fignumbers.get(docname, {})
        self.cell = "?"  # the chapter cell being converted, for error messages
        self.solution_cells: dict[str, list] = {}  # exercise label -> ids of its solution
        self.exercises: dict[str, str] = {}  # exercise label -> its number ("2.1")
        self.local = self.local_targets()  # anchors of this chapter its own links name
        self.anchored: set[str] = set()  # those written into the notebook so far

    # -------------------------------------------------------------- errors, numbers

    def fail(self, node: nodes.Node | None, what: str) -> ColabEditionError:
        where = f"{self.docname}.ipynb, cell {self.cell}"
        source = ""
        if node is not None:
            source = node.astext().strip().replace("\n", " ")[:80]
            source = f" (near {source!r})" if source else ""
        return ColabEditionError(
            f"{where}: the Colab edition cannot render {what}{source}. "
            "Extend book/_ext/colab_edition.py or write it another way."
        )

    def number(self, figtype: str, node_id: str) -> str:
        numbers = self.fignumbers.get(figtype, {}).get(node_id)
        if not numbers:
            return ""
        return ".".join(map(str, numbers))

    def section_number(self, section: nodes.section) -> str:
        """The section's number as the site shows it ("1.2.1. "), or nothing."""
        numbers = self.env.toc_secnumbers.get(self.docname, {})
        anchors = [""] if section.parent is self.doctree else []
        anchors += ["#" + i for i in section.get("ids", [])]
        number = next((numbers[a] for a in anchors if numbers.get(a)), None)
        return ".".join(map(str, number)) + ". " if number else ""

    # ------------------------------------------------ links within the chapter

    def local_targets(self) -> set[str]:
        """The anchors of this chapter that its own links name and that the notebook
        carries: a section, an equation, a theorem (or lemma, definition, ...), an
        exercise, a figure or a table. Each gets an ``<a id="...">`` with the site's id
        where the notebook shows it, and links to it stay in the notebook. JupyterLab
        turns the id into ``data-jupyter-id`` and scrolls to it when a link ``#id`` is
        clicked; its own heading ids (the heading's text with spaces as "-") are not
        used, because a click finds them only when the text has no character a URL
        escapes (quotes, maths, any non-ASCII letter)."""
        by_id = {i: n for n in self.doctree.findall(nodes.Element) for i in n.get("ids", [])}
        out = set()
        for ref in self.doctree.findall(nodes.reference):
            if not ref.get("refid") and not ref.get("refuri"):
                continue
            try:
                url = self.url(ref)
            except ColabEditionError:
                continue  # reported where the link is written
            anchor = url.removeprefix(self.page + "#") if url.startswith(self.page + "#") else ""
            target = by_id.get(anchor)
            if target is None:
                continue
            if isinstance(target, nodes.section):
                carried = any(isinstance(c, nodes.title) for c in target.children)
            else:
                carried = (
                    isinstance(target, nodes.math_block | nodes.figure | nodes.table)
                    or "realtype" in target.attributes
                    or node_kind(target)
                    in (
                        "exercise_enumerable_node",
                        "exercise_node",
                    )
                )
            if carried:
                out.add(anchor)
        return out

    def anchor(self, node: nodes.Element) -> str:
        """``<a id="...">`` for the ids of `node` that links of this chapter name."""
        ids = [i for i in node.get("ids", []) if i in self.local and i not in self.anchored]
        self.anchored.update(ids)
        return "".join(f'<a id="{i}"></a>' for i in ids)

    def local_url(self, url: str) -> str:
        """``#anchor`` for a link to an anchor of this chapter that the notebook carries."""
        if url.startswith(self.page + "#"):
            anchor = url.removeprefix(self.page + "#")
            if anchor in self.local:
                return "#" + anchor
        return url

    def url(self, node: nodes.Element) -> str:
        if node.get("refid"):
            return f"{self.page}#{node['refid']}"
        uri = node.get("refuri", "")
        if uri.startswith("#"):
            return self.page + uri
        if re.match(r"^[a-z][a-z0-9+.-]*:", uri):
            return uri
        raise self.fail(node, f"a link to {uri!r} (not on the site, not absolute)")

    # ------------------------------------------------------------------- the flow

    def flow(self, node: nodes.Element, depth: int) -> Iterator[tuple]:
        """Events in document order: cell markers, code cells, headings, blocks."""
        for child in node.children:
            if is_marker(child):
                yield ("cell", marker_index(child))
            elif is_code_cell(child):
                yield ("code", child["cell_index"], child)
            elif isinstance(child, nodes.comment | nodes.target | addnodes.index):
                continue
            elif isinstance(child, nodes.title) and isinstance(node, nodes.section):
                continue  # yielded as the section's heading
            elif isinstance(child, nodes.raw) and "<script" in child.astext():
                continue  # the site's scripts (thebe's configuration): nothing to read
            elif isinstance(child, nodes.section):
                title = child.next_node(nodes.title)
                if title is not None and title.parent is child:
                    text = self.section_number(child) + self.inline(title).strip()
                    yield ("heading", depth + 1, text + self.anchor(child))
                    yield from self.flow(child, depth + 1)
                else:
                    yield from self.flow(child, depth)
            elif node_kind(child) in ("exercise_enumerable_node", "exercise_node"):
                yield ("exercise", depth, child)
                yield from self.flow(self.content_of(child), depth + 1)
                yield ("exercise_end", depth, child)
            elif node_kind(child) == "solution_node":
                yield ("solution", depth, child)
                yield from self.flow(self.content_of(child), depth + 1)
                yield ("solution_end", depth, child)
            elif isinstance(child, nodes.container) and not child.get("nb_element"):
                if any(is_marker(n) or is_code_cell(n) for n in child.findall()):
                    yield from self.flow(child, depth)
                else:
                    yield ("block", child)
            else:
                yield ("block", child)

    def content_of(self, node: nodes.Element) -> nodes.Element:
        """The body of an exercise/solution/proof node (without its title)."""
        body = nodes.Element()
        for child in node.children:
            if isinstance(child, nodes.title):
                continue
            if isinstance(child, nodes.section) and not any(
                isinstance(c, nodes.title) for c in child.children
            ):
                body.extend(child.children)
            else:
                body.append(child)
        return body

    def exercise_title(self, node: nodes.Element) -> str:
        number = self.number(node.get("type", "exercise"), node["ids"][0]) if node["ids"] else ""
        if node["ids"]:
            self.exercises[node["ids"][0]] = number
        title = node.next_node(nodes.title)
        word = self.words["exercise"]
        name = word + (f" {number}" if number else "")
        sub = self.inline(title).strip() if title is not None else ""
        if sub and sub not in ("Exercise", word, name):
            sub = sub.removeprefix("Exercise").removeprefix(word).strip()
            name += f" {sub}" if sub.startswith("(") else f" ({sub})"
        return name

    def solution_title(self, node: nodes.Element) -> str:
        target = node.get("target_label", "")
        number = ""
        registry = getattr(self.env, "sphinx_exercise_registry", {})
        entry = registry.get(target)
        if entry is not None:
            docname = entry.get("docname", self.docname)
            number = ".".join(
                map(
                    str,
                    self.env.toc_fignumbers.get(docname, {}).get("exercise", {}).get(target, ()),
                )
            )
        if not number:
            return self.words["solution_alone"]
        return self.words["solution"].format(number=number)

    # --------------------------------------------------------------------- blocks

    def blocks(self, node: nodes.Element) -> str:
        """Markdown for the children of a block container (no cell boundaries inside)."""
        return join_blocks([self.block(child) for child in node.children])

    def block(self, node: nodes.Node) -> str:
        if is_marker(node) or is_code_cell(node):
            raise self.fail(node.parent, f"a {node_kind(node.parent)} that spans notebook cells")
        if isinstance(node, nodes.Text):
            return escape(node.astext())
        if isinstance(node, nodes.paragraph):
            text = self.inline(node).strip()
            return escape_line_start(text)
        if isinstance(node, nodes.comment | nodes.target | addnodes.index):
            return ""
        if isinstance(node, nodes.section):
            title = node.next_node(nodes.title)
            if title is not None and title.parent is node:
                raise self.fail(node, "a section heading inside a directive")
            return self.blocks(node)
        if isinstance(node, nodes.math_block):
            return self.math_block(node)
        if isinstance(node, nodes.literal_block):
            language = node.get("language", "")
            if language in ("default", "none", "text", "ipython3"):
                language = "python" if language == "ipython3" else ""
            text = node.astext().rstrip("\n")
            fence = "`" * max(3, max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
            return f"{fence}{language}\n{text}\n{fence}"
        if isinstance(node, nodes.bullet_list | nodes.enumerated_list):
            return self.list_(node)
        if isinstance(node, nodes.definition_list):
            items = []
            for item in node.children:
                term = " ".join(self.inline(t) for t in item.findall(nodes.term))
                definition = item.next_node(nodes.definition)
                body = self.blocks(definition) if definition is not None else ""
                items.append(prefix_lines(f"**{term}**\n\n{body}", "- ", "  "))
            return "\n".join(items)
        if isinstance(node, nodes.block_quote):
            return prefix_lines(self.blocks(node), "> ")
        if isinstance(node, nodes.table):
            return self.table(node)
        if isinstance(node, nodes.figure):
            return self.figure(node)
        if isinstance(node, nodes.image):
            return self.image(node)
        if isinstance(node, nodes.transition):
            return "---"
        if isinstance(node, nodes.attribution):
            return f"— {self.inlines(node)}"
        if isinstance(node, nodes.rubric):
            return f"**{self.inline(node)}**"
        if isinstance(node, nodes.raw):
            if node.get("format") == "html":
                return node.astext()
            return ""
        if isinstance(node, nodes.footnote | nodes.citation):
            label = node.next_node(nodes.label)
            body = [c for c in node.children if not isinstance(c, nodes.label)]
            text = join_blocks([self.block(c) for c in body])
            return f"<sup>{escape(label.astext()) if label else ''}</sup> {text}"
        if isinstance(node, nodes.line_block):
            return "<br>\n".join(self.inline(line) for line in node.findall(nodes.line))
        if isinstance(node, nodes.compound):
            if any(isinstance(n, addnodes.toctree) for n in node.findall()):
                return ""
            return self.blocks(node)
        if isinstance(node, nodes.topic | nodes.sidebar):
            title = node.next_node(nodes.title)
            body = join_blocks(
                [self.block(c) for c in node.children if not isinstance(c, nodes.title)]
            )
            name = self.inline(title).strip() if title is not None else ""
            return prefix_lines((f"**{name}**\n\n" if name else "") + body, "> ")
        if isinstance(node, nodes.admonition | nodes.Admonition):
            return self.admonition(node)
        if isinstance(node, nodes.container):
            if node.get("nb_element") == "mime_bundle" or node.get("mime_type"):
                return self.output(node)
            if "toggle" in node.get("classes", []) or node.get("type") == "toggle":
                return self.details(self.words["show"], self.blocks(node))
            if node.get("literal_block"):
                caption = node.next_node(nodes.caption)
                code = node.next_node(nodes.literal_block)
                head = f"*{self.inline(caption)}*\n\n" if caption is not None else ""
                return head + self.block(code)
            return self.blocks(node)
        if node_kind(node) == "Element":
            return self.blocks(node)
        raise self.fail(node, f"a(n) {node_kind(node)} node")

    def list_(self, node: nodes.Element) -> str:
        items = []
        ordered = isinstance(node, nodes.enumerated_list)
        start = node.get("start", 1)
        for k, item in enumerate(node.children):
            marker = f"{start + k}. " if ordered else "- "
            body = self.blocks(item) or ""
            items.append(prefix_lines(body, marker, " " * len(marker)))
        loose = any(
            len([c for c in item.children if isinstance(c, nodes.Body)]) > 1
            for item in node.children
        )
        return ("\n\n" if loose else "\n").join(items)

    def math_block(self, node: nodes.math_block) -> str:
        """Display maths as the site's MathJax sees it (sphinx.ext.mathjax's wrapping),
        with the site's equation number as a tag."""
        text = node.astext().strip()
        anchor = self.anchor(node)
        anchor += "\n" if anchor else ""
        number = ""
        if node.get("number") and node.get("ids"):
            number = self.number("displaymath", node["ids"][0]) or str(node["number"])
        tag = f"\\tag{{{number}}}" if number else ""
        if node.get("nowrap"):  # an amsmath environment, as written
            if tag:
                end = text.rfind("\\end{")
                text = text[:end] + tag + " " + text[end:] if end >= 0 else text + tag
            return anchor + text
        parts = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
        parts = [f"\\begin{{split}}{p}\\end{{split}}" if "\\\\" in p else p for p in parts]
        body = (
            parts[0]
            if len(parts) == 1
            else ("\\begin{aligned}" + "\\\\\n".join(parts) + "\\end{aligned}")
        )
        return f"{anchor}$$\n{body}{' ' + tag if tag else ''}\n$$"

    def table(self, node: nodes.table) -> str:
        title = node.next_node(nodes.title)
        rows: list[list[str]] = []
        header = 0
        for part in node.findall(lambda n: isinstance(n, nodes.thead | nodes.tbody)):
            for row in part.children:
                cells = []
                for entry in row.children:
                    if entry.get("morecols") or entry.get("morerows"):
                        raise self.fail(node, "a table with merged cells")
                    text = " ".join(
                        self.block(c).replace("\n", " ") for c in entry.children
                    ).replace("|", "\\|")
                    cells.append(text)
                rows.append(cells)
                if isinstance(part, nodes.thead):
                    header += 1
        if not rows:
            return ""
        if header > 1:
            raise self.fail(node, "a table with more than one header row")
        width = max(len(r) for r in rows)
        head = rows[0] if header else [""] * width
        body = rows[1:] if header else rows
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * width]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        table = "\n".join(lines)
        if title is not None:
            number = self.number("table", node["ids"][0]) if node.get("ids") else ""
            label = f"{self.words['table']} {number} " if number else ""
            table = self.anchor(node) + f"*{label}{self.inline(title)}*\n\n" + table
        return table

    def caption(self, figure: nodes.Element) -> str:
        caption = figure.next_node(nodes.caption)
        number = self.number("figure", figure["ids"][0]) if figure.get("ids") else ""
        text = self.inline(caption) if caption is not None else ""
        legend = figure.next_node(nodes.legend)
        label = f"**{self.words['figure']} {number}** " if number else ""
        out = self.anchor(figure) + f"{label}{text}".strip()
        if legend is not None:
            out = join_blocks([out, self.blocks(legend)])
        return out

    def figure(self, node: nodes.figure) -> str:
        pictures = [
            self.block(c) for c in node.children if not isinstance(c, nodes.caption | nodes.legend)
        ]
        return join_blocks([*pictures, self.caption(node)])

    def image(self, node: nodes.image) -> str:
        uri = node.get("uri", "")
        alt = escape(node.get("alt", "")).replace("\n", " ")
        if re.match(r"^(https?|data):", uri):
            return f"![{alt}]({uri})"
        candidates = [Path(self.builder.srcdir) / uri, Path(uri)]
        candidates += [Path(self.builder.srcdir) / c for c in node.get("candidates", {}).values()]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            raise self.fail(node, f"an image whose file {uri!r} cannot be found")
        mime = mimetypes.guess_type(path.name)[0] or "image/png"
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"![{alt}](data:{mime};base64,{data})"

    def output(self, node: nodes.Element) -> str:
        """A notebook output shown in the text (a glued figure or value)."""
        if node.get("nb_element") == "mime_bundle":
            return join_blocks([self.output(c) for c in node.children])
        return join_blocks([self.block(c) for c in node.children])

    def details(self, summary: str, body: str, open_: bool = False) -> str:
        attr = " open" if open_ else ""
        return f"<details{attr}>\n<summary>{summary}</summary>\n\n{body}\n\n</details>"

    def admonition(self, node: nodes.Element) -> str:
        kind = node_kind(node)
        classes = node.get("classes", [])
        title_node = next((c for c in node.children if isinstance(c, nodes.title)), None)
        body = self.blocks(self.content_of(node))
        if kind == "proof_node":
            inner = next((c for c in node.children if isinstance(c, nodes.admonition)), node)
            body = self.blocks(self.content_of(inner))
            proof = self.words["proof"]  # sphinx-proof starts the text with "Proof."
            if body.startswith("Proof. "):
                body = f"*{proof}* " + body.removeprefix("Proof. ")
            elif body.startswith("Proof."):
                body = f"*{proof}*\n\n" + body.removeprefix("Proof.").lstrip()
            else:
                body = f"*{proof}*\n\n" + body
            last = body.rsplit("\n\n", 1)[-1]
            closed = re.match(r"^(\$\$|\\begin|- |\d+\. |\||```|<|>)", last) is None
            return body + (" ∎" if closed else "\n\n∎")
        if "realtype" in node.attributes:  # sphinx-proof: theorem, lemma, definition, ...
            realtype = node["realtype"]
            number = ""
            if node.get("ids") and kind != "unenumerable_node":
                number = self.number(node.get("countertype", realtype), node["ids"][0])
            word = self.words.realtype(realtype)
            name = word + (f" {number}" if number else "")
            sub = self.inline(title_node).strip() if title_node is not None else ""
            sub = sub.removeprefix(realtype.title()).removeprefix(word).strip()
            title = (
                self.anchor(node)
                + f"**{name}**"
                + (f" {sub}" if sub.startswith("(") else f" ({sub})" if sub else "")
            )
            return prefix_lines(join_blocks([title, body]), "> ")
        if kind in ("exercise_enumerable_node", "exercise_node"):
            return join_blocks([f"**{self.exercise_title(node)}**", body])
        if kind == "solution_node":
            return self.details(f"<b>{self.solution_title(node)}</b>", body)
        # docutils admonitions: admonition (titled), note, warning, tip, ...
        title = self.inline(title_node).strip() if title_node is not None else ""
        if not title:
            title = next(
                (self.words.admonition(c) for c in [kind, *classes] if c in ADMONITION_TITLES),
                self.words.admonition("note"),
            )
        if "dropdown" in classes or "toggle" in classes:
            return self.details(f"<b>{title}</b>", body)
        return prefix_lines(join_blocks([f"**{title}**", body]), "> ")

    # --------------------------------------------------------------------- inline

    def inline(self, node: nodes.Node) -> str:
        if isinstance(node, nodes.Text):
            return escape(node.astext().replace("\n", " "))
        if is_marker(node) or is_code_cell(node):
            raise self.fail(node.parent, "a cell boundary inside a paragraph")
        if isinstance(node, nodes.math):
            return "$" + node.astext().strip().replace("\n", " ") + "$"
        if isinstance(node, nodes.literal):
            return code_span(node.astext().replace("\n", " "))
        if isinstance(node, nodes.emphasis):
            return self._wrap(node, "*")
        if isinstance(node, nodes.strong):
            return self._wrap(node, "**")
        if isinstance(node, nodes.subscript):
            return f"<sub>{self.inlines(node)}</sub>"
        if isinstance(node, nodes.superscript):
            return f"<sup>{self.inlines(node)}</sup>"
        if isinstance(node, nodes.reference | addnodes.number_reference):
            if not node.get("refid") and not node.get("refuri"):
                return self.inlines(node)
            url = self.url(node)
            title = self.section_title_with_maths(node, url)
            text = self.inline(title) if title is not None else self.inlines(node)
            return f"[{text}]({self.local_url(url)})"
        if isinstance(node, addnodes.pending_xref):
            raise self.fail(node, f"an unresolved reference {node.get('reftarget')!r}")
        if isinstance(node, addnodes.download_reference):
            raise self.fail(node, "a download link (the site's _downloads are not in Colab)")
        if isinstance(node, nodes.footnote_reference):
            return f"<sup>{escape(node.astext())}</sup>"
        if isinstance(node, nodes.image):
            return self.image(node)
        if isinstance(node, nodes.raw):
            return node.astext() if node.get("format") == "html" else ""
        if isinstance(node, nodes.target | nodes.comment | addnodes.index):
            return ""
        if isinstance(node, nodes.title_reference):
            return self._wrap(node, "*")
        if isinstance(node, nodes.abbreviation):
            return self.inlines(node)
        if isinstance(node, addnodes.literal_emphasis | addnodes.literal_strong):
            return code_span(node.astext())
        if isinstance(
            node,
            nodes.inline
            | nodes.title
            | nodes.caption
            | nodes.paragraph
            | nodes.term
            | nodes.line
            | nodes.generated
            | nodes.problematic,
        ):
            if isinstance(node, nodes.problematic):
                raise self.fail(node, "markup Sphinx could not parse")
            return self.inlines(node)
        if isinstance(node, nodes.container) and node.get("nb_element") == "mime_bundle":
            return self.output(node)
        if node_kind(node) in ("exercise_title", "solution_title", "exercise_subtitle"):
            return self.inlines(node)
        raise self.fail(node, f"an inline {node_kind(node)} node")

    def section_title_with_maths(self, node: nodes.Element, url: str) -> nodes.title | None:
        """The title of the section a {ref} names, when that title holds maths.

        Sphinx writes such a title as link text in plain text, so "$\\sqrt{d_k}$"
        would show as raw TeX; the title itself, maths and all, is rendered instead.
        """
        if not url.startswith(self.site) or "#" not in url:
            return None
        page, _, anchor = url.removeprefix(self.site).partition("#")
        docname = page.removesuffix(".html")
        if docname not in self.env.all_docs:
            return None
        doctree = self.builder.titles_doctree(docname)
        section = doctree.ids.get(anchor)
        if not isinstance(section, nodes.section):
            return None
        title = next((c for c in section.children if isinstance(c, nodes.title)), None)
        if title is None or not any(isinstance(n, nodes.math) for n in title.findall()):
            return None
        return title if node.astext().strip() == title.astext().strip() else None

    def inlines(self, node: nodes.Element) -> str:
        return "".join(self.inline(c) for c in node.children)

    def _wrap(self, node: nodes.Element, mark: str) -> str:
        text = self.inlines(node)
        stripped = text.strip()
        if not stripped:
            return text
        lead = text[: len(text) - len(text.lstrip())]
        trail = text[len(text.rstrip()) :]
        return f"{lead}{mark}{stripped}{mark}{trail}"

    # ---------------------------------------------------------------- the cells

    def cells(self, source: dict) -> list[dict]:
        """The edition's cells: the chapter's cells with their markdown rendered."""
        events = list(self.flow(self.doctree, 0))
        texts: dict[int, list[tuple]] = {}  # markdown cell -> its pieces
        captions: dict[int, str] = {}  # code cell -> its figure caption
        order: list[int] = []
        current: int | None = None
        solution_heading: list[int] = []  # levels of open solutions
        for event in events:
            kind = event[0]
            if kind == "cell":
                current = event[1]
                self.cell = current
                texts[current] = []
                order.append(current)
                continue
            if kind == "code":
                current = None
                order.append(event[1])
                self.cell = event[1]
                figure = next(event[2].findall(nodes.figure), None)
                if figure is not None:
                    captions[event[1]] = self.caption(figure)
                continue
            if current is None:
                raise self.fail(None, f"text outside any markdown cell ({kind})")
            piece = texts[current]
            if kind == "heading":
                piece.append(("md", "#" * min(event[1], 6) + " " + event[2].strip()))
            elif kind == "block":
                piece.append(("md", self.block(event[1])))
            elif kind == "exercise":
                level = min(event[1] + 1, 6)
                label = event[2]["ids"][0] if event[2]["ids"] else ""
                title = self.exercise_title(event[2]) + self.anchor(event[2])
                piece.append(("heading", "#" * level + " " + title, label))
            elif kind == "solution":
                level = min(event[1] + 2, 6)
                solution_heading.append(level)
                title = self.solution_title(event[2])
                piece.append(("solution", "#" * level + " " + title, event[2]))
            elif kind == "solution_end":
                solution_heading.pop()
                piece.append(("solution_end",))
            # exercise_end: nothing to write
        if order != sorted(order):
            raise self.fail(None, f"cells out of order in the doctree: {order}")
        if self.local - self.anchored:
            self.cell = "?"
            raise self.fail(None, f"links to {sorted(self.local - self.anchored)} (no anchor)")
        return self.assemble(source, texts, captions)

    def assemble(self, source: dict, texts: dict, captions: dict) -> list[dict]:
        out: list[dict] = []
        open_solution: str | None = None  # the exercise label of the open solution
        for index, cell in enumerate(source["cells"]):
            self.cell = index
            if cell["cell_type"] != "markdown":
                new = copy.deepcopy(cell)  # code and raw cells: as in the chapter, except
                if cell["cell_type"] == "code":
                    if not any(c["cell_type"] == "code" for c in out):
                        collapse_install_cell(new)
                    drop_widget_views(new)
                    drop_glue_outputs(new)
                out.append(new)
                if open_solution is not None:
                    self.solution_cells.setdefault(open_solution, []).append(cell.get("id"))
                if index in captions:
                    new = self.new_markdown(cell, "caption", captions[index], "caption")
                    if open_solution is not None:
                        new["metadata"][META]["solution"] = open_solution
                    out.append(new)
                continue
            if index not in texts:
                if "".join(cell["source"]).strip():
                    raise self.fail(None, "a markdown cell missing from the doctree")
                continue
            # Pieces of this cell: (kind, text, the solution it belongs to).
            chunks: list[list] = [["text", [], open_solution]]
            for piece in texts[index]:
                if piece[0] == "solution":
                    # A solution starts a cell of its own: its heading collapses in
                    # JupyterLab and Colab, and hides everything up to the next heading.
                    # The heading is a cell of its own: collapsing a heading hides the
                    # cells after it, not the rest of its own cell.
                    open_solution = piece[2].get("target_label", "") or "solution"
                    chunks.append(["solution", [piece[1]], open_solution])
                    chunks.append(["text", [], open_solution])
                elif piece[0] == "solution_end":
                    open_solution = None
                    chunks.append(["text", [], None])
                elif piece[0] == "heading":
                    chunks.append(["exercise", [piece[1]], open_solution, piece[2]])
                else:
                    chunks[-1][1].append(piece[1])
            first = True
            for kind, chunk, solution, *exercise in chunks:
                text = join_blocks(chunk)
                if not text:
                    continue
                new = self.new_markdown(cell, None if first else f"part{len(out)}", text, kind)
                if kind == "solution":
                    new["metadata"]["jp-MarkdownHeadingCollapsed"] = True
                if solution is not None:
                    new["metadata"][META]["solution"] = solution
                    self.solution_cells.setdefault(solution, []).append(new.get("id"))
                if exercise and exercise[0]:
                    new["metadata"][META]["exercise"] = exercise[0]
                out.append(new)
                first = False
        self.check_solutions_end(out)
        return out

    def check_solutions_end(self, cells: list[dict]) -> None:
        """A collapsed solution hides everything up to the next heading of its level or
        higher: the cell after a solution must be such a heading (or there is none)."""
        position = {c.get("id"): k for k, c in enumerate(cells)}
        for label, ids in self.solution_cells.items():
            first, last = position[ids[0]], max(position[i] for i in ids)
            level = len(re.match(r"#*", "".join(cells[first]["source"])).group(0))
            if last + 1 >= len(cells):
                continue
            after = cells[last + 1]
            text = "".join(after["source"]) if after["cell_type"] == "markdown" else ""
            heading = re.match(r"(#{1,6}) ", text)
            if not heading or len(heading.group(1)) > level:
                self.cell = after.get("metadata", {}).get(META, {}).get("chapter_cell", "?")
                raise self.fail(
                    None,
                    f"the solution of {label!r} followed by text that is not a heading (the "
                    "collapsed solution would hide it); put a solution right after its "
                    "exercise, before the next exercise or section",
                )

    def new_markdown(self, cell: dict, suffix: str | None, text: str, kind: str) -> dict:
        cell_id = cell.get("id", "")
        new_id = cell_id if suffix is None else f"{cell_id}-{suffix}"[:64]
        meta = {k: copy.deepcopy(v) for k, v in cell.get("metadata", {}).items() if suffix is None}
        meta[META] = {"chapter_cell": self.cell}
        if kind in ("caption", "exercise"):
            meta[META]["role"] = kind
        new = {"cell_type": "markdown", "metadata": meta, "source": text}
        if cell_id:
            new["id"] = new_id
        return new


# --------------------------------------------------------------------------- builder


class ColabBuilder(Builder):
    """Writes the Colab edition of every chapter notebook into the output directory."""

    name = "colab"
    format = "ipynb"
    epilog = "The Colab edition is in %(outdir)s."
    allow_parallel = False

    def init(self) -> None:
        self.site = site_url(self.config)
        self.language = self.config.language or "en"
        if self.language != "en":  # the site publishes the Korean book under ko/
            self.site += f"{self.language}/"
        self.words = Words(self.language)
        self._titles: dict[str, nodes.document] = {}

    def titles_doctree(self, docname: str) -> nodes.document:
        """A document's doctree as read (for its section titles), cached."""
        if docname not in self._titles:
            self._titles[docname] = self.env.get_doctree(docname)
        return self._titles[docname]

    def get_outdated_docs(self) -> Iterator[str]:
        yield from self.env.found_docs

    def get_target_uri(self, docname: str, typ: str | None = None) -> str:
        return docname + ".html"

    def get_relative_uri(self, from_: str, to: str, typ: str | None = None) -> str:
        # Every link points at the online book.
        return self.site + self.get_target_uri(to, typ)

    def prepare_writing(self, docnames: set[str]) -> None:
        pass

    def write_doc(self, docname: str, doctree: nodes.document) -> None:
        path = Path(self.env.doc2path(docname))
        if path.suffix != ".ipynb":
            return
        source = json.loads(path.read_text(encoding="utf-8"))
        converter = Converter(self, docname, doctree)
        cells = converter.cells(source)
        cells = [self.about_cell(), *cells, *self.end_cells(docname, cells)]
        notebook = {**source, "cells": cells}
        metadata = copy.deepcopy(source.get("metadata", {}))
        metadata.pop("widgets", None)  # saved widget state: the edition has no widget view
        collapsed = [
            c["id"]
            for c in cells
            if c.get("metadata", {}).get("jp-MarkdownHeadingCollapsed") and "id" in c
        ]
        for c in cells:
            if c.get("id") in collapsed:
                c["metadata"]["id"] = c["id"]  # Colab names cells by metadata.id
        metadata[META] = {
            "chapter": str(path.relative_to(self.srcdir)),
            "site": self.site,
            "exercises": converter.exercises,
            "solutions": converter.solution_cells,
        }
        if self.language != "en":  # scripts/student_edition.py writes in the same language
            metadata[META]["language"] = self.language
        colab = metadata.setdefault("colab", {})
        colab["collapsed_sections"] = collapsed
        colab.setdefault("provenance", [])
        notebook["metadata"] = metadata
        out = Path(self.outdir) / (docname + ".ipynb")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", "utf-8")

    def finish(self) -> None:
        pass

    def about_cell(self) -> dict:
        return {
            "cell_type": "markdown",
            "id": "colab-edition-about",
            "metadata": {META: {"role": "about"}},
            "source": self.words["about"],
        }

    def end_cells(self, docname: str, cells: list[dict]) -> list[dict]:
        """After the last exercise's solution: a heading at the exercises' level (which
        ends the solution's folded section) and a link to the next chapter."""
        exercises = [
            c for c in cells if c.get("metadata", {}).get(META, {}).get("role") == "exercise"
        ]
        if not exercises:
            return []
        level = len(re.match(r"#*", "".join(exercises[-1]["source"])).group(0))
        number = ".".join(map(str, self.env.toc_secnumbers.get(docname, {}).get("", ())))
        text = f"{'#' * level} {self.words['end'].format(number=number)}\n\n"
        text += self.words["end_text"]
        following = self.env.collect_relations().get(docname, [None, None, None])[2]
        if following and str(self.env.doc2path(following)).endswith(".ipynb"):
            n = ".".join(map(str, self.env.toc_secnumbers.get(following, {}).get("", ())))
            title = escape(self.env.titles[following].astext())
            url = self.site + self.get_target_uri(following)
            text += " " + self.words["next"].format(title=f"{n}. {title}", url=url)
        return [
            {
                "cell_type": "markdown",
                "id": "colab-edition-end",
                "metadata": {META: {"role": "end"}},
                "source": text,
            }
        ]


def _mark_cells(app, docname: str, source: list[str]) -> None:
    """Prepend a comment naming its index to every markdown cell (colab builder only)."""
    if app.builder.name != "colab" or not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    nb = json.loads(source[0])
    for i, cell in enumerate(nb["cells"]):
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown" and text.strip():
            cell["source"] = f"% {MARK} {i}\n\n" + text
    source[0] = json.dumps(nb)


def _mime_priority(app) -> None:
    """Outputs shown in the text (glued figures) choose their MIME type as in HTML."""
    if app.builder.name != "colab":
        return
    from myst_nb.core.render import base_render_priority

    html = base_render_priority()["html"]
    overrides = list(app.config.nb_mime_priority_overrides or [])
    overrides += [("colab", mime, priority) for mime, priority in html.items()]
    app.config.nb_mime_priority_overrides = overrides


def setup(app):
    app.add_builder(ColabBuilder)
    app.connect("source-read", _mark_cells)
    app.connect("builder-inited", _mime_priority)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

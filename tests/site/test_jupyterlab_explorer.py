"""An explorer in a real JupyterLab (4, with ipywidgets 8): before a run, live, and after
the notebook is saved and reopened with a new kernel.

A JupyterLab server on 127.0.0.1 serves a temporary directory holding a one-explorer
notebook stored the way the chapters are (executed by scripts/execute_notebooks.py), and
headless Chromium drives it:

1. opened before any run, the output is the static explorer with the sentence asking to
   run the cell, and no widget error;
2. run, the live widget (slider and picture) appears and the static copy is hidden;
3. saved, its kernel shut down, and opened again, the static explorer and its sentence
   show again, and JupyterLab's "model not found" line, where the widget was, is hidden.

Screenshots of the three states go to _build/screenshots/jupyterlab/.

A reader's session with a whole chapter's Colab edition follows (one JupyterLab page
and one run serve four tests): opened, its solutions start collapsed and its glue cells
show only their title line with no band under it; after Run All (from the menu) it reads
like the site: every explorer live, no raw MyST or TeX, the glue cells still without
output or band (helpers.glue stores nothing in a reader's run); and after a save and a
reopening every solution is still collapsed. JupyterLab unfolds the headings above the
cell Run All leaves active, the last one, when it is a code cell (a plain markdown cell
has no heading level, and JupyterLab then unfolds nothing): the edition ends with a
heading of its own so that the last cell is not a solution's. The chapter run is one
whose edition ended, before that heading, with a solution's code cell (chapter 3's
ended with a markdown cell, so Run All could not show the fault there).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import matplotlib
import nbformat
import pytest

from helpers.widgets import RUN_HINT
from tests.conftest import ROOT
from tests.site.pages import RAW_TEX

sys.path.insert(0, str(ROOT / "scripts"))
from glue_cells import GLUE_TITLE

pytestmark = pytest.mark.browser

SHOTS = ROOT / "_build" / "screenshots" / "jupyterlab"

EXPLORER_CELL = """\
import numpy as np
from matplotlib.figure import Figure

from helpers.widgets import Explorer, Param

fig = Figure(figsize=(3.2, 1.6))
ax = fig.add_subplot()
z = np.array([2.0, 1.0, 0.5, 0.0, -1.0])
bars = ax.bar(range(5), np.ones(5) / 5)
ax.set_ylim(0, 1)


def update(tau):
    p = np.exp((z - z.max()) / tau)
    p /= p.sum()
    for bar, h in zip(bars, p):
        bar.set_height(h)
    return f"tau = {tau:g}: largest weight {p.max():.2f}"


explorer = Explorer(
    fig, update, [Param("tau", [0.25, 0.5, 1.0, 2.0, 4.0], label="τ", value=1.0)],
    dpi=60, description="Softmax weights",
)
explorer"""


# The chapter whose Colab edition is run whole: a short one, and one whose last solution ends
# with a code cell (the module's docstring says why).
RUN_ALL = "01_softmax.ipynb"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server (no token, loopback only) on a directory with the notebook."""
    sys.path.insert(0, str(ROOT / "scripts"))
    from execute_notebooks import execute

    root = tmp_path_factory.mktemp("lab")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(EXPLORER_CELL)])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    path = root / "explorer.ipynb"
    nbformat.write(nb, path)
    execute(path)  # stored as the chapters are: outputs, no widget view
    shutil.copy(ROOT / "editions" / "colab" / RUN_ALL, root / RUN_ALL)
    port = free_port()
    settings = root / "settings"
    workspaces = root / "workspaces"
    # Render every cell (no windowing), and no news prompt over the screenshots.
    for name, value in {
        "notebook-extension/tracker": {"windowingMode": "none"},
        "apputils-extension/notification": {"fetchNews": "false"},
    }.items():
        file = settings / "@jupyterlab" / f"{name}.jupyterlab-settings"
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(value))
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(root / "config"), "HOME": str(root)}
    # matplotlib's font cache as it is (a new HOME would rebuild it in the first cell)
    env["MPLCONFIGDIR"] = os.environ.get("MPLCONFIGDIR") or matplotlib.get_configdir()
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "jupyter-lab"),
            "--no-browser",
            "--allow-root",
            f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0",
            "--ServerApp.ip=127.0.0.1",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--ServerApp.disable_check_xsrf=True",
            f"--ServerApp.root_dir={root}",
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={workspaces}",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
        ],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/api/status", timeout=2)
            break
        except OSError:
            if server.poll() is not None:
                pytest.fail(f"JupyterLab did not start:\n{server.stdout.read()[-3000:]}")
            time.sleep(0.5)
    else:
        server.terminate()
        pytest.fail("JupyterLab did not answer within 90 s")
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield url, path
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


def shut_down_kernels(url: str) -> None:
    with urllib.request.urlopen(f"{url}/api/kernels") as response:
        kernels = json.load(response)
    for kernel in kernels:
        request = urllib.request.Request(f"{url}/api/kernels/{kernel['id']}", method="DELETE")
        urllib.request.urlopen(request)


def open_notebook(browser, url: str, name: str = "explorer.ipynb"):
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto(f"{url}/lab/tree/{name}?reset", wait_until="load")
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=60000)
    # the kernel must be up and idle before anything is run (the toolbar's indicator)
    page.wait_for_function(
        "() => [...document.querySelectorAll('.jp-Notebook-ExecutionIndicator')]"
        ".some(e => e.getAttribute('data-status') === 'idle')",
        timeout=120000,
    )
    return context, page


def dismiss_dialogs(page, seen: list[str]) -> None:
    """Accept any JupyterLab dialog in the way (recording its text).

    On a loaded machine JupyterLab can open one over the notebook (a kernel that was slow
    to answer, a file it thinks changed on disk); its accept button keeps the notebook and
    its python3 kernel. What was shown is kept in `seen` for the failure message.
    """
    dialogs = page.locator(".jp-Dialog")
    for _ in range(3):
        if dialogs.count() == 0 or not dialogs.first.is_visible():
            return
        seen.append(" ".join(dialogs.first.inner_text().split()))
        accept = dialogs.first.locator(".jp-Dialog-button.jp-mod-accept")
        if accept.count():
            accept.first.click()
        else:
            page.keyboard.press("Escape")
        page.wait_for_timeout(500)


def visible_static(page) -> dict:
    return page.evaluate(
        """() => {
          const ex = document.querySelector('.jp-OutputArea .explorer');
          const hint = document.querySelector('.jp-OutputArea .explorer-hint');
          const img = ex && ex.querySelector('img.explorer-image');
          const shown = e => !!e && e.getClientRects().length > 0;
          return {
            explorer: shown(ex),
            hint: shown(hint) ? hint.textContent.trim() : null,
            image: !!img && img.complete && img.naturalWidth > 0,
            text: document.querySelector('.jp-OutputArea').innerText,
          };
        }"""
    )


def test_explorer_before_a_run_live_and_after_save_and_reopen(browser, lab):
    url, path = lab

    # 1. before any run: the stored static explorer and its sentence
    context, page = open_notebook(browser, url)
    try:
        page.locator(".jp-OutputArea .explorer").wait_for(timeout=30000)
        before = visible_static(page)
        page.screenshot(path=SHOTS / "1_before_run.png")
        assert before["explorer"] and before["image"], before
        assert before["hint"] == RUN_HINT
        assert "Error displaying widget" not in before["text"]

        # 2. run: the live widget replaces it
        slider = page.locator(".jp-OutputArea .widget-slider, .jp-OutputArea .widget-hslider")
        dialogs: list[str] = []
        for attempt in range(3):
            # (a kernel that JupyterLab is still connecting may drop a first request)
            try:
                dismiss_dialogs(page, dialogs)
                page.locator(".jp-Notebook .jp-CodeCell").first.click(timeout=20000)
                page.keyboard.press("Escape")
                page.keyboard.press("Shift+Enter")
                slider.first.wait_for(timeout=40000)
                break
            except Exception as exc:
                if attempt == 2:
                    page.screenshot(path=SHOTS / "2_live.png")
                    raise AssertionError(f"no live widget; dialogs shown: {dialogs}") from exc
        page.locator(".jp-OutputArea .widget-image").first.wait_for(timeout=30000)
        live = visible_static(page)
        page.screenshot(path=SHOTS / "2_live.png")
        assert not live["explorer"], "the static copy stays visible beside the live widget"
        assert "Error displaying widget" not in live["text"]

        # 3. save, then shut the kernel down (as when the reader comes back later)
        page.keyboard.press("Control+s")
        deadline = time.monotonic() + 30
        saved = None
        while time.monotonic() < deadline:
            saved = nbformat.read(path, as_version=4)
            views = [
                o["data"]["application/vnd.jupyter.widget-view+json"]
                for o in saved.cells[0].outputs
                if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
            ]
            if views and views[0]["model_id"]:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the run notebook was not saved: {saved}")
    finally:
        context.close()
    shut_down_kernels(url)

    context, page = open_notebook(browser, url)
    try:
        page.locator(".jp-OutputArea .explorer").wait_for(timeout=30000)
        # give the widget manager time to decide that the model is gone
        page.wait_for_timeout(3000)
        reopened = visible_static(page)
        page.screenshot(path=SHOTS / "3_reopened.png")
    finally:
        context.close()
    assert reopened["explorer"] and reopened["image"], reopened
    assert reopened["hint"] == RUN_HINT
    # the saved live view's "model not found" line is hidden (DEAD_WIDGET_CSS)
    assert "Error displaying widget" not in reopened["text"], reopened["text"]


# What a reader sees of each cell of a notebook in JupyterLab: headings and whether they
# are collapsed, whether the cell is shown, and for code cells the code shown (null when
# JupyterLab shows only the collapsed input's first line, its placeholder), the prompt,
# the outputs and the height of the output area (a glue cell's site-only output drew an
# empty band there), and for markdown cells their rendered text outside typeset maths and
# code (where raw MyST or TeX would show).
CELLS_JS = """() => {
  const shown = e => !!e && e.getClientRects().length > 0;
  const prose = root => {
    const parts = [];
    const walk = node => {
      if (node.nodeType === Node.TEXT_NODE) { parts.push(node.textContent); return; }
      if (node.nodeType !== Node.ELEMENT_NODE) return;
      if (node.matches('mjx-container, mjx-assistive-mml, code, pre, script, style')) return;
      node.childNodes.forEach(walk);
    };
    walk(root);
    return parts.join('');
  };
  return [...document.querySelectorAll('.jp-Notebook .jp-Cell')].map(c => {
    const code = c.classList.contains('jp-CodeCell');
    const md = c.querySelector('.jp-RenderedMarkdown');
    const editor = c.querySelector('.jp-InputArea .cm-content');
    const placeholder = c.querySelector('.jp-InputPlaceholder');
    const area = c.querySelector('.jp-Cell-outputWrapper .jp-OutputArea');
    return {
      code,
      heading: (c.querySelector('.jp-RenderedMarkdown h1, .jp-RenderedMarkdown h2,'
        + ' .jp-RenderedMarkdown h3, .jp-RenderedMarkdown h4') || {}).textContent || '',
      collapsed: !!c.querySelector('.jp-collapseHeadingButton.jp-mod-collapsed'),
      shown: shown(c),
      source: code && shown(editor) ? editor.innerText : null,
      placeholder: code && shown(placeholder) ? placeholder.innerText : null,
      prompt: code ? c.querySelector('.jp-InputPrompt').textContent.trim() : null,
      outputs: area ? area.querySelectorAll('.jp-OutputArea-child').length : 0,
      band: area && shown(c) ? Math.round(area.getBoundingClientRect().height) : 0,
      rendered: code || (!!md && md.childElementCount > 0),
      text: !code && md ? prose(md) : '',
    };
  });
}"""

# The explorers of the notebook as the reader sees them: static copies shown, live
# widgets (a slider and a picture each), and any "Error displaying widget".
EXPLORERS_JS = """() => {
  const shown = e => e.getClientRects().length > 0;
  return {
    static: [...document.querySelectorAll('.jp-OutputArea .explorer')].filter(shown).length,
    sliders: [...document.querySelectorAll('.jp-OutputArea .widget-slider,'
      + ' .jp-OutputArea .widget-hslider')].filter(shown).length,
    images: [...document.querySelectorAll('.jp-OutputArea .widget-image')]
      .filter(i => shown(i) && i.complete && i.naturalWidth > 0).length,
    errors: [...document.querySelectorAll('.jp-OutputArea')]
      .filter(a => a.innerText.includes('Error displaying widget')).length,
  };
}"""

# MyST left unrendered (a role such as {glue:text}`x` renders as "{glue:text}x", a
# directive fence, a label target) and raw TeX (tests/site/pages.py's pattern), in a
# markdown cell's text outside maths and code.
RAW_MYST = re.compile(r"\{[a-zA-Z][\w:.-]*\}|^\s*(`{3,}|:{3,})|^\s*\([\w:.-]+\)=\s*$", re.M)


def raw_markup(cells: list[dict]) -> list[str]:
    found = []
    for k, cell in enumerate(cells):
        for pattern in (RAW_MYST, RAW_TEX):
            for match in pattern.finditer(cell["text"]):
                start, end = max(match.start() - 30, 0), match.end() + 30
                found.append(f"cell {k}: ...{' '.join(cell['text'][start:end].split())}...")
    return found


def solutions_of(cells: list[dict]) -> list[tuple[int, list[dict]]]:
    """Each "Solution to Exercise" heading's index, with the cells of its section."""
    found = []
    for k, cell in enumerate(cells):
        if cell["heading"].startswith("Solution to Exercise"):
            after = cells[k + 1 :]
            end = next((j for j, c in enumerate(after) if c["heading"]), len(after))
            found.append((k, after[:end]))
    return found


def folded_solutions(cells: list[dict]) -> list[str]:
    """What is wrong with the solutions as shown: one unfolded, or showing its cells."""
    wrong = []
    for k, section in solutions_of(cells):
        if not cells[k]["collapsed"] or not cells[k]["shown"]:
            wrong.append(f"{cells[k]['heading']}: unfolded")
        elif any(c["shown"] for c in section):
            wrong.append(f"{cells[k]['heading']}: shows its cells")
    return wrong


def glue_bands(cells: list[dict], glue_cells: list[int]) -> list[str]:
    """Glue cells that keep an output or draw a band (the output area's height, px)."""
    code = [c for c in cells if c["code"]]
    return [
        f"code cell {k}: {code[k]['outputs']} outputs, {code[k]['band']} px"
        for k in glue_cells
        if code[k]["outputs"] or code[k]["band"] > 0
    ]


RUN_STATE_JS = """() => [...document.querySelectorAll('.jp-CodeCell')].map(c => ({
  prompt: c.querySelector('.jp-InputPrompt').textContent.trim(),
  error: [...c.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
    .some(o => /Traceback|Error/.test(o.textContent)),
}))"""


def run_all_done(page, dialogs: list[str], timeout_s: float = 240) -> None:
    """Wait until every code cell has run (each prompt shows its number), failing with the
    cells still waiting, or those that raised, if that does not happen in time."""
    deadline = time.monotonic() + timeout_s
    state: list[dict] = []
    while time.monotonic() < deadline:
        state = page.evaluate(RUN_STATE_JS)
        shown = [s["prompt"] for s in state if s["prompt"]]  # (a hidden input shows none)
        if shown and all(re.fullmatch(r"\[\d+\]:", p) for p in shown):
            return
        if any(s["error"] for s in state):
            break
        page.wait_for_timeout(1000)
    page.screenshot(path=SHOTS / "6_edition_run_all_unfinished.png")
    waiting = [
        (k, s["prompt"])
        for k, s in enumerate(state)
        if s["prompt"] and not re.fullmatch(r"\[\d+\]:", s["prompt"])
    ]
    errors = [k for k, s in enumerate(state) if s["error"]]
    pytest.fail(
        f"Run All did not finish: {len(waiting)} cells not run {waiting[:8]}, errors in cells "
        f"{errors}, dialogs {dialogs}"
    )


def rendered_cells(page, count: int, timeout_s: float = 30) -> list[dict]:
    """CELLS_JS once JupyterLab shows the notebook's `count` cells with every markdown cell
    rendered and its maths typeset (it renders and typesets after the spinner goes): the
    last state seen if that does not happen in time (the tests then say what is wrong)."""
    deadline = time.monotonic() + timeout_s
    while True:
        cells = page.evaluate(CELLS_JS)
        if len(cells) == count and all(c["rendered"] for c in cells):
            if not raw_markup(cells) or time.monotonic() > deadline:
                page.wait_for_timeout(500)  # (and the collapsed headings folded)
                return page.evaluate(CELLS_JS)
        if time.monotonic() > deadline:
            return cells
        page.wait_for_timeout(500)


@pytest.fixture(scope="module")
def chapter_run(browser, lab) -> dict:
    """A reader's session with one chapter's Colab edition (RUN_ALL) in JupyterLab, seen
    three times: as opened, after Run All (from the menu, after a click into the
    notebook), and opened again after a save with a new kernel. One session serves the
    tests below (a JupyterLab page and a chapter's run are the costly part)."""
    url, lab_path = lab
    path = lab_path.parent / RUN_ALL
    seen: dict = {"edition": nbformat.read(path, as_version=4)}
    context, page = open_notebook(browser, url, RUN_ALL)
    dialogs: list[str] = []
    try:
        page.locator(".jp-Notebook .jp-Spinner").wait_for(state="hidden", timeout=120000)
        count = len(seen["edition"].cells)
        seen["opened"] = rendered_cells(page, count)
        page.locator(".jp-CodeCell .jp-InputPlaceholder").nth(1).scroll_into_view_if_needed()
        page.screenshot(path=SHOTS / "4_edition_opened.png")
        dismiss_dialogs(page, dialogs)
        page.locator(".jp-Notebook .jp-MarkdownCell").nth(2).click(timeout=60000)
        for attempt in range(3):  # (a busy JupyterLab may drop a first click on the menu)
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click(timeout=120000)
            try:
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]"
                    ".some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))",
                    timeout=60000,
                )
                break
            except Exception:
                dismiss_dialogs(page, dialogs)
                if attempt == 2:
                    raise
        run_all_done(page, dialogs)
        # the explorers' live pictures arrive after their cell has run
        page.wait_for_function(
            f"() => ({EXPLORERS_JS})().images >= ({EXPLORERS_JS})().sliders",
            timeout=30000,
        )
        seen["run"] = rendered_cells(page, count)
        seen["explorers"] = page.evaluate(EXPLORERS_JS)
        page.locator(".jp-CodeCell .jp-InputPlaceholder").nth(1).scroll_into_view_if_needed()
        page.screenshot(path=SHOTS / "5_edition_glue_cell_after_run_all.png")
        page.locator(".widget-slider, .widget-hslider").first.scroll_into_view_if_needed()
        page.screenshot(path=SHOTS / "6_edition_explorer_after_run_all.png")
        mtime = path.stat().st_mtime_ns  # (the edition's own outputs have numbers too)
        page.keyboard.press("Control+s")
        deadline = time.monotonic() + 30
        while path.stat().st_mtime_ns == mtime or page.locator(".jp-mod-dirty").count():
            if time.monotonic() > deadline:
                pytest.fail(f"the notebook was not saved after Run All; dialogs: {dialogs}")
            time.sleep(0.5)
        seen["saved"] = nbformat.read(path, as_version=4)
        # the end of the notebook, where Run All leaves the active cell
        page.locator(".jp-Notebook .jp-Cell.jp-mod-active").scroll_into_view_if_needed()
        page.screenshot(path=SHOTS / "7_edition_end_after_run_all.png")
    finally:
        context.close()
    shut_down_kernels(url)

    context, page = open_notebook(browser, url, RUN_ALL)
    try:
        page.locator(".jp-Notebook .jp-Spinner").wait_for(state="hidden", timeout=120000)
        seen["reopened"] = rendered_cells(page, count)
    finally:
        context.close()
    shut_down_kernels(url)
    code = [c for c in seen["edition"].cells if c.cell_type == "code"]
    seen["glue_cells"] = [k for k, c in enumerate(code) if "glue(" in c.source]
    assert seen["glue_cells"], f"{RUN_ALL} has no glue cell"
    return seen


def test_the_colab_edition_opens_with_its_solutions_collapsed(chapter_run):
    """JupyterLab reads jp-MarkdownHeadingCollapsed: each "Solution to Exercise" heading
    starts collapsed and hides the solution's cells, the exercises stay visible."""
    cells = chapter_run["opened"]
    solutions = solutions_of(cells)
    exercises = [c for c in cells if c["heading"].startswith("Exercise ")]
    assert solutions and len(solutions) == len(exercises), cells[-12:]
    assert all(len(section) >= 2 for _, section in solutions), "a solution's text and code"
    assert not folded_solutions(cells), folded_solutions(cells)
    assert all(c["shown"] for c in exercises)


def test_the_colab_edition_shows_its_glue_cells_collapsed(chapter_run):
    """JupyterLab reads jupyter.source_hidden: every glue cell (scripts/glue_cells.py) shows
    only its title line, no empty output band under it, and no code a reader sees calls
    glue. (Colab reads cellView: form, which shows the title and a "Show code" link; no
    Colab is at hand to test it.)"""
    cells = chapter_run["opened"]
    code = [c for c in cells if c["code"]]
    assert len(code) == sum(c.cell_type == "code" for c in chapter_run["edition"].cells)
    for k in chapter_run["glue_cells"]:
        if code[k]["shown"]:  # (a solution's glue cell is folded with it)
            assert code[k]["source"] is None, (k, code[k])  # collapsed to its title line:
            assert (code[k]["placeholder"] or "").startswith(GLUE_TITLE), (k, code[k])
    assert not glue_bands(cells, chapter_run["glue_cells"])
    shown = [c["source"] for c in code if c["source"] is not None]
    assert shown and not [s for s in shown if "glue(" in s], "glue code shown"


def test_run_all_reads_like_the_site(chapter_run):
    """After Run All the chapter reads as the site does: every explorer live (a slider
    and its picture, the static copy hidden, no widget error), no MyST markup or TeX left
    raw in the text, and the glue cells, run, still show only their title line, with no
    output and no empty band under them (helpers.glue stores nothing in a reader's run)."""
    cells, explorers = chapter_run["run"], chapter_run["explorers"]
    assert not raw_markup(chapter_run["opened"]), raw_markup(chapter_run["opened"])
    assert not raw_markup(cells), raw_markup(cells)
    assert explorers["sliders"] >= 1 and explorers["images"] >= explorers["sliders"], explorers
    assert explorers["static"] == 0 and explorers["errors"] == 0, explorers
    assert not glue_bands(cells, chapter_run["glue_cells"]), glue_bands(
        cells, chapter_run["glue_cells"]
    )
    saved = [c for c in chapter_run["saved"].cells if c.cell_type == "code"]
    kept = [k for k in chapter_run["glue_cells"] if saved[k].outputs]
    assert not kept, f"glue cells saved with outputs: {kept}"


def test_run_all_and_save_keep_every_solution_collapsed(chapter_run):
    """Run All leaves the notebook's last cell active, and JupyterLab unfolds the headings
    above the active cell: every solution heading must still be collapsed after Run All,
    in the saved file (jp-MarkdownHeadingCollapsed) and when the notebook is opened again
    (the edition ends with a heading of its own, so that the last cell is not a
    solution's)."""
    collapsed = chapter_run["edition"].metadata["colab"]["collapsed_sections"]
    assert collapsed
    by_id = {c.get("id"): c for c in chapter_run["saved"].cells}
    opened = [i for i in collapsed if not by_id[i].metadata.get("jp-MarkdownHeadingCollapsed")]
    reopened = chapter_run["reopened"]
    assert len(solutions_of(reopened)) == len(collapsed), reopened[-12:]
    wrong = {
        "after Run All": folded_solutions(chapter_run["run"]),
        "saved open (cell ids)": opened,
        "opened again": folded_solutions(reopened),
    }
    assert not any(wrong.values()), wrong

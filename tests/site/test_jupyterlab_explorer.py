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

The Colab edition of a chapter is opened there too: its solutions start collapsed, its
glue cells show only their title line, and after Run All and a save every solution is
still collapsed, in the saved file and when the notebook is opened again (JupyterLab
unfolds the headings above the cell Run All leaves active, the last one: the edition ends
with a heading of its own so that this is not a solution's).
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


# The chapter whose Colab edition is run whole (a short one: its cells run in seconds).
RUN_ALL = "03_multi_head_attention.ipynb"


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
    edition = sorted((ROOT / "editions" / "colab").glob("[0-9][0-9]_*.ipynb"))[0]
    shutil.copy(edition, root / "edition.ipynb")
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


def test_the_colab_edition_opens_with_its_solutions_collapsed(browser, lab):
    """JupyterLab reads jp-MarkdownHeadingCollapsed: each "Solution to Exercise" heading
    starts collapsed and hides the solution's cells, the exercises stay visible."""
    url, _ = lab
    context, page = open_notebook(browser, url, "edition.ipynb")
    try:
        page.locator(".jp-Notebook .jp-MarkdownCell").first.wait_for(timeout=30000)
        page.wait_for_timeout(2000)
        state = page.evaluate(
            """() => {
              const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
              const shown = e => e.getClientRects().length > 0;
              return cells.map(c => ({
                heading: (c.querySelector('.jp-RenderedMarkdown h1, .jp-RenderedMarkdown h2,'
                  + ' .jp-RenderedMarkdown h3, .jp-RenderedMarkdown h4') || {}).textContent || '',
                collapsed: !!c.querySelector('.jp-collapseHeadingButton.jp-mod-collapsed'),
                shown: shown(c),
                code: c.classList.contains('jp-CodeCell'),
              }));
            }"""
        )
        page.locator(".jp-RenderedMarkdown h3").last.scroll_into_view_if_needed()
        page.screenshot(path=SHOTS / "4_edition_solutions_collapsed.png")
    finally:
        context.close()
    solutions = [k for k, c in enumerate(state) if c["heading"].startswith("Solution to Exercise")]
    exercises = [k for k, c in enumerate(state) if c["heading"].startswith("Exercise ")]
    assert solutions and len(solutions) == len(exercises), state[-12:]
    for k in solutions:
        assert state[k]["collapsed"] and state[k]["shown"], state[k]
        after = state[k + 1 :]
        end = next((j for j, c in enumerate(after) if c["heading"]), len(after))
        assert end >= 2, f"{state[k]['heading']}: its text and code should follow it"
        assert not any(c["shown"] for c in after[:end]), f"{state[k]['heading']} shows cells"
    assert all(state[k]["shown"] for k in exercises)


def test_the_colab_edition_shows_its_glue_cells_collapsed(browser, lab):
    """JupyterLab reads jupyter.source_hidden: every glue cell (scripts/glue_cells.py) shows
    only its title line, and no code a reader sees calls glue. (Colab reads cellView:
    form, which shows the title and a "Show code" link; no Colab is at hand to test it.)"""
    url, _ = lab
    context, page = open_notebook(browser, url, "edition.ipynb")
    try:
        page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(timeout=30000)
        page.wait_for_timeout(2000)
        state = page.evaluate(
            """() => {
              const shown = e => !!e && e.getClientRects().length > 0;
              return [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')].map(c => {
                const editor = c.querySelector('.jp-InputArea .cm-content');
                const placeholder = c.querySelector('.jp-InputPlaceholder');
                return {
                  code: shown(editor) ? editor.innerText : null,
                  placeholder: shown(placeholder) ? placeholder.innerText : null,
                };
              });
            }"""
        )
        glue_cell = page.locator(".jp-CodeCell .jp-InputPlaceholder").nth(1)
        glue_cell.scroll_into_view_if_needed()
        page.screenshot(path=SHOTS / "5_edition_glue_cell_collapsed.png")
    finally:
        context.close()
    edition = nbformat.read(
        sorted((ROOT / "editions" / "colab").glob("[0-9][0-9]_*.ipynb"))[0], as_version=4
    )
    code = [c for c in edition.cells if c.cell_type == "code"]
    assert len(state) == len(code), (len(state), len(code))
    glue_cells = [k for k, c in enumerate(code) if "glue(" in c.source]
    assert glue_cells
    for k in glue_cells:
        assert state[k]["code"] is None, (k, state[k])  # collapsed to its title line:
        assert (state[k]["placeholder"] or "").startswith(GLUE_TITLE), (k, state[k])
    shown = [s["code"] for s in state if s["code"] is not None]
    assert shown and not [s for s in shown if "glue(" in s], "glue code shown"


SOLUTION_STATE_JS = """() => {
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
  const shown = e => e.getClientRects().length > 0;
  return cells.map(c => ({
    heading: (c.querySelector('.jp-RenderedMarkdown h1, .jp-RenderedMarkdown h2,'
      + ' .jp-RenderedMarkdown h3, .jp-RenderedMarkdown h4') || {}).textContent || '',
    collapsed: !!c.querySelector('.jp-collapseHeadingButton.jp-mod-collapsed'),
    shown: shown(c),
  }));
}"""


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
        page.wait_for_timeout(2000)
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


def test_run_all_and_save_keep_every_solution_collapsed(browser, lab):
    """Run All on a whole chapter's Colab edition, then save: every solution heading is
    still collapsed in the saved file (jp-MarkdownHeadingCollapsed) and, opened again, in
    JupyterLab (its cells hidden)."""
    url, lab_path = lab
    path = lab_path.parent / RUN_ALL
    before = nbformat.read(path, as_version=4)
    collapsed = before.metadata["colab"]["collapsed_sections"]
    assert collapsed
    context, page = open_notebook(browser, url, RUN_ALL)
    dialogs: list[str] = []
    try:
        page.locator(".jp-Notebook .jp-Spinner").wait_for(state="hidden", timeout=120000)
        dismiss_dialogs(page, dialogs)
        # the reader clicks into the notebook (it becomes JupyterLab's current one), then
        # runs everything from the menu
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
        # every code cell has run: each shows its number
        run_all_done(page, dialogs)
        page.keyboard.press("Control+s")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            saved = nbformat.read(path, as_version=4)
            if any(c.get("execution_count") for c in saved.cells if c.cell_type == "code"):
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the notebook was not saved after Run All; dialogs: {dialogs}")
        page.screenshot(path=SHOTS / "6_edition_after_run_all.png")
    finally:
        context.close()
    shut_down_kernels(url)
    by_id = {c.get("id"): c for c in saved.cells}
    opened = [i for i in collapsed if not by_id[i].metadata.get("jp-MarkdownHeadingCollapsed")]
    assert not opened, f"solutions saved open after Run All: {opened}"

    context, page = open_notebook(browser, url, RUN_ALL)
    try:
        page.locator(".jp-Notebook .jp-MarkdownCell").first.wait_for(timeout=30000)
        page.wait_for_timeout(2000)
        state = page.evaluate(SOLUTION_STATE_JS)
    finally:
        context.close()
    shut_down_kernels(url)
    solutions = [k for k, c in enumerate(state) if c["heading"].startswith("Solution to Exercise")]
    assert len(solutions) == len(collapsed), state[-12:]
    for k in solutions:
        assert state[k]["collapsed"], f"{state[k]['heading']} reopened unfolded"
        after = state[k + 1 :]
        end = next((j for j, c in enumerate(after) if c["heading"]), len(after))
        assert not any(c["shown"] for c in after[:end]), f"{state[k]['heading']} shows cells"

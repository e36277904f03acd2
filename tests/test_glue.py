"""helpers.glue in a real kernel: it stores its value where the book's runs read it, and
leaves no output when a reader runs the cell.

The book's runs (scripts/execute_notebooks.py through nbclient, strict nbval) send their
execute requests with ``allow_stdin`` false, as every unattended runner does; JupyterLab
and the other notebook frontends send it true. One kernel (the project's python3) runs
the same glue calls both ways. (tests/test_repository.py checks that the stored output is
the one myst_nb.glue writes; tests/site/test_jupyterlab_explorer.py measures, in
JupyterLab, that a run glue cell draws no band under it.)
"""

from __future__ import annotations

import pytest

from helpers.glue import GLUE_PREFIX

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kernel():
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3")
    try:
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def run(client, code: str, *, allow_stdin: bool) -> list[dict]:
    """The outputs (display_data and stream messages' content) of one execute request."""
    msg_id = client.execute(code, allow_stdin=allow_stdin, stop_on_error=False)
    outputs = []
    while True:
        msg = client.get_iopub_msg(timeout=60)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if kind == "status" and msg["content"]["execution_state"] == "idle":
            break
        if kind == "error":
            pytest.fail("\n".join(msg["content"]["traceback"]))
        if kind in ("display_data", "execute_result", "stream"):
            outputs.append({"type": kind, **msg["content"]})
    reply = client.get_shell_msg(timeout=60)
    assert reply["content"]["status"] == "ok", reply["content"]
    return outputs


GLUE = 'from helpers import glue\nglue("ratio", "0.4011")\nglue("shown", "1.25", display=True)'


def test_an_unattended_run_stores_the_values_for_the_site(kernel):
    outputs = run(kernel, GLUE, allow_stdin=False)
    assert [o["type"] for o in outputs] == ["display_data", "display_data"], outputs
    stored, shown = outputs
    assert stored["data"] == {GLUE_PREFIX + "text/plain": "'0.4011'"}
    assert stored["metadata"]["scrapbook"] == {"name": "ratio", "mime_prefix": GLUE_PREFIX}
    assert shown["data"] == {"text/plain": "'1.25'"}
    assert shown["metadata"]["scrapbook"] == {"name": "shown", "mime_prefix": ""}


def test_a_reader_run_leaves_no_output_but_what_display_asks_for(kernel):
    outputs = run(kernel, GLUE, allow_stdin=True)
    assert [o["type"] for o in outputs] == ["display_data"], outputs
    assert outputs[0]["data"] == {"text/plain": "'1.25'"}  # display=True still shows it
    # and a glue cell of the book (no display=True) leaves nothing at all
    assert run(kernel, 'glue("ratio", "0.4011")', allow_stdin=True) == []


def test_in_colab_glue_stores_nothing_even_from_an_unattended_run(kernel):
    """Colab's kernel has google.colab imported (its shell comes from there)."""
    code = "import sys, types\nsys.modules['google.colab'] = types.ModuleType('google.colab')\n"
    code += 'glue("ratio", "0.4011")\ndel sys.modules["google.colab"]'
    assert run(kernel, code, allow_stdin=False) == []

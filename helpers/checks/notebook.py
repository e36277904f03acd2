"""A self-check on a function that is not defined yet: one line in a notebook, no traceback.

In a notebook, ``helpers.checks.check_softmax(my_softmax)`` run before the cell that
defines ``my_softmax`` fails before the check starts: Python looks the name up to pass
it, and IPython shows a ``NameError`` traceback. :func:`install` (called when
``helpers.checks`` is imported in IPython or Jupyter) adds an IPython handler for
exactly that case, a cell that is one self-check call whose argument is the undefined
name: it prints the check's one-line "not attempted" report instead, as the check does
for a function that still raises ``NotImplementedError``. Every other ``NameError``
keeps IPython's usual traceback. The cell still counts as failed (a "Run all" stops
there), as it should: the check did not run.
"""

from __future__ import annotations

import ast
import linecache
import sys
from types import TracebackType
from typing import Any

from helpers.i18n import localize, msg

__all__ = ["already_shown", "install", "not_defined_report", "show", "shown_where_called"]

_MARK = "_helpers_checks_name_error"  # set on the shell when its handler is this module's
_SHOWN = "_shown_in_cell"  # set on a report shown by the check that made it: (shell, cell)


def _shell() -> Any:
    """The running IPython shell, or None (plain Python, or IPython not installed)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is installed with the book
        return None
    return get_ipython()


def _cell_key(shell: Any) -> tuple[int, int]:
    return id(shell), int(getattr(shell, "execution_count", 0) or 0)


def show(report: Any) -> None:
    """Display `report` as text in the running notebook (no-op outside IPython)."""
    shell = _shell()
    if shell is None:
        return
    from IPython.display import display

    display({"text/plain": repr(report)}, raw=True)
    object.__setattr__(report, _SHOWN, _cell_key(shell))


def already_shown(report: Any) -> bool:
    """Whether `report` was shown by its check in the cell that is running now."""
    shell = _shell()
    return shell is not None and getattr(report, _SHOWN, None) == _cell_key(shell)


def shown_where_called(check: Any) -> Any:
    """Wrap a ``check_*`` function so that, in a notebook, its report shows where it runs.

    Without this a report shows only when the call is a cell's last line: a check inside
    a loop, or followed by other code, says nothing. Outside IPython the wrapper only
    returns the report. The wrapper keeps the check's name, docstring and signature.
    """
    import functools

    @functools.wraps(check)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        report = check(*args, **kwargs)
        if _shell() is not None and hasattr(report, "check") and hasattr(report, "results"):
            show(report)
        return report

    return wrapper


def _check_call(source: str) -> tuple[str, list[str]] | None:
    """(check name, names passed to it) if `source` is one self-check call, else None."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    if len(body) != 1 or not isinstance(body[0], ast.Expr):
        return None
    call = body[0].value
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if not name.startswith("check_"):
        return None
    arguments = [*call.args, *(k.value for k in call.keywords)]
    return name, [a.id for a in arguments if isinstance(a, ast.Name)]


def not_defined_report(source: str, error: BaseException) -> str | None:
    """The one-line report for a cell `source` that raised `error`, or None.

    A report when the cell is a single self-check call (``helpers.checks.check_x(f)``)
    and `error` is the ``NameError`` of one of the names passed to it.

    Examples
    --------
    >>> report = not_defined_report(
    ...     "helpers.checks.check_softmax(my_softmax)",
    ...     NameError("name 'my_softmax' is not defined", name="my_softmax"),
    ... )
    >>> report.split(" (")[0]
    'check_softmax(my_softmax): not attempted yet'
    >>> not_defined_report("x = my_softmax", NameError("...", name="my_softmax")) is None
    True
    """
    name = getattr(error, "name", None)
    found = _check_call(source)
    if not isinstance(error, NameError) or found is None or name not in found[1]:
        return None
    return msg(
        "{found}({name}): not attempted yet ({name} is not defined: run the cell "
        "that defines it, then this check again).",
        found=found[0],
        name=name,
    )


def _cell_source(tb: TracebackType | None) -> str:
    """The source of the cell whose code raised (its frame is the last module frame)."""
    last = None
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "<module>":
            last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return "".join(linecache.getlines(last)) if last else ""


def _handler(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None):
    try:
        report = not_defined_report(_cell_source(tb), value)
    except Exception:  # never let the handler itself fail: IPython would drop it
        report = None
    if report is None:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    else:
        # one write, so that the line reaches the notebook as one output (print writes the
        # text and its newline separately: a flush in between split it in two); in the
        # notebook's language
        sys.stdout.write(localize(report) + "\n")
    return []


def install() -> bool:
    """Install the handler in the running IPython shell; True if it is installed.

    Nothing happens outside IPython, or when the shell already has another custom
    exception handler (it is left alone).
    """
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    if shell.custom_exceptions and not getattr(shell, _MARK, False):
        return False
    shell.set_custom_exc((NameError,), _handler)
    setattr(shell, _MARK, True)
    return True

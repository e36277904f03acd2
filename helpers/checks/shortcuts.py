"""Which of the book's own implementations a reader's function calls (the standard library only).

An exercise asks the reader to write a quantity that a function of ``helpers`` already
computes (``helpers.theory.min_head_width``, ``helpers.masks.causal_mask``, ...). A
function that calls that implementation passes without being an answer, however the call
is reached: ``helpers.x(...)``, ``from helpers.theory import x``, ``getattr(helpers, "x")``,
an alias, a wrapper, ``functools.partial``, a lambda. All of these end in the same code
object, so this module watches for the *code objects* of the declared implementations
while the reader's function runs:

- on Python 3.12 and later with :mod:`sys.monitoring` (PEP 669): a ``PY_START`` event is
  switched on for those code objects only, so nothing else is slowed down;
- on Python 3.11 with :func:`sys.setprofile` (and :func:`threading.setprofile` for the
  threads started meanwhile), whose ``call`` event sees every Python function entered.

Only the declared implementations count: a legitimate answer may call other helpers
(``helpers.softmax`` inside an attention exercise), and they are not watched. What is
declared for each self-check is ``helpers.checks.core.IMPLEMENTATIONS``.

This module imports nothing from :mod:`helpers` and nothing outside the standard library,
so that it can run where the self-checks are not installed (a grader's sealed kernel,
which has ``helpers`` without its checks): ``watching(names)`` is all it needs.

What it cannot see: a copy of the book's source pasted into the reader's own function (a
new code object), or a call made in another process. Code that installs its own profiler
while the reader's function runs replaces this one (the call may then go unseen).

For a function that runs in another process (a grader's sealed kernel): the stand-in that
calls it there asks :func:`watched_names` which names to watch, watches them there with
this module's :func:`watching`, and reports what was called back here with :func:`record`,
which the open watches take as if the calls had been made in this process.

Examples
--------
>>> import functools
>>> import helpers
>>> from helpers.checks.shortcuts import watching
>>> shortcut = functools.partial(helpers.causal_mask)
>>> with watching(["helpers.masks.causal_mask"]) as called:
...     _ = shortcut(3)
>>> called
['helpers.masks.causal_mask']
>>> with watching(["helpers.masks.causal_mask"]) as called:
...     _ = helpers.padding_mask([1], 2)  # another helper: not watched
>>> called
[]
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import sys
import threading
import types
from collections.abc import Iterable, Iterator

__all__ = ["code_of", "public_names", "record", "watched_names", "watching"]

# sys.monitoring's tool ids that debuggers, coverage and profilers leave free (0, 1, 2 and
# 5 are theirs by convention); the first one free is used.
_TOOL_IDS = (4, 3)
_TOOL_NAME = "helpers.checks"

_lock = threading.RLock()
# Every watch that is open, innermost last: (code object -> dotted name, calls recorded).
_open: list[tuple[dict[types.CodeType, str], list[str]]] = []
_state: dict[str, object] = {}  # how the hook is installed while a watch is open


def code_of(dotted: str) -> types.CodeType:
    """The code object of the function ``dotted`` (``"helpers.masks.causal_mask"``).

    A decorated function is unwrapped (``__wrapped__``), a ``functools.partial`` read
    through to its function, a bound method to its function.

    Raises
    ------
    ImportError, AttributeError, TypeError
        If ``dotted`` names no module attribute, or no Python function.
    """
    module_name, _, attribute = dotted.rpartition(".")
    if not module_name:
        raise ImportError(f"{dotted!r} is not a dotted name module.function")
    target = getattr(importlib.import_module(module_name), attribute)
    while True:
        if isinstance(target, functools.partial):
            target = target.func
        elif isinstance(target, types.MethodType):
            target = target.__func__
        elif hasattr(target, "__wrapped__"):
            target = inspect.unwrap(target)
        else:
            break
    code = getattr(target, "__code__", None)
    if not isinstance(code, types.CodeType):
        raise TypeError(f"{dotted} is not a Python function (a {type(target).__name__})")
    return code


def watched_names() -> list[str]:
    """The dotted names every open watch is watching, in the order they were declared."""
    with _lock:
        return list(dict.fromkeys(name for codes, _ in _open for name in codes.values()))


def record(names: Iterable[str]) -> None:
    """Record calls of ``names`` made elsewhere (another process): each open watch that
    watches one of them records it, as if it had been entered here. Other names are
    ignored."""
    with _lock:
        for codes, calls in _open:
            declared = set(codes.values())
            for name in names:
                if name in declared and name not in calls:
                    calls.append(name)


def public_names(called: Iterable[str]) -> list[str]:
    """``called`` without the private delegates (``helpers.flash._forward``) of a public one.

    A call of ``helpers.multihead.multi_head_attention`` also enters its delegate
    ``helpers.multihead._forward``; what the reader called is the public function. A
    private delegate called on its own is kept.
    """
    called = list(dict.fromkeys(called))
    public = [n for n in called if not n.rpartition(".")[2].startswith("_")]
    return public or called


def _record(code: types.CodeType) -> None:
    for codes, calls in _open:
        name = codes.get(code)
        if name is not None and name not in calls:
            calls.append(name)


def _profile(frame: types.FrameType, event: str, arg: object) -> None:
    if event == "call":
        _record(frame.f_code)


def _monitoring_callback(code: types.CodeType, offset: int) -> object:
    _record(code)
    return None


def _watched_codes() -> set[types.CodeType]:
    return {code for codes, _ in _open for code in codes}


def _install() -> None:
    """Start watching (the first watch opened)."""
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        for tool in _TOOL_IDS:
            if monitoring.get_tool(tool) is None:
                monitoring.use_tool_id(tool, _TOOL_NAME)
                monitoring.register_callback(tool, monitoring.events.PY_START, _monitoring_callback)
                _state["tool"] = tool
                _state["codes"] = set()
                _refresh()
                return
    # Python 3.11, or every tool id taken: the profiler hook of this thread and of the
    # threads started while the watch is open.
    _state["profile"] = sys.getprofile()
    _state["thread_profile"] = threading.getprofile()
    sys.setprofile(_profile)
    threading.setprofile(_profile)


def _refresh() -> None:
    """With sys.monitoring: switch PY_START on exactly for the codes watched now."""
    if "tool" not in _state:
        return
    monitoring = sys.monitoring
    tool = _state["tool"]
    wanted = _watched_codes()
    current: set = _state["codes"]  # type: ignore[assignment]
    for code in current - wanted:
        monitoring.set_local_events(tool, code, 0)
    for code in wanted - current:
        monitoring.set_local_events(tool, code, monitoring.events.PY_START)
    _state["codes"] = wanted


def _restore_profiler(previous: object, install: object) -> None:
    """Give the profiler hook back to whoever held it (``install`` is sys.setprofile or
    threading.setprofile). A profiler written in C, such as cProfile's, is held as an
    object that is not callable: it is switched back on with its own ``enable()``."""
    if previous is None or callable(previous):
        install(previous)  # type: ignore[operator]
    else:
        install(None)  # type: ignore[operator]
        enable = getattr(previous, "enable", None)
        if install is sys.setprofile and callable(enable):
            enable()


def _uninstall() -> None:
    """Stop watching (the last watch closed)."""
    if "tool" in _state:
        monitoring = sys.monitoring
        tool = _state.pop("tool")
        for code in _state.pop("codes"):  # type: ignore[union-attr]
            monitoring.set_local_events(tool, code, 0)
        monitoring.register_callback(tool, monitoring.events.PY_START, None)
        monitoring.free_tool_id(tool)
    if "profile" in _state:
        _restore_profiler(_state.pop("profile"), sys.setprofile)
        _restore_profiler(_state.pop("thread_profile"), threading.setprofile)


@contextlib.contextmanager
def watching(names: Iterable[str]) -> Iterator[list[str]]:
    """Record which of the functions ``names`` are entered inside the ``with`` block.

    Parameters
    ----------
    names : iterable of str
        Dotted names of functions, ``"helpers.theory.min_head_width"``. A name that does
        not resolve to a Python function is ignored (a grader must never fail because a
        declaration is stale).

    Yields
    ------
    list of str
        The names entered, in the order of their first call, filled in as the block
        runs (read it after the block). Nested watches each record their own names.
    """
    codes: dict[types.CodeType, str] = {}
    for name in names:
        try:
            codes.setdefault(code_of(name), name)
        except (ImportError, AttributeError, TypeError):
            continue
    calls: list[str] = []
    if not codes:
        yield calls
        return
    entry = (codes, calls)
    with _lock:
        _open.append(entry)
        try:
            _install() if len(_open) == 1 else _refresh()
        except Exception:  # never fail the caller: watch nothing rather than raise
            _open.remove(entry)
            entry = None
    try:
        yield calls
    finally:
        if entry is not None:
            with _lock:
                _open.remove(entry)
                try:
                    _uninstall() if not _open else _refresh()
                except Exception:
                    _state.clear()

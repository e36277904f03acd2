"""The grader's side of a self-check: the check runs here, the student's function there.

``RemoteFunction`` stands in for the student's function in the grader's own process:
``helpers.checks.run_self_check(check, {name: stand_in}, name)`` runs the book's check
exactly as in Colab (same cases, same diagnoses, same messages), and every time the check
calls the function, the stand-in sends the arguments (only the arguments: never an
expected answer) to the student's kernel, which calls the student's function on them and
sends back, as data, what it returned or raised, the RuntimeWarnings it emitted, the
arguments it changed in place and, when the check measures memory, its peak. The
stand-in then returns that value, raises that exception, re-emits those warnings, writes
those changes into the check's own arguments and allocates that peak (``tracemalloc``
sees it), so the check decides in the grader's process.

What comes back is untrusted: a JSON object of bounded size and depth whose arrays are
``.npy`` bytes, parsed here without pickle, checked against their header and limited to
numbers, booleans, strings and dates. Anything else is an error, never a pass. What the
kernel reports about itself (an input changed in place, the peak memory, the warnings,
the exception's type) is the one part of a verdict the submission could misreport.

The book's own code. An exercise asks for a quantity that a function of ``helpers``
already computes (``helpers.checks.core.IMPLEMENTATIONS``); calling it is not an answer.
Before the checks run, the grader arms a watch in the kernel (:func:`arm_source`): a
profiler function that notes every entry into the code of those helpers, recognised by
the file, first line and name of their code (so an alias, ``getattr``, a wrapper, code
decoded from base64, a re-bound module attribute or an IPython hook that runs before the
grader's cell are all seen), from then on until the kernel ends. Each call cell sends back
what was entered since the previous one, and whether the watch was still in place
(``watch`` in the answer); the stand-in records those names in the check's own watch
(``helpers.checks.shortcuts.record``), so the check reports the function as calling the
book's implementation, and notes them for the grader's row. A call cell answered more than
once (the notebook's own code answering the grader's request) is an error. All of this is
what the kernel says about itself: code in the kernel can switch the watch off or forge
the whole answer, which the grader then sees only as a watch not in place, or a second
answer (see book/instructors.md).
"""

from __future__ import annotations

import base64
import builtins
import io
import json
import math
import re
import secrets
import tracemalloc
import warnings
from collections.abc import Callable

import numpy as np
from grade_i18n import msg

MIME = "application/vnd.attention-book.grade+json"
MAX_NODES = 20_000  # values in one message
MAX_DEPTH = 16
MAX_TEXT = 2_000  # characters of a string, an exception message, a warning
MAX_ARRAY_BYTES = 256 * 2**20  # all the arrays of one message together
ALLOWED_KINDS = "biufcUSmM"  # numbers, booleans, strings, dates: no objects, no structs
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,79}")
_INTEGER = re.compile(r"-?[0-9]{1,400}")


class GradingAborted(BaseException):
    """The student's function cannot be graded: time limit, dead kernel, bad answer."""


class SubmissionStopped(GradingAborted):
    """The student's function raised what stops a check (KeyboardInterrupt, SystemExit)
    without the grader's limits being involved: its own doing, so the verdict is "failed",
    and its message is quoted as the submission's own words."""


class BadMessage(ValueError):
    """What the kernel sent back is not a well-formed answer."""


# ---------------------------------------------------------------------------
# Values as data: encode (the grader's requests), decode strictly (the kernel's answers)
# ---------------------------------------------------------------------------


def _npy(array: np.ndarray) -> str:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


# The one kind of function a check passes to the student's function (check_beam_search's
# next_log_probs): a table of next-token log-probabilities indexed by the last two tokens,
# sent as the table and rebuilt in the kernel by __grade_call__.
TABLE_KIND = "last-two-tokens table"


def encode(value: object, depth: int = 0) -> dict:
    """A value the grader sends (a check's arguments) as JSON-able data."""
    if depth > MAX_DEPTH:
        raise TypeError("arguments nested too deeply to send to the kernel")
    if value is None:
        return {"t": "none"}
    if isinstance(value, bool):
        return {"t": "bool", "v": value}
    if isinstance(value, int):
        return {"t": "int", "v": str(value)}
    if isinstance(value, float):
        return {"t": "float", "v": repr(value)}
    if isinstance(value, str):
        return {"t": "str", "v": value}
    if isinstance(value, np.ndarray):
        return {"t": "array", "npy": _npy(np.asarray(value))}
    if isinstance(value, np.generic):
        return {"t": "scalar", "npy": _npy(np.asarray(value))}
    if isinstance(value, tuple):
        return {"t": "tuple", "items": [encode(v, depth + 1) for v in value]}
    if isinstance(value, list):
        return {"t": "list", "items": [encode(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        items = [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]
        return {"t": "dict", "items": items}
    if callable(value) and callable(getattr(value, "wire", None)):
        kind, table = value.wire()  # a function that is a table (helpers.checks.models)
        if kind == TABLE_KIND:
            return {"t": "table-fn", "npy": _npy(np.asarray(table, dtype=np.float64))}
    raise TypeError(f"cannot send a {type(value).__name__} to the kernel")


class _Budget:
    def __init__(self) -> None:
        self.nodes = MAX_NODES
        self.array_bytes = MAX_ARRAY_BYTES


def parse_npy(data: bytes) -> np.ndarray:
    """An array from .npy bytes, strictly: no pickle, header and length must agree."""
    f = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise BadMessage(msg("unsupported .npy version {version}", version=version))
    except ValueError as err:
        raise BadMessage(msg("not a .npy array: {why}", why=str(err))) from None
    if dtype.hasobject or dtype.kind not in ALLOWED_KINDS or dtype.fields is not None:
        raise BadMessage(
            msg("an array of dtype {dtype} (only numbers, booleans, strings)", dtype=str(dtype))
        )
    count = math.prod(shape)
    offset = f.tell()
    if count * dtype.itemsize != len(data) - offset:
        raise BadMessage(msg("a .npy array whose header does not match its length"))
    flat = np.frombuffer(data, dtype=dtype, count=count, offset=offset)
    return flat.reshape(shape, order="F" if fortran else "C").copy()


def _opaque(type_name: str, array: np.ndarray | None) -> object:
    """A stand-in for a returned object that is not plain data: same type name, and the
    same ``numpy.asarray`` when it has one (so the check reports what it would in Colab)."""
    namespace: dict[str, object] = {"__module__": "submission"}
    if array is not None:

        def __array__(self, dtype=None, copy=None):
            return array if dtype is None else array.astype(dtype)

        namespace["__array__"] = __array__
    return type(type_name, (), namespace)()


def decode(node: object, budget: _Budget | None = None, depth: int = 0) -> object:
    """A value the kernel sent back, parsed strictly (raises BadMessage)."""
    budget = budget or _Budget()
    budget.nodes -= 1
    if budget.nodes < 0 or depth > MAX_DEPTH:
        raise BadMessage(msg("too many or too deeply nested values"))
    if not isinstance(node, dict) or not isinstance(node.get("t"), str):
        raise BadMessage(msg("a value without a type"))
    kind = node["t"]
    v = node.get("v")
    if kind == "none":
        return None
    if kind == "bool" and isinstance(v, bool):
        return v
    if kind == "int" and isinstance(v, str) and _INTEGER.fullmatch(v):
        return int(v)
    if kind == "float" and isinstance(v, str) and len(v) <= 40:
        try:
            return float(v)
        except ValueError:
            raise BadMessage(msg("not a float: {value!r}", value=v[:40])) from None
    if kind == "str" and isinstance(v, str) and len(v) <= MAX_TEXT:
        return v
    if kind in ("array", "scalar", "other"):
        array = None
        if "npy" in node:
            text = node["npy"]
            if not isinstance(text, str) or len(text) * 3 // 4 > budget.array_bytes:
                raise BadMessage(msg("arrays larger than the limit"))
            try:
                data = base64.b64decode(text, validate=True)
            except ValueError:
                raise BadMessage(msg("an array that is not base64")) from None
            budget.array_bytes -= len(data)
            array = parse_npy(data)
        if kind == "array" and array is not None:
            return array
        if kind == "scalar" and array is not None and array.ndim == 0:
            return array[()]
        if kind == "other":
            name = node.get("type")
            if isinstance(name, str) and _IDENTIFIER.fullmatch(name):
                return _opaque(name, array)
        raise BadMessage(msg("a malformed {kind}", kind=kind))
    if kind in ("tuple", "list") and isinstance(node.get("items"), list):
        items = [decode(x, budget, depth + 1) for x in node["items"]]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict" and isinstance(node.get("items"), list):
        out = {}
        for pair in node["items"]:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise BadMessage(msg("a malformed dict"))
            key = decode(pair[0], budget, depth + 1)
            if not isinstance(key, (str, int, float, bool, type(None))):
                raise BadMessage(msg("a dict key that is not a str or a number"))
            out[key] = decode(pair[1], budget, depth + 1)
        return out
    raise BadMessage(msg("an unknown or malformed value of type {kind!r}", kind=kind[:20]))


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise BadMessage(msg("{what} is not a string", what=what))
    return value[:MAX_TEXT]


# ---------------------------------------------------------------------------
# The code run in the student's kernel (it has no access to anything above)
# ---------------------------------------------------------------------------

KERNEL_CODE = r"""
def __grade_call__(request_path, MIME):
    import base64, io, json, tracemalloc, warnings
    import numpy as np
    from IPython.display import publish_display_data

    def npy(a):
        b = io.BytesIO()
        np.save(b, a, allow_pickle=False)
        return base64.b64encode(b.getvalue()).decode("ascii")

    def dec(n):
        t = n["t"]
        if t == "none":
            return None
        if t in ("bool", "str"):
            return n["v"]
        if t == "int":
            return int(n["v"])
        if t == "float":
            return float(n["v"])
        if t in ("array", "scalar"):
            a = np.load(io.BytesIO(base64.b64decode(n["npy"])), allow_pickle=False)
            return a[()] if t == "scalar" else a
        if t == "tuple":
            return tuple(dec(x) for x in n["items"])
        if t == "list":
            return [dec(x) for x in n["items"]]
        if t == "dict":
            return {dec(k): dec(v) for k, v in n["items"]}
        if t == "table-fn":
            table = np.load(io.BytesIO(base64.b64decode(n["npy"])), allow_pickle=False)

            def next_log_probs(tokens):
                tokens = np.asarray(tokens)
                if tokens.ndim != 2:
                    raise ValueError(
                        "next_log_probs takes the beams as one array of shape (beams, t), "
                        f"got shape {tokens.shape}"
                    )
                return table[tokens[:, -2], tokens[:, -1]]

            return next_log_probs
        raise ValueError(t)

    def enc(x, depth=0):
        if depth > 16:
            return {"t": "other", "type": type(x).__name__}
        if x is None:
            return {"t": "none"}
        if isinstance(x, bool):
            return {"t": "bool", "v": x}
        if isinstance(x, int) and abs(x) < 10**300:
            return {"t": "int", "v": str(int(x))}
        if isinstance(x, float):
            return {"t": "float", "v": repr(float(x))}
        if isinstance(x, str):
            return {"t": "str", "v": x[:2000]}
        if isinstance(x, np.ndarray) and x.dtype.kind in "biufcUSmM":
            return {"t": "array", "npy": npy(np.asarray(x))}
        if isinstance(x, np.generic) and x.dtype.kind in "biufcUSmM":
            return {"t": "scalar", "npy": npy(np.asarray(x))}
        if isinstance(x, tuple):
            return {"t": "tuple", "items": [enc(v, depth + 1) for v in x]}
        if isinstance(x, list):
            return {"t": "list", "items": [enc(v, depth + 1) for v in x]}
        if isinstance(x, dict) and all(isinstance(k, (str, int, float, bool)) for k in x):
            return {"t": "dict", "items": [[enc(k), enc(v, depth + 1)] for k, v in x.items()]}
        out = {"t": "other", "type": type(x).__name__}
        try:
            a = np.asarray(x)
            if a.dtype.kind in "biufcUSmM":
                out["npy"] = npy(a)
        except Exception:
            pass
        return out

    def leaves(x, path):
        if isinstance(x, np.ndarray):
            yield path, x
        elif isinstance(x, (tuple, list)):
            for i, v in enumerate(x):
                yield from leaves(v, path + [i])
        elif isinstance(x, dict):
            for k, v in x.items():
                yield from leaves(v, path + [k])

    def same(a, b):
        try:
            nan = a.dtype.kind in "fc"
            return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=nan)
        except Exception:
            return False

    with open(request_path) as f:
        request = json.load(f)
    answer = {"id": request["id"]}
    ns = globals()
    name = request["name"]
    if request.get("probe"):
        answer["defined"] = name in ns
        if name in ns:
            f = ns[name]
            shown = getattr(f, "__name__", None)
            shown = shown if isinstance(shown, str) else None
            answer.update(callable=callable(f), type=type(f).__name__, name=shown)
    else:
        f = ns[name]
        args, kwargs = dec(request["args"]), dec(request["kwargs"])
        before = [(p, a.copy()) for p, a in leaves([args, kwargs], [])]
        sizes = {}
        def walk(x, path):
            if isinstance(x, (list, dict)):
                keys = list(x) if isinstance(x, dict) else None
                sizes[tuple(map(str, path))] = (path, x, len(x), keys)
            if isinstance(x, (tuple, list)):
                for i, v in enumerate(x):
                    walk(v, path + [i])
            elif isinstance(x, dict):
                for k, v in x.items():
                    walk(v, path + [k])
        walk([args, kwargs], [])
        raised = None
        peak = None
        watcher, called, intact = None, None, False
        if request.get("watch"):
            import sys, threading

            try:  # the watch armed before grading (arm_source), as the kernel holds it
                watcher, called = ns["__grade_watch__"]
                intact = sys.getprofile() is watcher and threading.getprofile() is watcher
                earlier = sorted(str(x) for x in called)
                called.clear()
                if not intact:  # switched off: on again for this call, and reported
                    sys.setprofile(watcher)
                    threading.setprofile(watcher)
            except Exception:
                watcher, earlier = None, []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with np.errstate(**request["errstate"]):
                if request.get("trace"):
                    tracemalloc.start()
                    tracemalloc.reset_peak()
                    start = tracemalloc.get_traced_memory()[0]
                try:
                    result = f(*args, **kwargs)
                except Exception as err:
                    raised = [type(err).__name__, str(err)[:2000], False]
                except BaseException as err:
                    raised = [type(err).__name__, str(err)[:2000], True]
                if request.get("trace"):
                    peak = tracemalloc.get_traced_memory()[1] - start
                    tracemalloc.stop()
        if request.get("watch"):
            try:
                intact = intact and sys.getprofile() is watcher
                intact = intact and threading.getprofile() is watcher
                during = sorted(str(x) for x in called)
                called.clear()
            except Exception:
                intact, during = False, []
            answer["watch"] = {"called": sorted(set(earlier) | set(during))[:50], "intact": intact}
        runtime = [w for w in caught if issubclass(w.category, RuntimeWarning)]
        answer["warnings"] = [str(w.message)[:500] for w in runtime][:20]
        answer["raised"] = raised
        answer["peak"] = peak
        if raised is None:
            answer["result"] = enc(result)
        changed = []
        after = list(leaves([args, kwargs], []))
        for (path, old), (path2, new) in zip(before, after):
            if path == path2 and not same(old, new):
                changed.append([enc(path), enc(new)])
        for key, (path, x, n, keys) in sizes.items():
            if len(x) != n or (keys is not None and list(x) != keys):
                changed.append([enc(path), enc(x)])
        answer["changed"] = changed
    publish_display_data({MIME: answer})
"""


# The watch for the book's own code (see the module docstring): armed once, after the
# notebook's cells and before the first check, in the kernel's main thread and in the
# threads started from then on. ``keys``: dotted name -> [file, first line, name] of its code.
ARM_CODE = r"""
def __grade_arm__(keys):
    import sys, threading

    by_line = {}
    for name, (filename, first, codename) in keys.items():
        by_line.setdefault(first, []).append((filename, codename, name))
    called = set()

    def __grade_watcher__(frame, event, arg):
        if event == "call":
            code = frame.f_code
            found = by_line.get(code.co_firstlineno)
            if found is not None:
                for filename, codename, name in found:
                    if code.co_name == codename and code.co_filename == filename:
                        called.add(name)

    globals()["__grade_watch__"] = (__grade_watcher__, called)
    sys.setprofile(__grade_watcher__)
    threading.setprofile(__grade_watcher__)
"""


def watch_keys(names: list[str]) -> dict[str, list]:
    """Dotted name -> [file, first line, name] of the code of each helper ``names`` lists
    (a decorated function unwrapped); a name that resolves to no Python function is left
    out."""
    from helpers.checks.shortcuts import code_of

    keys = {}
    for name in dict.fromkeys(names):
        try:
            code = code_of(name)
        except (ImportError, AttributeError, TypeError):
            continue
        keys[name] = [code.co_filename, code.co_firstlineno, code.co_name]
    return keys


def arm_source(keys: dict[str, list]) -> str:
    """The cell that arms the watch in the kernel (see the module docstring)."""
    data = json.dumps(keys)
    return f"{ARM_CODE}\n__grade_arm__(__import__('json').loads({data!r}))\ndel __grade_arm__\n"


def answer_stub(data: object) -> dict:
    """What is kept of a second (third, ...) answer to one call cell: its id and its watch
    report, if they are small (the first answer is kept whole)."""
    stub: dict = {"stub": True}
    if isinstance(data, dict):
        if isinstance(data.get("id"), str) and len(data["id"]) <= 100:
            stub["id"] = data["id"]
        watch = data.get("watch")
        try:
            if isinstance(watch, dict) and len(json.dumps(watch, default=str)) <= 20_000:
                stub["watch"] = watch
        except (ValueError, TypeError, RecursionError):
            pass
    return stub


def call_source(request_path: str) -> str:
    """The cell that runs one call in the kernel (self-contained: the student's code may
    have replaced anything defined earlier)."""
    return f"{KERNEL_CODE}\n__grade_call__({request_path!r}, {MIME!r})\ndel __grade_call__\n"


# ---------------------------------------------------------------------------
# The stand-in
# ---------------------------------------------------------------------------

_BUILTIN_EXCEPTIONS = {
    name
    for name, cls in vars(builtins).items()
    if isinstance(cls, type) and issubclass(cls, Exception) and not name.startswith("_")
}


def make_exception(name: str, message: str) -> Exception:
    """An exception of the same type name and message as the student's."""
    if name in _BUILTIN_EXCEPTIONS:
        try:
            return getattr(builtins, name)(message)
        except Exception:
            pass
    return type(name, (Exception,), {"__module__": "submission"})(message)


class Remote:
    """The grader's link to one kernel: runs a call cell, returns the kernel's answer."""

    def __init__(self, run_cell: Callable[[str, float], dict], write_request: Callable) -> None:
        self.run_cell = run_cell  # (source, timeout) -> {"answer": dict | None, "problem": str}
        self.write_request = write_request  # (name, text) -> path readable by the kernel
        self.count = 0
        self.deadline = math.inf
        self.measured_memory = False
        # The grader's watchdog (scripts/grade.py) stops a check that overruns its time in
        # the grader's own code; during a call to the kernel it only leaves a note here.
        self.in_call = False
        self.overdue = ""
        # The book's implementations of what the current check grades (dotted names, armed
        # in the kernel), and what the kernel reported about them during this check.
        self.watched: tuple[str, ...] = ()
        self.book_calls: list[str] = []
        self.watch_off = False

    def start_check(self, watched: tuple[str, ...]) -> None:
        """Before each check: what to watch, and nothing reported yet."""
        self.watched = tuple(watched)
        self.book_calls = []
        self.watch_off = False

    def _note_watch(self, answer: dict, alone: bool) -> None:
        """Take an answer's watch report: the book's implementations entered (recorded in
        the check's own watch too, as if entered here), and, when it is the only answer,
        whether the watch was on."""
        watch = answer.get("watch")
        if alone and (not isinstance(watch, dict) or watch.get("intact") is not True):
            self.watch_off = True
        called = watch.get("called") if isinstance(watch, dict) else None
        if not isinstance(called, list):
            return
        names = [n for n in called[:50] if isinstance(n, str) and n in self.watched]
        self.book_calls += [n for n in dict.fromkeys(names) if n not in self.book_calls]
        if names:
            from helpers.checks.shortcuts import record

            record(names)

    def ask(self, request: dict, timeout: float) -> dict:
        self.count += 1
        request = {**request, "id": f"{self.count}-{secrets.token_hex(4)}"}
        path = self.write_request(f"request-{self.count}.json", json.dumps(request))
        self.in_call = True
        try:
            outcome = self.run_cell(call_source(path), timeout)
        finally:
            self.in_call = False
        if self.overdue:
            raise GradingAborted(self.overdue)
        if outcome.get("problem"):
            raise GradingAborted(outcome["problem"])
        answers = [a for a in outcome["answers"] if isinstance(a, dict)]
        mine = [a for a in answers if a.get("id") == request["id"]]
        if request.get("watch"):
            for answer in mine:
                self._note_watch(answer, alone=len(mine) == 1)
        answer = next((a for a in mine if not a.get("stub")), None)
        if answer is None:
            raise GradingAborted(
                msg(
                    "the notebook's kernel sent back no answer (its code may have replaced "
                    "what the grader runs there)"
                )
            )
        if len(mine) > 1:  # the grader's cell answers once: the rest is the notebook's
            raise GradingAborted(
                msg(
                    "{count} answers came back to one request for {name}: code of the notebook "
                    "(an IPython hook, say) answers the grader's requests itself, so none can "
                    "be trusted; read the notebook's code",
                    count=len(mine),
                    name=request["name"],
                )
            )
        return answer

    def probe(self, name: str, timeout: float) -> dict:
        answer = self.ask({"probe": True, "name": name}, timeout)
        if not isinstance(answer.get("defined"), bool):
            raise GradingAborted(msg("the notebook's kernel sent back a malformed answer"))
        return answer


class RemoteFunction:
    """Stands in for the student's function ``name`` (see the module docstring)."""

    def __init__(self, remote: Remote, name: str, shown: str, timeout: float) -> None:
        self._remote = remote
        self._name = name
        self._timeout = timeout
        self.__name__ = shown

    def __call__(self, *args: object, **kwargs: object) -> object:
        remote = self._remote
        tracing = tracemalloc.is_tracing()
        request = {
            "name": self._name,
            "args": encode(args),
            "kwargs": encode(kwargs),
            "errstate": dict(np.geterr()),  # the check's, as the function would run under
            "trace": tracing,
            "watch": bool(remote.watched),
        }
        timeout = min(self._timeout, remote.deadline - _now())
        if timeout <= 0:
            raise GradingAborted(
                msg("time limit: {function} did not return within the limit", function=self._name)
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            answer = remote.ask(request, timeout)
            try:
                outcome = self._parse(answer, args, kwargs)
            except BadMessage as err:
                why = err.args[0] if err.args else str(err)
                raise GradingAborted(
                    msg(
                        "the notebook's kernel sent back something that is not an answer: {why}",
                        why=why,
                    )
                ) from None
        raised, value, warned, peak = outcome
        for message in warned:
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        if tracing and peak:
            remote.measured_memory = True
            block = np.empty(peak, dtype=np.uint8)  # tracemalloc sees the kernel's peak
            del block
        if raised is not None:
            raise raised
        return value

    def _parse(self, answer: dict, args: tuple, kwargs: dict):
        warned = answer.get("warnings", [])
        if not isinstance(warned, list) or len(warned) > 20:
            raise BadMessage(msg("malformed warnings"))
        warned = [_text(w, msg("a warning")) for w in warned]
        peak = answer.get("peak")
        if peak is not None and not (isinstance(peak, int) and 0 <= peak < 2**40):
            raise BadMessage(msg("a malformed peak"))
        changed = answer.get("changed", [])
        if not isinstance(changed, list):
            raise BadMessage(msg("malformed changes"))
        budget = _Budget()
        for item in changed:
            if not (isinstance(item, list) and len(item) == 2):
                raise BadMessage(msg("a malformed change"))
            path, value = decode(item[0], budget), decode(item[1], budget)
            if not isinstance(path, list):
                raise BadMessage(msg("a malformed change"))
            _apply_change([args, kwargs], path, value)
        raised_info = answer.get("raised")
        if raised_info is not None:
            if not (isinstance(raised_info, list) and len(raised_info) == 3):
                raise BadMessage(msg("a malformed exception"))
            name, message, base = raised_info
            name = _text(name, msg("an exception's name"))
            if not _IDENTIFIER.fullmatch(name):
                raise BadMessage(msg("an exception name that is not an identifier"))
            message = _text(message, msg("an exception's message"))
            if base is True:  # KeyboardInterrupt, SystemExit: the grader's limits are not
                # (a time limit is known from the grader's own clock, before any answer)
                raise SubmissionStopped(
                    msg(
                        "{function} raised {name}, which stops a self-check (its message, "
                        "written by the submission: {message!r})",
                        function=self._name,
                        name=name,
                        message=message[:200],
                    )
                )
            return make_exception(name, message), None, warned, peak
        if "result" not in answer:
            raise BadMessage(msg("no result"))
        return None, decode(answer["result"], budget), warned, peak


def _apply_change(root: object, path: list, value: object) -> None:
    """Write a change the function made to its arguments into the check's own arguments."""
    target = root
    for key in path:
        try:
            target = target[key]
        except (KeyError, IndexError, TypeError):
            return
    if isinstance(target, np.ndarray) and isinstance(value, np.ndarray):
        try:
            if target.shape != value.shape:
                target.shape = value.shape
            np.copyto(target, value, casting="unsafe")
        except (ValueError, TypeError, AttributeError):
            target.flat[:] = np.nan if target.dtype.kind in "fc" else ~target.flat[:]
    elif isinstance(target, list) and isinstance(value, list):
        target[:] = value
    elif isinstance(target, dict) and isinstance(value, dict):
        target.clear()
        target.update(value)


def _now() -> float:
    import time

    return time.monotonic()

"""The attacks of a red team on `make grade` (issue 35), each replayed on the real command,
sealed, in one graded class beside honest students.

The sealed attacks report through a canary: the attack cell records how each attempt
ended, and one of the graded functions returns the right answer only if every attempt
was made and refused as it should be (EPERM from the seccomp filter, a permission error
on the host's disk, at most one core of CPU). So "passed" on a canary row means "tried
and refused", and a canary whose attack did not even run fails. Before the fixes each
canary failed (the keys were made and read, kernel.json grew, 200 processes took both
cores).

Needs the isolation (root, bubblewrap, cgroup v1 memory, pids and cpu): elsewhere every
test here is skipped, with the reason printed.
"""

from __future__ import annotations

import base64
import csv
import ctypes
import os
import platform
import re
import secrets
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import nbformat
import pytest

from tests.conftest import ROOT
from tests.test_grade import RIGHT, SETUP, chapter_one, notebook
from tests.test_grade_copies import COPIED_JACOBIAN

sys.path.insert(0, str(ROOT / "scripts"))
import grade
import grade_seccomp
from grade_sandbox import CFS_PERIOD_US, CPU_CORES, UID_RANGE, Isolation, key_users

ISOLATION = Isolation.detect()
pytestmark = pytest.mark.skipif(
    not ISOLATION.available, reason=f"no isolation on this machine: {ISOLATION.missing}"
)
UID_BASE = 6_000_000 + secrets.randbelow(1000) * UID_RANGE  # this run's own user ids
SYSCALLS = grade_seccomp.DENIED.get(platform.machine(), {})
INSTRUCTOR_KEY = f"instructor-secret-{secrets.token_hex(4)}"


def guarded(function: str, flag: str) -> str:
    """The right answer, given only when the attack cell set ``flag`` to "refused"."""
    right = textwrap.dedent(RIGHT[function]).replace(f"def {function}(", f"def _{function}(")
    return f"""{right}

def {function}(*args):
    if {flag} != "refused":
        return np.zeros(3)
    return _{function}(*args)
"""


# The kernel keyring: make a key (in the uid's persistent keyring, in the session's),
# then read whatever /proc/keys shows (the instructor's session key, a classmate's).
KEYS = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def call(number, *args):
    result = libc.syscall(ctypes.c_long(number), *args)
    return result, ctypes.get_errno()
KEYCTL, ADD_KEY = %(keyctl)d, %(add_key)d
tries = []
keyring, err = call(KEYCTL, ctypes.c_long(22), ctypes.c_long(-1), ctypes.c_long(-2))
tries.append(err if keyring < 0 else 0)  # KEYCTL_GET_PERSISTENT: 0 means it worked
payload = b"my answer, for a classmate"
for where in ([keyring] if keyring > 0 else []) + [-3, -4]:  # persistent, session, user
    key, err = call(ADD_KEY, b"user", b"leaked-answer", payload, ctypes.c_size_t(len(payload)),
                    ctypes.c_long(where))
    tries.append(err if key < 0 else 0)
    if key > 0:
        call(KEYCTL, ctypes.c_long(5), ctypes.c_long(key), ctypes.c_long(0x3F3F3F3F))
seen = open("/proc/keys").read()
read = []
for line in seen.splitlines():
    buffer = ctypes.create_string_buffer(256)
    n, err = call(KEYCTL, ctypes.c_long(11), ctypes.c_long(int(line.split()[0], 16)), buffer,
                  ctypes.c_long(256))
    if n > 0:
        read.append(buffer.raw[:n])
visible = "leaked-answer" in seen or "instructor-secret" in seen
KEYS_TRIED = tries
KEYS = "refused" if tries and set(tries) == {errno.EPERM} and not read and not visible else "made"
"""

# The host's disk: every writable mount of a disk file system (the kernel's socket folder,
# on the host's /tmp): append to its files (kernel.json), make a new one.
DISK = """
import os
tried, refused = 0, 0
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    point, options, kind = fields[4], fields[5], fields[fields.index("-") + 1]
    if kind in ("tmpfs", "proc", "devtmpfs", "devpts", "sysfs") or "rw" not in options.split(","):
        continue
    paths = [os.path.join(point, name) for name in os.listdir(point)]
    for path in [p for p in paths if os.path.isfile(p)] + [os.path.join(point, "new-file")]:
        tried += 1
        try:
            with open(path, "a") as f:
                f.write(" " * 2**20)
        except PermissionError:
            refused += 1
DISK = "refused" if tried and refused == tried else f"{tried - refused} of {tried} written"
"""

# The CPU: 64 busy processes for 2 s; without a bound they take every core there is
# (and, on a busy machine, most of the others' share).
CPU = """
import os, time
end = time.monotonic() + 2
children = []
for _ in range(64):
    pid = os.fork()
    if pid == 0:
        while time.monotonic() < end:
            pass
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
times = os.times()
CORES = (times.children_user + times.children_system) / 2
CPU = "refused" if CORES <= 1.15 else f"{CORES:.2f} cores"
"""

FORGED = "time limit: my_softmax did not return within 120 s; please regrade by hand"
INTERRUPTING_SOFTMAX = f"""
def my_softmax(z, tau=1.0):
    raise KeyboardInterrupt({FORGED!r})
"""
# 10 MB: sent back well within the memory limit, then tens of seconds for the check to
# format (42 s here in the grader's process, where the time limit is 20 s)
HUGE_SOFTMAX = """
def my_softmax(z, tau=1.0):
    return np.ones((12, 10**5))
"""
# The grader's own memory: its MIME type and error outputs, 20 MB each.
FLOOD = """
from IPython.display import publish_display_data
ip = get_ipython()
for _ in range(50):
    publish_display_data({"%(mime)s": {"id": "x", "flood": "y" * (20 * 2**20)}})
    ip.kernel.session.send(ip.kernel.iopub_socket, "error",
                           {"ename": "E", "evalue": "y" * (20 * 2**20), "traceback": []},
                           parent=ip.kernel.get_parent("shell"))
"""
DEEP = "x = 1\ny = x" + ".a" * 3000 + "\nz = 1" + " + 1" * 3000

# 4. The book's own code as an answer, three ways that a reader of the code does not see.
# (a) An IPython hook answers the grader's requests for my_softmax from helpers.softmax,
# before the grader's own cell runs; the visible my_softmax returns zeros.
HOOK = """
import base64, io, json, re
from IPython.display import publish_display_data

def _load(node):
    if node["t"] in ("array", "scalar"):
        a = np.load(io.BytesIO(base64.b64decode(node["npy"])), allow_pickle=False)
        return a[()] if node["t"] == "scalar" else a
    return float(node["v"]) if node["t"] in ("int", "float") else node.get("v")

def _answer_for_me(info):
    found = re.search(r"__grade_call__\\('([^']+)', '([^']+)'\\)", info.raw_cell or "")
    if not found:
        return
    request = json.load(open(found.group(1)))
    if request.get("probe") or request["name"] != "my_softmax":
        return
    args = [_load(a) for a in request["args"]["items"]]
    args += [_load(v) for _, v in request["kwargs"]["items"]]
    z, tau = np.asarray(args[0], dtype=float), (args[1:] or [1.0])[0]
    finite = np.isfinite(z.max(axis=-1, keepdims=True))  # a fully masked row: zeros
    if tau == 0:
        top = (z == z.max(axis=-1, keepdims=True)) & finite
        p = top / np.maximum(top.sum(axis=-1, keepdims=True), 1)
    else:
        p = helpers.softmax(np.where(finite, z, 0.0), temperature=tau) * finite
    buffer = io.BytesIO()
    np.save(buffer, p, allow_pickle=False)
    result = {"t": "array", "npy": base64.b64encode(buffer.getvalue()).decode()}
    answer = {"id": request["id"], "raised": None, "warnings": [], "changed": []}
    publish_display_data({found.group(2): {**answer, "peak": None, "result": result}})

get_ipython().events.register("pre_run_cell", _answer_for_me)

def my_softmax(z, tau=1.0):
    return np.zeros(np.shape(z))
"""
# (b) helpers reached without its name in the code.
GETATTR = """
import sys
my_entropy = lambda p: getattr(sys.modules["help" + "ers"], "ent" + "ropy")(p)
"""
# (c) A collapsed Colab form cell that, only on a machine called "grading" (the sandbox's
# host name), runs base64 that rebinds my_softmax_jacobian to the book's.
PAYLOAD = base64.b64encode(
    b"my_softmax_jacobian = lambda z: __import__('helpers').softmax_jacobian(z)"
).decode()
FORM = f"""
#@title Setup (run me) {{ display-mode: "form" }}
import base64, socket
if socket.gethostname() == "grading":
    exec(base64.b64decode("{PAYLOAD}"))
"""
# (d) The watch switched off inside the function, before the book's code is called.
UNWATCHED_ENTROPY = """
import sys, threading
def my_entropy(p):
    sys.setprofile(None)
    threading.setprofile(None)
    return helpers.entropy(p)
"""
VISIBLE_JACOBIAN = """
def my_softmax_jacobian(z):
    return np.zeros((len(z), len(z)))
"""


def the_class(folder: Path) -> None:
    values = {"keyctl": SYSCALLS.get("keyctl", -1), "add_key": SYSCALLS.get("add_key", -1)}
    values["mime"] = grade.grade_wire.MIME
    sealed = notebook(
        SETUP,
        KEYS % values,
        DISK,
        CPU,
        guarded("my_softmax_jacobian", "KEYS"),
        guarded("my_log_softmax_backward", "DISK"),
        guarded("my_entropy", "CPU"),
        INTERRUPTING_SOFTMAX,
    )
    shortcuts = chapter_one(
        HOOK,
        VISIBLE_JACOBIAN,
        FORM,
        GETATTR,
        my_softmax="",
        my_softmax_jacobian="",
        my_entropy="",
    )
    shortcuts.cells[3].metadata["cellView"] = "form"  # collapsed in Colab
    write = {
        "a_sealed_01_softmax.ipynb": sealed,
        "bob_01_softmax.ipynb": chapter_one(),  # honest, graded beside the attacks
        "shortcut_01_softmax.ipynb": shortcuts,
        # (its my_entropy switches the grader's watch off: see test_a_watch_switched_off...)
        "huge_01_softmax.ipynb": chapter_one(my_softmax=HUGE_SOFTMAX, my_entropy=UNWATCHED_ENTROPY),
        # (its Jacobian is a near-copy of the book's: a passing row, flagged)
        "flood_01_softmax.ipynb": chapter_one(FLOOD % values, my_softmax_jacobian=COPIED_JACOBIAN),
        # 1. files that stopped the whole run
        "deep_01_softmax.ipynb": chapter_one(DEEP),
        "..dots_01_softmax.ipynb": chapter_one(),
        # 3. an impostor: Mallory's folder, Alice's name on the file; Alice's own folder
        "Mallory Smith_111111_assignsubmission_file_/"
        "Alice Jones_222222_assignsubmission_file_01_softmax.ipynb": chapter_one(),
        "Alice Jones_222222_assignsubmission_file_/01_softmax.ipynb": notebook(SETUP),
        "trudy/bob_01_softmax.ipynb": chapter_one(),
    }
    for name, nb in write.items():
        (folder / name).parent.mkdir(exist_ok=True)
        nbformat.write(nb, folder / name)
    # a markdown cell without source, no metadata, no chapter in the name
    (folder / "homework.ipynb").write_text(
        '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, '
        '"cells": [{"cell_type": "markdown", "metadata": {}}]}'
    )
    # a Latin-1 file name, as `unzip` extracts a legacy archive
    latin = os.fsencode(folder) + b"/Jos\xe9_01_softmax.ipynb"
    with open(latin, "wb") as f:
        f.write(nbformat.writes(chapter_one()).encode())


def in_a_session_keyring_with_a_key() -> None:
    """(preexec) The grader runs in a session keyring of its own holding the instructor's
    key, as after pam_keyinit or `keyctl session`."""
    libc = ctypes.CDLL(None, use_errno=True)
    keyctl, add_key = SYSCALLS["keyctl"], SYSCALLS["add_key"]
    libc.syscall(ctypes.c_long(keyctl), ctypes.c_long(1), ctypes.c_void_p(None))
    payload = b"the instructor's own secret"
    libc.syscall(
        ctypes.c_long(add_key),
        b"user",
        INSTRUCTOR_KEY.encode(),
        payload,
        ctypes.c_size_t(len(payload)),
        ctypes.c_long(-3),
    )


class CpuWatch(threading.Thread):
    """Watches the cpu cgroups of this run's sandboxes while the class is graded: their
    quota (the canary measures the effect, which a machine busy with other work can hide;
    this sees the bound itself), and how often the kernel throttled them."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.seen: dict[str, tuple[int, int]] = {}  # cgroup -> (quota, most throttled)
        self.stop = threading.Event()

    def ours(self, cgroup: Path) -> bool:
        for pid in (cgroup / "cgroup.procs").read_text().split():
            status = Path(f"/proc/{pid}/status").read_text()
            uid = int(re.search(r"^Uid:\s+(\d+)", status, re.M).group(1))
            if UID_BASE <= uid < UID_BASE + UID_RANGE:
                return True
        return False

    def run(self) -> None:
        while not self.stop.wait(0.2):
            for cgroup in (ISOLATION.cpu_cgroup or Path("/nonexistent")).glob("grade-*"):
                try:
                    if cgroup.name not in self.seen and not self.ours(cgroup):
                        continue
                    quota = int((cgroup / "cpu.cfs_quota_us").read_text())
                    stat = (cgroup / "cpu.stat").read_text()
                    throttled = int(re.search(r"nr_throttled (\d+)", stat).group(1))
                except (OSError, AttributeError, ValueError):
                    continue
                _, most = self.seen.get(cgroup.name, (quota, 0))
                self.seen[cgroup.name] = (quota, max(most, throttled))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attacks")
    folder = tmp / "class"
    folder.mkdir()
    the_class(folder)
    out = tmp / "class.csv"
    command = [sys.executable, str(ROOT / "scripts" / "grade.py"), str(folder), "--out", str(out)]
    limits = ["--cell-timeout", "20", "--total-timeout", "120", "--memory-mb", "1024"]
    watch = CpuWatch()
    watch.start()
    done = subprocess.run(
        [*command, *limits, "--jobs", "2"],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
        env={**os.environ, "GRADE_UID_BASE": str(UID_BASE)},
        preexec_fn=in_a_session_keyring_with_a_key,
    )
    watch.stop.set()
    watch.join()
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    with out.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    by_student: dict[str, list[dict]] = {}
    for row in rows:
        by_student.setdefault(row["student"], []).append(row)
    return by_student, done.stdout, watch.seen


def statuses(rows: list[dict]) -> dict[str, str]:
    return {r["function"]: r["status"] for r in rows if r["check"]}


def test_honest_students_are_graded_beside_the_attacks(graded):
    by_student, *_ = graded
    for student in ("bob", "dots", "Jos\\xe9"):
        assert set(statuses(by_student[student]).values()) == {"passed"}, student
        assert not [r for r in by_student[student] if r["flags"]], student


def test_the_kernel_keyring_is_closed_and_nothing_is_left_in_it(graded):
    by_student, *_ = graded
    assert statuses(by_student["a_sealed"])["my_softmax_jacobian"] == "passed"
    assert not {uid for uid in key_users() if UID_BASE <= uid < UID_BASE + UID_RANGE}


def test_nothing_is_written_to_the_hosts_disk(graded):
    by_student, *_ = graded
    assert statuses(by_student["a_sealed"])["my_log_softmax_backward"] == "passed"


def test_a_submission_gets_at_most_one_core(graded):
    by_student, _, cgroups = graded
    assert statuses(by_student["a_sealed"])["my_entropy"] == "passed"
    assert cgroups, "no cpu cgroup of this run's sandboxes was seen"
    one_core = CPU_CORES * CFS_PERIOD_US
    assert CPU_CORES == 1 and {quota for quota, _ in cgroups.values()} == {one_core}
    # (how often the attacker was throttled depends on what else the machine runs: at a
    # load of 20 its 64 processes got less than a core and were never throttled)


def test_words_the_submission_chose_are_marked_as_its_own(graded):
    by_student, *_ = graded
    (row,) = [r for r in by_student["a_sealed"] if r["function"] == "my_softmax"]
    assert row["status"] == "failed"
    assert row["message"] == (
        "my_softmax raised KeyboardInterrupt, which stops a self-check (its message, written "
        f"by the submission: {FORGED!r})"
    )
    errors = [r["message"] for rows in by_student.values() for r in rows if r["status"] == "error"]
    assert not [m for m in errors if "regrade by hand" in m]


def test_a_huge_answer_is_stopped_by_the_time_limit_and_the_rest_graded(graded):
    by_student, *_ = graded
    rows = {r["function"]: r for r in by_student["huge"] if r["check"]}
    huge = rows.pop("my_softmax")
    rows.pop("my_entropy")  # (the watch switched off)
    if huge["status"] != "failed":  # (failed: the check formats only what it shows)
        assert huge["message"].startswith(
            "time limit: check_softmax_temperature did not finish with my_softmax within 20 s"
        ), huge
    assert {r["status"] for r in rows.values()} == {"passed"}


def test_a_flood_of_the_graders_own_outputs_does_not_bring_its_worker_down(graded):
    by_student, *_ = graded
    assert set(statuses(by_student["flood"]).values()) == {"passed"}


def test_no_file_costs_the_class_its_csv(graded):
    by_student, printed, _ = graded
    deep = by_student["deep"]
    assert set(statuses(deep).values()) == {"passed"}
    (note,) = [r for r in deep if r["exercise"] == grade.NOTEBOOK_ROW]
    assert note["message"] == (
        "cell 2 ('x = 1') was not run: its code is nested too deeply to compile"
    )
    (row,) = by_student["homework"]
    assert row["exercise"] == grade.NOTEBOOK_ROW and row["status"] == "error"
    assert row["message"].startswith("cannot tell which chapter this is")
    assert by_student["Jos\\xe9"][0]["notebook"] == "Jos\\xe9_01_softmax.ipynb"
    assert by_student["dots"][0]["notebook"] == "..dots_01_softmax.ipynb"
    for name in ("Jos\\xe9_01_softmax.ipynb", "..dots_01_softmax.ipynb", "homework.ipynb"):
        assert name in printed


def test_the_folder_names_the_student_and_an_impostor_is_flagged(graded):
    by_student, printed, _ = graded
    mallory = by_student["Mallory Smith"]
    assert set(statuses(mallory).values()) == {"passed"}
    assert {r["flags"] for r in mallory} == {"the file's name names Alice Jones"}
    alice = by_student["Alice Jones"]
    assert set(statuses(alice).values()) == {"not attempted"}
    assert {r["flags"] for r in alice} == {""}  # not a duplicate of Mallory's
    trudy = by_student["trudy"]
    assert {r["flags"] for r in trudy} == {"the file's name names bob"}
    assert "trudy/bob_01_softmax.ipynb: graded as trudy" in printed


def test_the_books_own_code_is_flagged_however_it_is_reached(graded):
    """An IPython hook answering the grader from helpers.softmax, getattr with "help" + "ers",
    base64 run only on a host called "grading": each passed, unflagged, before the kernel
    watched for the book's code."""
    by_student, *_ = graded
    rows = {r["function"]: r for r in by_student["shortcut"] if r["check"]}
    shortcuts = {
        "my_softmax": "helpers.softmax.softmax",  # the hook
        "my_entropy": "helpers.softmax.entropy",  # getattr
        "my_softmax_jacobian": "helpers.softmax.softmax_jacobian",  # the form cell
    }
    for function, helper in shortcuts.items():
        row = rows[function]
        assert row["status"] != "passed", row
        assert f"calls the book's own {helper}" in row["flags"].split("; "), row
    for function in ("my_entropy", "my_softmax_jacobian"):
        assert rows[function]["status"] == "not attempted", rows[function]
        assert f"calls {shortcuts[function]}" in rows[function]["message"]
    hook = rows["my_softmax"]  # its answers came twice: the hook's, then the grader's cell's
    assert hook["status"] == "error" and "answers came back to one request" in hook["message"]
    honest = rows["my_log_softmax_backward"]
    assert honest["status"] == "passed" and not honest["flags"], honest


def test_a_watch_switched_off_by_the_function_is_noticed_and_the_row_does_not_pass(graded):
    """The function switches the kernel's watch off, then calls helpers.entropy unseen."""
    by_student, *_ = graded
    (row,) = [r for r in by_student["huge"] if r["function"] == "my_entropy" and r["check"]]
    assert row["status"] == "error", row
    assert row["message"] == (
        "the notebook's code switched off the grader's watch for calls of the book's own "
        "code while my_entropy ran: read its code"
    )
    assert (
        row["flags"] == "the grader's watch for the book's own code was switched off in the kernel"
    )


def test_a_near_copy_of_the_books_code_passes_and_is_flagged(graded):
    by_student, *_ = graded
    rows = {r["function"]: r for r in by_student["flood"] if r["check"]}
    copied = rows.pop("my_softmax_jacobian")
    assert copied["status"] == "passed"
    assert re.fullmatch(
        r"near-copy of helpers\.softmax\.softmax_jacobian: my_softmax_jacobian has \d+% of "
        r"its code",
        copied["flags"],
    ), copied
    assert {r["flags"] for r in rows.values()} == {""}


def test_without_helpers_installed_the_command_refuses_and_says_how_to_install(tmp_path):
    """helpers found only through PYTHONPATH (which the sandbox clears): right answers that
    call helpers.softmax failed with NameError; now nothing is graded."""
    copy = tmp_path / "path"
    shutil.copytree(ROOT / "helpers", copy / "helpers", ignore=shutil.ignore_patterns("__py*"))
    folder = tmp_path / "class"
    folder.mkdir()
    nbformat.write(chapter_one(), folder / "alice_01_softmax.ipynb")
    out = tmp_path / "out.csv"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "grade.py"), str(folder), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(copy)},
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the sealed kernel cannot use this grader's helpers" in done.stderr
    assert "make book" in done.stderr and "pip install -e" in done.stderr
    assert not out.exists()

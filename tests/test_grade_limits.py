"""The grader's limits that need no kernel: the seccomp filter's program (scripts/
grade_seccomp.py, run by a model of the kernel's BPF interpreter), the watchdog that stops
a check overrunning its time in the grader's own process, and what a file name or a
notebook can do to the parent (tests/test_grade_attacks.py replays them on the command)."""

from __future__ import annotations

import errno
import re
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import grade
import grade_seccomp
import grade_wire
from grade_seccomp import AUDIT_ARCH, DENIED, RET_ALLOW, RET_ERRNO, program, run

ALLOW, EPERM, ENOSYS = RET_ALLOW, RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS
HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/include/asm-generic/unistd.h"),
}


@pytest.mark.parametrize("machine", sorted(DENIED))
def test_the_filter_denies_exactly_its_list(machine):
    insns = program(machine)
    arch = AUDIT_ARCH[machine]
    denied = set(DENIED[machine].values())
    clone, clone3 = grade_seccomp.CLONE[machine], grade_seccomp.CLONE3[machine]
    for number in range(460):
        expected = EPERM if number in denied else ENOSYS if number == clone3 else ALLOW
        assert run(insns, number, arch) == expected, number
    assert run(insns, DENIED[machine]["add_key"], arch) == EPERM
    assert run(insns, DENIED[machine]["keyctl"], arch) == EPERM
    # clone: a fork or a thread is allowed, a new namespace is not
    assert run(insns, clone, arch, arg0=0x01200011) == ALLOW  # fork's flags
    assert run(insns, clone, arch, arg0=0x003D0F00) == ALLOW  # a thread's
    for flag in (0x10000000, 0x20000000, 0x40000000, 0x00020000, 0x08000000, 0x00000080):
        assert run(insns, clone, arch, arg0=0x01200011 | flag) == EPERM, hex(flag)
    # another architecture's numbers (32-bit calls on x86-64) are refused
    assert run(insns, 0, 0x40000003) == EPERM
    if machine == "x86_64":
        assert run(insns, 0x40000000 | 0, arch) == EPERM  # x32's read


@pytest.mark.parametrize("machine", sorted(DENIED))
def test_the_numbers_are_the_kernels(machine):
    header = HEADERS[machine]
    if not header.exists() or (machine == "aarch64") != header.name.startswith("unistd.h"):
        pytest.skip(f"{header} is not on this machine")
    defined = dict(re.findall(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", header.read_text()))
    for name, number in DENIED[machine].items():
        if name in defined:
            assert int(defined[name]) == number, name
    assert int(defined["clone"]) == grade_seccomp.CLONE[machine]


def test_the_compiled_filter_is_what_bwrap_reads():
    data = grade_seccomp.compile_filter("x86_64")
    assert len(data) == 8 * len(program("x86_64"))
    with pytest.raises(ValueError, match="no seccomp filter for the sparc"):
        program("sparc")


class FakeRemote:
    in_call = False
    overdue = ""


def test_the_watchdog_stops_a_check_that_overruns_in_the_graders_process():
    remote = FakeRemote()
    start = time.monotonic()
    with pytest.raises(grade_wire.GradingAborted, match="time limit: check_x"):
        with grade._watchdog(remote, 0.3, "time limit: check_x did not finish"):
            while time.monotonic() < start + 30:  # formatting a huge answer, say
                pass
    assert time.monotonic() - start < 10
    # during a call to the kernel (which has its own limit) it only leaves a note
    remote = FakeRemote()
    remote.in_call = True
    with grade._watchdog(remote, 0.1, "late"):
        time.sleep(0.4)
    assert remote.overdue == "late"


def test_the_size_of_a_message_counts_every_string():
    content = {"ename": "E", "evalue": "y" * 1000, "traceback": ["z" * 500, {"a": "b" * 10}]}
    assert grade._size(content) >= 1510
    deep: object = "x" * 10
    for _ in range(100_000):  # nested deeper than any recursion limit
        deep = [deep]
    assert grade._size(deep) == 10


def test_names_that_are_not_utf8_are_escaped_everywhere(tmp_path):
    name = "Jos\udce9_01_softmax.ipynb"  # a Latin-1 byte, as Python reads it from the disk
    assert grade.shown(name) == "Jos\\xe9_01_softmax.ipynb"
    assert grade.text("a\udce9") == "a\\udce9"
    out = tmp_path / "out.csv"
    grade.write_csv([{"student": "Jos\udce9", "notebook": name}], out)
    assert "Jos\\udce9" in out.read_text(encoding="utf-8")


def test_a_cell_nested_too_deeply_is_found_without_running_it():
    assert grade._too_deep("y = x" + ".a" * 3000)
    assert grade._too_deep("y = 1" + " + 1" * 3000)
    assert not grade._too_deep("%pip install nothing")
    assert not grade._too_deep("y = x.a.a")
    nb = {"cells": [{"cell_type": "code", "source": "y = x" + ".a" * 3000}]}
    assert grade.defined_functions(nb) == {}  # no RecursionError in the parent


@pytest.mark.parametrize(
    "nb",
    [
        {"cells": [{"cell_type": "markdown", "metadata": {}}]},
        {"cells": [{"cell_type": "markdown", "source": None}]},
        {"cells": "not a list"},
        {"metadata": "not a dict"},
        [],
    ],
)
def test_a_malformed_notebook_names_no_chapter_and_raises_nothing(nb):
    assert grade.first_heading(nb) == ""
    assert grade.identify_chapter(nb, Path("homework.ipynb"), ["01_softmax"], {}) is None


def test_make_help_lists_every_target_with_one_line():
    import subprocess

    makefile = (ROOT / "Makefile").read_text()
    targets = set()
    for line in makefile.splitlines():
        match = re.match(r"^([a-z][a-z -]*):(?!=)", line)
        if match:
            targets.update(match.group(1).split())
    phony = set(re.search(r"^\.PHONY:(.*)$", makefile, re.M).group(1).split())
    assert targets == phony, targets ^ phony
    shown = subprocess.run(
        ["make", "--no-print-directory", "-s", "help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    listed = [line.split()[1] for line in shown]
    assert sorted(listed) == sorted(targets)  # each once
    assert all(len(line.split(maxsplit=2)) == 3 for line in shown)  # and what it does

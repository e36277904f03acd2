"""The seccomp filter of a sealed kernel (scripts/grade_sandbox.py gives it to bubblewrap).

A classic BPF program, written here with ``struct`` (no library): it denies the system
calls a notebook never needs and that reach beyond its sandbox, and allows every other.
Above all the kernel keyring (``add_key``, ``request_key``, ``keyctl``): keys are shared
by user id and by session, outside every namespace bubblewrap makes, so without this one
submission could leave a key (in its uid's persistent keyring, readable by all) that a
later one finds in ``/proc/keys``, or read the instructor's own session keys. The others:
namespaces and mounts (``unshare``, ``setns``, ``mount``, ``clone`` with a namespace flag;
``clone3``, whose flags a filter cannot read, answers ENOSYS so the C library falls back
to ``clone``), tracing and reading other processes (``ptrace``, ``process_vm_readv``,
``kcmp``), kernel interfaces (``bpf``, ``perf_event_open``, ``userfaultfd``,
``io_uring_*``, modules, ``kexec``), file handles (``open_by_handle_at``), the clock, the
host name, swap, ``reboot``, ``acct``, ``syslog``.

Denied calls fail with EPERM (the process goes on, as a program that lacks a privilege
would). A call of another architecture (the 32-bit ABIs of x86-64) is denied too, so the
numbers above cannot be reached by their 32-bit aliases.
"""

from __future__ import annotations

import errno
import platform
import struct

# Syscall numbers, from the kernel's unistd_64.h (x86-64) and asm-generic/unistd.h (arm64).
DENIED = {
    "x86_64": {
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "kcmp": 312,
        "bpf": 321,
        "perf_event_open": 298,
        "userfaultfd": 323,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "unshare": 272,
        "setns": 308,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "open_by_handle_at": 304,
        "name_to_handle_at": 303,
        "fanotify_init": 300,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "reboot": 169,
        "swapon": 167,
        "swapoff": 168,
        "acct": 163,
        "quotactl": 179,
        "syslog": 103,
        "vhangup": 153,
        "lookup_dcookie": 212,
        "settimeofday": 164,
        "clock_settime": 227,
        "clock_adjtime": 305,
        "adjtimex": 159,
        "sethostname": 170,
        "setdomainname": 171,
        "iopl": 172,
        "ioperm": 173,
    },
    "aarch64": {
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "kcmp": 272,
        "bpf": 280,
        "perf_event_open": 241,
        "userfaultfd": 282,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "unshare": 97,
        "setns": 268,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "open_by_handle_at": 265,
        "name_to_handle_at": 264,
        "fanotify_init": 262,
        "init_module": 105,
        "finit_module": 273,
        "delete_module": 106,
        "kexec_load": 104,
        "kexec_file_load": 294,
        "reboot": 142,
        "swapon": 224,
        "swapoff": 225,
        "acct": 89,
        "quotactl": 60,
        "syslog": 116,
        "vhangup": 58,
        "lookup_dcookie": 18,
        "settimeofday": 170,
        "clock_settime": 112,
        "clock_adjtime": 266,
        "adjtimex": 171,
        "sethostname": 161,
        "setdomainname": 162,
    },
}
CLONE = {"x86_64": 56, "aarch64": 220}
CLONE3 = {"x86_64": 435, "aarch64": 435}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000  # x86-64's x32 ABI: the same calls under other numbers
# clone flags that make a namespace (CLONE_NEWNS ... CLONE_NEWNET, CLONE_NEWTIME)
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
CLONE_NAMESPACES |= 0x20000000 | 0x40000000 | 0x00000080

# Classic BPF
LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
RET_K = 0x06  # BPF_RET | BPF_K
RET_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
RET_ERRNO = 0x00050000  # SECCOMP_RET_ERRNO | errno
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
NR, ARCH, ARG0_LOW = 0, 4, 16  # (args[0]'s low half: both architectures are little-endian)


def _insn(code: int, k: int = 0, jt: int = 0, jf: int = 0) -> tuple[int, int, int, int]:
    return (code, jt, jf, k)


def program(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter's instructions (code, jt, jf, k) for ``machine`` (this one by default)."""
    machine = machine or platform.machine()
    if machine not in DENIED:
        raise ValueError(f"no seccomp filter for the {machine} architecture")
    denied = sorted(DENIED[machine].values())
    deny = _insn(RET_K, RET_ERRNO | errno.EPERM)
    enosys = _insn(RET_K, RET_ERRNO | errno.ENOSYS)
    allow = _insn(RET_K, RET_ALLOW)
    # The body, then its three returns: [..., allow, deny, enosys]. Jumps are relative to
    # the next instruction, so each is computed from the body's length at that point.
    body: list[tuple] = [_insn(LD_W_ABS, ARCH)]
    pending: list[tuple[int, str]] = []  # (index of a jump, where it goes when true)

    def jump(code: int, k: int, target: str, *, when_true: bool = True) -> None:
        pending.append((len(body), target if when_true else "!" + target))
        body.append((code, k))

    jump(JEQ_K, AUDIT_ARCH[machine], "deny", when_true=False)
    body.append(_insn(LD_W_ABS, NR))
    if machine == "x86_64":
        jump(JGE_K, X32_SYSCALL_BIT, "deny")
    for number in denied:
        jump(JEQ_K, number, "deny")
    jump(JEQ_K, CLONE3[machine], "enosys")
    # clone with a namespace flag: load args[0] only after the number is known to be clone
    jump(JEQ_K, CLONE[machine], "allow", when_true=False)
    body.append(_insn(LD_W_ABS, ARG0_LOW))
    jump(JSET_K, CLONE_NAMESPACES, "deny")
    ends = {"allow": len(body), "deny": len(body) + 1, "enosys": len(body) + 2}
    out = []
    for k, item in enumerate(body):
        if len(item) == 4:
            out.append(item)
            continue
        code, value = item
        target = dict(pending)[k]
        negate = target.startswith("!")
        offset = ends[target.lstrip("!")] - (k + 1)
        if not 0 <= offset <= 255:
            raise ValueError("a jump too far for classic BPF")
        out.append((code, 0, offset, value) if negate else (code, offset, 0, value))
    return [*out, allow, deny, enosys]


def compile_filter(machine: str | None = None) -> bytes:
    """The filter as bubblewrap's ``--seccomp FD`` reads it: an array of sock_filter."""
    return b"".join(struct.pack("<HBBI", *insn) for insn in program(machine))


def run(insns: list[tuple[int, int, int, int]], nr: int, arch: int, arg0: int = 0) -> int:
    """Interpret the filter for one call (the tests' model of what the kernel does)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == LD_W_ABS:
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == RET_K:
            return k
        elif code in (JEQ_K, JGE_K, JSET_K):
            taken = {JEQ_K: acc == k, JGE_K: acc >= k, JSET_K: bool(acc & k)}[code]
            pc += jt if taken else jf
        else:
            raise ValueError(f"unknown instruction {code:#x}")
        pc += 1

"""The sealed kernel of one submission (scripts/grade.py; see book/instructors.md).

Each submission's kernel runs under bubblewrap as a numeric user id of its own (no
account, no home), with new pid, network, IPC and UTS namespaces, in an empty
size-limited tmpfs with its notebook copied in. It sees read-only: the system (/usr,
/etc), the Python it runs on and the project's virtual environment, and the package
``helpers`` with ``helpers/checks`` replaced by a stub (the checks hold reference
answers; the grader runs them in its own process). It does not see the repository, the
submissions, the solutions or the grader's files. Its processes share one memory cgroup
(cgroup v1 ``memory``), one ``pids`` cgroup and one ``cpu`` cgroup, so the memory limit
covers all of them together, a fork bomb stops at the limit, and together they get at
most CPU_CORES cores, however many processes they start (so that a time limit means the
same beside any neighbour); the kernel is pid 1 of its pid namespace, so when it ends (or
is killed) every process it started is killed by the kernel, however it detached. Its
ZeroMQ sockets are Unix sockets in a directory that is handed to root, with the
connection file, as soon as the kernel is up, so that the submission can neither replace
them nor write there (that directory is on the host's disk, outside its tmpfs).

It has a session keyring of its own, empty, and a seccomp filter (scripts/grade_seccomp.py)
denies it the kernel keyring (``add_key``, ``keyctl``, ``request_key``: keys live outside
every namespace, so one submission could leave a key that a later one reads, or read the
instructor's) and the other system calls that reach beyond the sandbox. When it ends,
any key left under its user id is removed.

``Isolation.detect()`` says whether this machine can do all that (root, bwrap, setpriv,
the three cgroup controllers, a seccomp filter for its architecture); the grader refuses
to run without it unless asked to. ``sealed_python_problem()`` checks, before grading,
that a sealed Python imports the grader's own ``helpers``.
"""

from __future__ import annotations

import json
import os
import platform
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import grade_seccomp

CGROUP_ROOT = Path("/sys/fs/cgroup")
REPOSITORY = Path(__file__).resolve().parent.parent
# Sandbox users: UID_BASE + a random offset below UID_RANGE, never one in /etc/passwd. The
# tests give a run a range of its own (GRADE_UID_BASE) to tell its processes from others'.
UID_BASE = int(os.environ.get("GRADE_UID_BASE", "3100000"))
UID_RANGE = 1_000_000
MAX_PROCESSES = 256  # processes and threads of one submission together
CPU_CORES = 1  # the CPU time all of a submission's processes together get, in cores
CFS_PERIOD_US = 100_000
WORK = "/tmp/submission"  # the kernel's working directory inside the sandbox
# What the submission may write: its tmpfs (also charged to its memory cgroup).
TMPFS_MB = 512
STUB = '''"""Not available while grading: the grader runs the self-checks in its own process."""


def __getattr__(name):
    raise AttributeError(
        f"helpers.checks.{name} is not available while grading: the grader runs the "
        "self-checks itself, outside this notebook"
    )
'''
SECCOMP_FD = "{seccomp-fd}"  # in bwrap's arguments: the launcher puts the filter's fd there
LAUNCHER = """\
import ctypes, json, os, resource, sys
cfg = json.loads(sys.argv[1])
for procs in cfg["cgroups"]:
    with open(procs, "w") as f:
        f.write(str(os.getpid()))
for name, value in cfg["rlimits"].items():
    resource.setrlimit(getattr(resource, name), (value, value))
# A session keyring of its own, new and empty (KEYCTL_JOIN_SESSION_KEYRING, no name):
# the grader's session keys are not the kernel's to see.
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(ctypes.c_long(cfg["keyctl"]), ctypes.c_long(1), ctypes.c_void_p(None)) < 0:
    sys.exit("cannot join a new session keyring: " + os.strerror(ctypes.get_errno()))
fd = os.open(cfg["seccomp"], os.O_RDONLY)  # bwrap reads the filter from this fd
os.set_inheritable(fd, True)
args = [str(fd) if a == cfg["fd"] else a for a in sys.argv[2:]]
os.execv(args[0], args)
"""


@dataclass(frozen=True)
class Isolation:
    """What this machine offers; ``missing`` is "" when a submission can be sealed."""

    missing: str
    memory_cgroup: Path | None = None
    pids_cgroup: Path | None = None
    cpu_cgroup: Path | None = None

    @property
    def available(self) -> bool:
        return not self.missing

    @staticmethod
    def detect() -> Isolation:
        problems = []
        if os.geteuid() != 0:
            problems.append("the grader is not running as root (it needs to switch user ids)")
        for tool in ("bwrap", "setpriv"):
            if shutil.which(tool) is None:
                package = "bubblewrap" if tool == "bwrap" else "util-linux"
                problems.append(f"{tool} is not installed (Debian package {package})")
        found = {name: _own_cgroup(name) for name in ("memory", "pids", "cpu")}
        for name, cgroup in found.items():
            if cgroup is None:
                problems.append(f"no writable cgroup v1 {name} controller at /sys/fs/cgroup/{name}")
        if platform.machine() not in grade_seccomp.DENIED:
            problems.append(f"no seccomp filter for the {platform.machine()} architecture")
        return Isolation("; ".join(problems), found["memory"], found["pids"], found["cpu"])

    @property
    def cgroups(self) -> list[Path]:
        return [c for c in (self.memory_cgroup, self.pids_cgroup, self.cpu_cgroup) if c]


def _own_cgroup(controller: str) -> Path | None:
    """This process's cgroup of a v1 controller, if we can create children in it."""
    mount = CGROUP_ROOT / controller
    if not (mount / "cgroup.procs").exists():
        return None
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                own = mount / path.lstrip("/")
                break
        else:
            return None
        probe = own / f"grade-probe-{secrets.token_hex(4)}"
        probe.mkdir()
        probe.rmdir()
        return own
    except OSError:
        return None


def _free_uid() -> int:
    """A user id with no account and no process."""
    for _ in range(100):
        uid = UID_BASE + secrets.randbelow(UID_RANGE)
        try:
            pwd.getpwuid(uid)
            continue
        except KeyError:
            pass
        if not _processes_of(uid):
            return uid
    raise RuntimeError("no free user id for the sandbox")


def _processes_of(uid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


class Sandbox:
    """The sealed place of one submission's kernel (a context manager)."""

    def __init__(self, notebook: Path, isolation: Isolation, memory_mb: int) -> None:
        self.notebook = notebook
        self.isolation = isolation
        self.memory_mb = memory_mb
        self.uid = _free_uid()
        self.kernel_pid: int | None = None
        self.launcher_pid: int | None = None
        self.cgroups: list[Path] = []

    # -- set-up ----------------------------------------------------------------------

    def __enter__(self) -> Sandbox:
        self.root = Path(tempfile.mkdtemp(prefix="grade-sandbox-"))
        os.chmod(self.root, 0o755)
        self.sockets = self.root / "sock"  # the kernel's Unix sockets and connection file
        self.requests = self.root / "in"  # what the grader sends to the kernel (read-only)
        self.stub = self.root / "stub"
        for d in (self.sockets, self.requests, self.stub):
            d.mkdir(mode=0o755)
        os.chown(self.sockets, self.uid, self.uid)
        os.chmod(self.sockets, 0o700)
        (self.stub / "__init__.py").write_text(STUB)
        self.copy = self.root / "notebook" / "submission.ipynb"
        self.copy.parent.mkdir(mode=0o755)
        shutil.copyfile(self.notebook, self.copy)
        os.chmod(self.copy, 0o644)
        self.seccomp = self.root / "seccomp.bpf"  # not under a folder the sandbox sees
        self.seccomp.write_bytes(grade_seccomp.compile_filter())
        os.chmod(self.seccomp, 0o600)
        tag = f"grade-{os.getpid()}-{secrets.token_hex(4)}"
        memory = self.isolation.memory_cgroup / tag
        pids = self.isolation.pids_cgroup / tag
        cpu = self.isolation.cpu_cgroup / tag
        for cg in (memory, pids, cpu):
            cg.mkdir()
            self.cgroups.append(cg)
        (cpu / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
        (cpu / "cpu.cfs_quota_us").write_text(str(CPU_CORES * CFS_PERIOD_US))
        limit = str(self.memory_mb * 2**20)
        (memory / "memory.limit_in_bytes").write_text(limit)
        memsw = memory / "memory.memsw.limit_in_bytes"
        if memsw.exists():  # swap accounting: the limit covers swap too
            memsw.write_text(limit)
        (pids / "pids.max").write_text(str(MAX_PROCESSES))
        return self

    def command(self, kernel_cmd: list[str]) -> list[str]:
        """The kernel's command line, sealed: launcher (cgroups, rlimits), bwrap, setpriv."""
        os.chown(self.connection_file, self.uid, self.uid)
        config = {
            "keyctl": grade_seccomp.DENIED[platform.machine()]["keyctl"],
            "seccomp": str(self.seccomp),
            "fd": SECCOMP_FD,
            "cgroups": [str(cg / "cgroup.procs") for cg in self.cgroups],
            "rlimits": {
                "RLIMIT_AS": self.memory_mb * 2**20,
                "RLIMIT_NPROC": MAX_PROCESSES,
                "RLIMIT_FSIZE": TMPFS_MB * 2**20,
                "RLIMIT_CORE": 0,
            },
        }
        venv = Path(sys.prefix)
        base = Path(sys.base_prefix).resolve()
        package = _helpers_package()
        bwrap = [
            shutil.which("bwrap") or "bwrap",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--hostname",
            "grading",
            "--die-with-parent",
            "--new-session",
            "--as-pid-1",
            "--cap-add",
            "CAP_SETUID",
            "--cap-add",
            "CAP_SETGID",
            "--seccomp",
            SECCOMP_FD,
        ]
        for top in ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            path = Path("/") / top
            if path.is_symlink():
                bwrap += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                bwrap += ["--ro-bind", str(path), str(path)]
        bwrap += ["--proc", "/proc", "--dev", "/dev"]
        bwrap += ["--size", str(TMPFS_MB * 2**20), "--perms", "1777", "--tmpfs", "/tmp"]
        bwrap += ["--perms", "0777", "--dir", WORK]
        made: set[Path] = {Path("/"), Path("/tmp")}
        for source in (base, venv, package):
            if source.parts[1:2] in (("usr",), ("etc",)):
                continue  # bound above
            bwrap += [*_parents(source, made), "--ro-bind", str(source), str(source)]
        checks = package / "checks"
        bwrap += ["--tmpfs", str(checks)]
        bwrap += ["--ro-bind", str(self.stub / "__init__.py"), str(checks / "__init__.py")]
        bwrap += ["--remount-ro", str(checks)]
        for source, writable in ((self.sockets, True), (self.requests, False)):
            bwrap += _parents(source, made)
            bwrap += ["--bind" if writable else "--ro-bind", str(source), str(source)]
        bwrap += ["--ro-bind", str(self.copy), f"{WORK}/{self.notebook.name}"]
        env = {
            "HOME": WORK,
            "TMPDIR": "/tmp",
            "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "MPLCONFIGDIR": f"{WORK}/.matplotlib",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
            # one thread for the submission's linear algebra: with --jobs N the N kernels
            # share the cores instead of fighting over them (OpenBLAS threads wait by
            # spinning), and a cell's time limit means the same on any number of cores
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        bwrap += ["--chdir", WORK, "--clearenv"]
        for key, value in env.items():
            bwrap += ["--setenv", key, value]
        setpriv = [
            shutil.which("setpriv") or "setpriv",
            f"--reuid={self.uid}",
            f"--regid={self.uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]
        return [
            sys.executable,
            "-I",
            "-S",
            "-c",
            LAUNCHER,
            json.dumps(config),
            *bwrap,
            "--",
            *setpriv,
            *kernel_cmd,
        ]

    def kernel_manager(self):
        """A jupyter_client kernel manager whose kernel runs in this sandbox (ipc transport)."""
        from jupyter_client.manager import AsyncKernelManager

        sandbox = self

        class SealedKernelManager(AsyncKernelManager):
            def format_kernel_cmd(self, extra_arguments=None):
                return sandbox.command(super().format_kernel_cmd(extra_arguments))

            async def _async_signal_kernel(self, signum):
                sandbox.signal(signum)

            async def _async_post_start_kernel(self, **kw):
                # Connect once the kernel has bound its five sockets: connecting earlier
                # makes the client wait seconds for ZeroMQ to retry.
                import asyncio

                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and self.provisioner.process.poll() is None:
                    names = {p.name for p in sandbox.sockets.iterdir() if p.is_socket()}
                    if len(names) >= 5:
                        break
                    await asyncio.sleep(0.02)
                await super()._async_post_start_kernel(**kw)

        self.connection_file = str(self.sockets / "kernel.json")
        return SealedKernelManager(
            kernel_name="python3",
            transport="ipc",
            ip=str(self.sockets / "k"),
            connection_file=self.connection_file,
        )

    def seal(self, km) -> None:
        """Once the kernel is up, before any of the submission's code runs: hand the socket
        directory to root (the submission can no longer replace a socket) and note the
        kernel's process id (pid 1 of the sandbox's namespace)."""
        os.chown(self.sockets, 0, 0)
        os.chmod(self.sockets, 0o755)
        os.chown(self.connection_file, 0, 0)  # read at start-up only: no longer its to write
        os.chmod(self.connection_file, 0o644)
        process = getattr(km.provisioner, "process", None)
        self.launcher_pid = process.pid if process is not None else None
        if self.launcher_pid is not None:
            import psutil

            children = psutil.Process(self.launcher_pid).children()
            self.kernel_pid = children[0].pid if children else None

    def signal(self, signum: int) -> None:
        for pid in (self.kernel_pid,):
            if pid is not None:
                try:
                    os.kill(pid, signum)
                except ProcessLookupError:
                    pass

    def request_file(self, name: str, text: str) -> str:
        """Write a request for the kernel (readable, not writable, by it); return its path."""
        path = self.requests / name
        path.write_text(text)
        os.chmod(path, 0o644)
        return str(path)

    # -- tear-down -------------------------------------------------------------------

    def kill_all(self) -> list[int]:
        """Kill every process of the sandbox; return the ids of those that were alive."""
        killed: list[int] = []
        for pid in (self.kernel_pid, self.launcher_pid):
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        while True:
            alive = set(_cgroup_pids(self.cgroups)) | set(_processes_of(self.uid))
            if not alive:
                return killed
            if time.monotonic() > deadline:
                raise RuntimeError(f"processes of the sandbox survived SIGKILL: {sorted(alive)}")
            for pid in alive:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    def __exit__(self, *exc) -> None:
        try:
            self.kill_all()
            remove_keys(self.uid)
        finally:
            for cg in self.cgroups:
                for _ in range(50):
                    try:
                        cg.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.1)
            shutil.rmtree(self.root, ignore_errors=True)


# Run as the sandbox's user id: clear and invalidate its user and user-session keyrings
# (kept in the kernel's register of user keyrings) with whatever they hold.
CLEAR_KEYS = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
number = int(sys.argv[1])
def keyctl(*args):
    return libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
# KEYCTL_GET_KEYRING_ID of the user and user-session keyrings, both looked up first (a
# lookup makes whichever is missing). (Not the persistent keyring: asking for it makes
# one, and the filter stops a submission from asking.)
rings = [keyctl(0, -4, 0), keyctl(0, -5, 0)]
for ring in rings:
    if ring > 0:
        keyctl(7, ring)  # KEYCTL_CLEAR
        keyctl(21, ring)  # KEYCTL_INVALIDATE
"""


def key_users() -> set[int]:
    """The user ids that own keys now (/proc/key-users)."""
    try:
        lines = Path("/proc/key-users").read_text().splitlines()
    except OSError:
        return set()
    return {int(line.split(":")[0]) for line in lines if line.split(":")[0].strip().isdigit()}


def remove_keys(uid: int) -> bool:
    """Remove what the kernel keyring holds for ``uid``; return whether nothing is left.
    The seccomp filter stops a submission from making keys; this is the second line."""
    if uid not in key_users():
        return True
    number = grade_seccomp.DENIED.get(platform.machine(), {}).get("keyctl")
    if number is not None:
        setpriv = shutil.which("setpriv") or "setpriv"
        as_uid = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
        subprocess.run(
            [*as_uid, sys.executable, "-I", "-S", "-c", CLEAR_KEYS, str(number)],
            capture_output=True,
            timeout=60,
            check=False,
        )
    for _ in range(50):  # the kernel frees invalidated keys in the background
        if uid not in key_users():
            return True
        time.sleep(0.1)
    return False


def sealed_python_problem(isolation: Isolation, timeout: float = 120) -> str:
    """ "" when a sealed Python imports the grader's own ``helpers`` (and the kernel's
    packages), else what is wrong and how to fix it. The sandbox clears the environment,
    so a ``helpers`` found only through PYTHONPATH is not the kernel's."""
    expected = str(_helpers_package() / "__init__.py")
    # Found, not imported (importing helpers takes seconds): where the kernel's would be.
    probe = (
        "import importlib.util as u, pathlib; "
        "assert u.find_spec('ipykernel') and u.find_spec('numpy'), 'no ipykernel or numpy'; "
        "s = u.find_spec('helpers'); "
        "print(pathlib.Path(s.origin).resolve() if s else 'no module named helpers')"
    )
    with tempfile.TemporaryDirectory(prefix="grade-probe-") as tmp:
        notebook = Path(tmp) / "probe.ipynb"
        notebook.write_text("{}")
        with Sandbox(notebook, isolation, 1024) as box:
            box.connection_file = str(box.sockets / "kernel.json")
            Path(box.connection_file).write_text("{}")
            try:
                done = subprocess.run(
                    box.command([sys.executable, "-c", probe]),
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                )
            except subprocess.TimeoutExpired:
                return f"a sealed Python did not start within {timeout:g} s"
    found = done.stdout.strip()
    if done.returncode == 0 and found == expected:
        return ""
    error = [line for line in done.stderr.splitlines() if line.strip()][-1:]
    if error:
        why = error[0]
    elif found.startswith("no module"):
        why = "it finds no module named helpers"
    else:
        why = f"it finds {found}, not {expected}"
    return (
        f"the sealed kernel cannot use this grader's helpers ({why}). The sandbox clears the "
        f"environment (PYTHONPATH too), so helpers must be installed in the Python that "
        f"runs the grader, {sys.executable}: run `make book` in {REPOSITORY} (it installs "
        f"helpers into its .venv), or `{sys.executable} -m pip install -e {REPOSITORY}`"
    )


def _helpers_package() -> Path:
    """The folder of the grader's own ``helpers`` (found, not imported: that takes seconds)."""
    import importlib.util

    spec = importlib.util.find_spec("helpers")
    if spec is None or spec.origin is None:
        raise RuntimeError("the grader cannot find the helpers package")
    return Path(spec.origin).resolve().parent


def _cgroup_pids(cgroups: list[Path]) -> list[int]:
    pids: list[int] = []
    for cg in cgroups:
        try:
            pids += [int(p) for p in (cg / "cgroup.procs").read_text().split()]
        except OSError:
            pass
    return pids


def _parents(path: Path, made: set[Path]) -> list[str]:
    """bwrap arguments creating the parents of ``path`` (mode 0755) that are not made yet."""
    args: list[str] = []
    for parent in reversed(path.parents):
        if parent not in made:
            made.add(parent)
            args += ["--perms", "0755", "--dir", str(parent)]
    return args

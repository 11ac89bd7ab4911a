"""The fork server: one per slot, started by the pool with a clean environment.

It imports the heavy libraries once, sets up every isolation layer the host allows, then forks
a *zygote* before it reads any request. For each request the server writes the input files into
the work dir and the code into an unlinked file, and asks the zygote (over a socketpair, with
nothing but the timeout) to fork a child. The child isolates itself, reads its code and runs it;
the zygote waits with a wall-clock timeout, kills and reaps everything the call left behind (it
is the child subreaper) and reports the exit status. The server then sends back capped output and
the files the code wrote, and empties the work dir. The zygote never touches request data, so a
child that walks its stack or the heap finds nothing of any earlier call.

Started through ``vtb_env/sandbox/boot.py`` (never ``python -m``: see there why), with a JSON config;
talks over stdin/stdout. Nothing of the project's task code is in the server: not imported (boot.py),
not on its ``PYTHONPATH`` (the pool), not readable by a child (``hide``: the project's package
directories are left out of the landlock ruleset and, where the server may mount, covered by an
empty read-only tmpfs).
"""

from __future__ import annotations

import errno
import importlib
import io
import json
import linecache
import os
import select
import signal
import socket
import stat
import struct
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from vtb_env.sandbox import _libc, cleanup, identity, landlock, namespaces, protocol, syscall_filter
from vtb_env.sandbox import limits as limits_mod
from vtb_env.sandbox.limits import Limits

SHARED_WORK_DIR = "/tmp/vtb-sandbox-work"  # same path in every slot: each mounts its own tmpfs there privately
# The work dir as the code is told about it. Code runs with its work dir as the current directory:
# a private tmpfs at SHARED_WORK_DIR where the server may mount one, a host-disk directory where it
# may not. Only the relative path is true on every host and in every slot, and it is known without
# starting a server.
CODE_WORK_DIR = "."
OPTIONAL_LAYERS = ("netns", "ipcns", "pidns", "tmpfs", "uid", "landlock", "seccomp")
SETUP_FAILED = 125  # child exit code when an isolation layer could not be applied: the code never ran
_MS_RDONLY = 0x1


@dataclass
class Isolation:
    """What this server managed to set up; the child applies exactly these layers."""

    work_dir: str
    uid: int | None = None
    ruleset_fd: int | None = None
    seccomp: Any = None
    ipc_per_call: bool = False  # each child unshares its own IPC namespace before dropping root
    pid_namespace: bool = False  # the zygote is init of a PID namespace holding only the calls
    layers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def preload(modules: list[str], png_compress_level: int | None) -> None:
    for name in modules:
        importlib.import_module(name)
    if "cv2" in sys.modules:
        sys.modules["cv2"].setNumThreads(1)
    if png_compress_level is not None and "PIL.Image" in sys.modules:
        _default_png_compression(png_compress_level)


def _default_png_compression(level: int) -> None:
    """PNG encoding dominates an image job: make ``compress_level`` default to a faster level."""
    from PIL import Image, PngImagePlugin

    Image.init()

    def save(im: Any, fp: Any, filename: Any, chunk: Any = PngImagePlugin.putchunk, save_all: bool = False) -> None:
        if "optimize" not in im.encoderinfo:
            im.encoderinfo.setdefault("compress_level", level)
        PngImagePlugin._save(im, fp, filename, chunk, save_all)

    Image.register_save("PNG", save)


def setup(
    slot_uid: int | None, lim: Limits, disable: frozenset[str] = frozenset(), hide: tuple[str, ...] = ()
) -> Isolation:
    """Enter every layer the host allows (and ``disable`` does not name); note the ones refused instead of failing.

    ``hide``: directories no child may read (the project's packages and their data)."""
    iso = Isolation(work_dir="")
    if disable:
        iso.notes.append(f"disabled by configuration: {', '.join(sorted(disable))}")
    iso.layers.append("rlimits")
    try:
        _libc.prctl(_libc.PR_SET_CHILD_SUBREAPER, 1)
    except OSError as exc:
        iso.notes.append(f"no child subreaper ({exc}); leftovers are still killed by scanning /proc")
    try:
        if "netns" in disable:
            raise OSError(errno.EPERM, "disabled")
        namespaces.enter_empty_network()
        iso.layers.append("netns")
    except OSError as exc:
        iso.notes.append(f"network namespace unavailable: {exc}")
    try:
        if "ipcns" in disable:
            raise OSError(errno.EPERM, "disabled")
        _libc.unshare(_libc.CLONE_NEWIPC)  # host segments invisible to the server; each child gets its own too
        iso.ipc_per_call = True
        iso.layers.append("ipcns")
    except OSError as exc:
        iso.notes.append(
            f"IPC namespace unavailable: {exc}"
            + ("" if "seccomp" in disable else "; SysV IPC is denied by seccomp instead")
        )
    root = os.geteuid() == 0
    interpreter_paths = sorted({sys.base_prefix, sys.prefix})
    try:
        if "tmpfs" in disable:
            raise OSError(errno.EPERM, "disabled")
        namespaces.enter_private_mounts()
        os.makedirs(SHARED_WORK_DIR, mode=0o755, exist_ok=True)
        if os.path.islink(SHARED_WORK_DIR) or not os.path.isdir(SHARED_WORK_DIR):
            raise OSError(errno.ENOTDIR, f"{SHARED_WORK_DIR} is not a plain directory")
        namespaces.mount_work_tmpfs(
            SHARED_WORK_DIR, lim.disk_mb, slot_uid if root and slot_uid is not None else os.getuid()
        )
        iso.work_dir = SHARED_WORK_DIR
        iso.layers.append(f"tmpfs({lim.disk_mb}MiB)")
        hidden = namespaces.reveal(interpreter_paths) if root else []
        if hidden:
            iso.notes.append(f"hid {', '.join(hidden)} behind a tmpfs holding only the interpreter")
        if root and hide:
            _cover(hide)
            iso.layers.append("hidden(project)")
    except OSError as exc:
        iso.work_dir = tempfile.mkdtemp(prefix="vtb-sandbox-")
        iso.notes.append(f"no private tmpfs ({exc}): work dir {iso.work_dir} on the host disk, disk use not capped")
    if root and slot_uid is None and "uid" not in disable:
        iso.notes.append("no free slot uid was reserved: per-slot uid disabled")
    elif root and "uid" not in disable:
        reason = identity.interpreter_reachable(interpreter_paths)
        if reason is None:
            iso.uid = slot_uid
            os.chown(iso.work_dir, slot_uid, slot_uid)
            os.chmod(iso.work_dir, 0o700)
            iso.layers.append(f"uid({slot_uid})")
        else:
            iso.notes.append(f"per-slot uid disabled: {reason}")
    elif not root:
        iso.notes.append("server is not root: no per-slot uid")
    abi = 0 if "landlock" in disable else landlock.abi_version()
    if abi:
        try:
            read_only = interpreter_paths + [p for p in sys.path if p.startswith(tuple(interpreter_paths))]
            read_only = landlock.readable_except(read_only + ["/usr", "/lib", "/lib64"], hide)
            read_only += ["/dev/urandom", "/dev/zero"]
            iso.ruleset_fd = landlock.build_ruleset(read_only, [iso.work_dir, "/dev/null"], abi)
            iso.layers.append(f"landlock(abi {abi})")
        except OSError as exc:
            iso.notes.append(f"landlock unavailable: {exc}")
    elif "landlock" not in disable:
        iso.notes.append("landlock unavailable in this kernel")
    if "seccomp" not in disable:
        try:
            iso.seccomp = syscall_filter.build(lim.allow_fork)
            iso.layers.append("seccomp")
        except (ImportError, OSError, RuntimeError) as exc:
            iso.notes.append(f"seccomp unavailable: {exc}")
    _memory_layer(iso, lim)
    _pid_layer(iso, disable)  # last: the next process this server forks must be the zygote (pyseccomp forks)
    return iso


def _pid_layer(iso: Isolation, disable: frozenset[str]) -> None:
    try:
        if "pidns" in disable:
            raise OSError(errno.EPERM, "disabled")
        namespaces.enter_private_pids()
        iso.pid_namespace = True
        iso.layers.append("pidns")
    except OSError as exc:
        iso.notes.append(f"PID namespace unavailable: {exc}; a call can probe host pids (getpgid, kill)")


def _cover(hide: tuple[str, ...] | list[str]) -> None:
    """An empty read-only tmpfs over each directory (inside the server's private mount namespace)."""
    for path in hide:
        if os.path.isdir(path):
            _libc.mount("vtb-hidden", path, "tmpfs", _MS_RDONLY | _libc.MS_NOSUID | _libc.MS_NODEV, "size=4k,mode=0555")


def _memory_layer(iso: Isolation, lim: Limits) -> None:
    """Say what bounds a call's memory: one process under RLIMIT_AS, or only each process."""
    if iso.seccomp is not None and not lim.allow_fork:
        iso.layers.append("memory(RLIMIT_AS, single process)")
    else:
        why = "allow_fork is set" if lim.allow_fork else "seccomp unavailable"
        iso.notes.append(f"the code may start processes ({why}): RLIMIT_AS bounds each process, not the call")
    cgroup_dir, why = limits_mod.delegated_memory_cgroup()
    iso.notes.append(
        f"no per-slot cgroup memory.max: {why}"
        if cgroup_dir is None
        else f"per-slot cgroup memory.max not implemented ({why}); memory is bounded by RLIMIT_AS"
    )


class Server:
    """Reads requests, prepares and collects the work dir; asks the zygote for each child."""

    def __init__(self, config: dict[str, Any]):
        self.limits = Limits(**config.get("limits", {}))
        self.proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
        self.proto_out = os.fdopen(os.dup(1), "wb")
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):
            os.dup2(null, fd)
        os.close(null)
        preload(config.get("preload", []), config.get("png_compress_level"))
        self.iso = setup(
            config.get("uid"), self.limits, frozenset(config.get("disable", ())), tuple(config.get("hide", ()))
        )
        # unlinked files outside the tmpfs: output survives a full disk; the code reaches the child without the
        # zygote reading it
        self.captures = [tempfile.TemporaryFile(prefix="vtb-capture-") for _ in range(2)]
        self.code_file = tempfile.TemporaryFile(prefix="vtb-code-")
        self.zygote = Zygote(
            self.iso,
            self.limits,
            [f.fileno() for f in self.captures],
            self.code_file.fileno(),
            close_in_zygote=[self.proto_in.fileno(), self.proto_out.fileno()],
        )

    def serve(self) -> None:
        protocol.send(
            self.proto_out, {"layers": self.iso.layers, "notes": self.iso.notes, "work_dir": self.iso.work_dir}
        )
        while True:
            try:
                request, blobs = protocol.receive(self.proto_in)
            except EOFError:
                break
            try:
                header, out_blobs = self.run(request, blobs)
            except Exception as exc:  # report, and have the pool replace this server: its state is unknown
                header, out_blobs = {"error": f"{type(exc).__name__}: {exc}", "restart": True}, []
            protocol.send(self.proto_out, header, out_blobs)
        self._clear_work_dir()
        if self.iso.work_dir != SHARED_WORK_DIR:  # the tmpfs vanishes with our mount namespace anyway
            os.rmdir(self.iso.work_dir)

    def run(self, request: dict[str, Any], blobs: list[bytes]) -> tuple[dict[str, Any], list[bytes]]:
        timeout = float(request.get("timeout_s") or self.limits.timeout_s)
        inputs = self._prepare(request["files"], blobs)
        for f in (*self.captures, self.code_file):
            f.seek(0)
            f.truncate()
        self.code_file.write(request["code"].encode("utf-8", "surrogatepass"))
        self.code_file.flush()
        exit_code, timed_out, duration, leftovers = self.zygote.spawn(timeout)
        (stdout, out_size), (stderr, err_size) = (self._read_capture(c) for c in self.captures)
        names, files, skipped = self._collect(inputs) if request.get("collect_files") else ([], [], [])
        header = {
            "exit_code": exit_code,
            "timed_out": timed_out,
            "duration_s": duration,
            "stdout_size": out_size,
            "stderr_size": err_size,
            "files": names,
            "skipped_files": skipped,
            "leftover_processes": leftovers,
        }
        try:
            self._clear_work_dir()  # nothing of this call waits in the work dir for the next one
        except OSError as exc:
            header["restart"] = f"work dir cleanup failed: {type(exc).__name__}: {exc}"
        return header, [stdout, stderr, *files]

    # -- before the call -------------------------------------------------------------------
    def _prepare(self, names: list[str], blobs: list[bytes]) -> dict[str, tuple[int, int, int, bytes]]:
        self._clear_work_dir()
        inputs = {}
        for name, data in zip(names, blobs, strict=False):
            if not name or "/" in name or name.startswith("."):
                raise ValueError(f"bad input file name {name!r}")
            path = os.path.join(self.iso.work_dir, name)
            with open(path, "wb") as f:
                f.write(data)
            if self.iso.uid is not None:
                os.chown(path, self.iso.uid, self.iso.uid)
            st = os.stat(path)
            inputs[name] = (st.st_ino, st.st_mtime_ns, st.st_size, data)
        return inputs

    def _clear_work_dir(self) -> None:
        cleanup.clear_directory(self.iso.work_dir)

    # -- after the call ----------------------------------------------------------------------
    def _read_capture(self, capture: Any) -> tuple[bytes, int]:
        size = os.fstat(capture.fileno()).st_size
        capture.seek(0)
        return capture.read(self.limits.output_bytes), size

    def _collect(self, inputs: dict[str, tuple[int, int, int, bytes]]) -> tuple[list[str], list[bytes], list[str]]:
        """New or changed regular files at the top of the work dir: never following links, capped."""
        names, files, skipped = [], [], []
        dir_fd = os.open(self.iso.work_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for name in sorted(os.listdir(dir_fd)):
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
                except OSError as exc:
                    skipped.append(f"{name}: {exc.strerror}")
                    continue
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:  # directories, fifos, hard links
                    os.close(fd)
                    skipped.append(f"{name}: not a regular file")
                    continue
                with os.fdopen(fd, "rb") as f:
                    if st.st_size > self.limits.max_output_file_bytes:
                        skipped.append(f"{name}: larger than {self.limits.max_output_file_bytes} bytes")
                        continue
                    before = inputs.get(name)
                    if before and before[:3] == (st.st_ino, st.st_mtime_ns, st.st_size):
                        continue
                    data = f.read(self.limits.max_output_file_bytes + 1)
                if before and data == before[3]:
                    continue
                if len(names) == self.limits.max_output_files:
                    skipped.append(f"{name}: more than {self.limits.max_output_files} output files")
                    continue
                names.append(name)
                files.append(data)
        finally:
            os.close(dir_fd)
        return names, files, limits_mod.capped_listing(skipped)


_SPAWN = struct.Struct("<d")  # server -> zygote: the timeout, nothing else
_DONE = struct.Struct("<i?di")  # zygote -> server: exit code, timed out, duration, leftover processes


class Zygote:
    """The process that forks every child. Forked before the first request and fed only timeouts,
    so what a child inherits (heap, stack, open files) holds nothing of any call."""

    def __init__(self, iso: Isolation, lim: Limits, capture_fds: list[int], code_fd: int, close_in_zygote: list[int]):
        server_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server_pid = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:
            try:
                server_end.close()
                for fd in close_in_zygote:
                    os.close(fd)
                _libc.prctl(_libc.PR_SET_PDEATHSIG, signal.SIGKILL)
                # in a PID namespace the parent lies outside it (pid 0); a dead server also closes the socket
                if os.getppid() == (0 if iso.pid_namespace else server_pid):
                    _ZygoteLoop(iso, lim, capture_fds, code_fd).serve(zygote_end)
            finally:
                os._exit(0)
        zygote_end.close()
        self._socket = server_end

    def spawn(self, timeout: float) -> tuple[int, bool, float, int]:
        """Run the code now in the code file; raises ConnectionError if the zygote has gone."""
        try:
            self._socket.sendall(_SPAWN.pack(timeout))
            reply = self._socket.recv(_DONE.size)
        except OSError as exc:
            raise ConnectionError(f"the zygote died ({exc})") from None
        if len(reply) != _DONE.size:
            raise ConnectionError("the zygote died")
        return _DONE.unpack(reply)


class _ZygoteLoop:
    def __init__(self, iso: Isolation, lim: Limits, capture_fds: list[int], code_fd: int):
        self.iso, self.limits, self.capture_fds, self.code_fd = iso, lim, capture_fds, code_fd
        self.base_mapped = limits_mod.mapped_bytes()

    def serve(self, sock: socket.socket) -> None:
        try:
            _libc.prctl(_libc.PR_SET_CHILD_SUBREAPER, 1)
        except OSError:
            pass  # leftovers are still found by scanning /proc
        while True:
            message = sock.recv(_SPAWN.size)
            if len(message) != _SPAWN.size:
                return
            (timeout,) = _SPAWN.unpack(message)
            start = time.perf_counter()
            pid = os.fork()
            if pid == 0:
                self._child(timeout)  # never returns
            timed_out = _wait(pid, timeout)
            _kill_group(pid)  # before reaping the child, so its pid (the group id) cannot be reused yet
            status = os.waitpid(pid, 0)[1]
            leftovers = _reap_namespace() if self.iso.pid_namespace else _reap_leftovers(self.iso.uid)
            sock.sendall(
                _DONE.pack(os.waitstatus_to_exitcode(status), timed_out, time.perf_counter() - start, leftovers)
            )

    def _child(self, timeout: float) -> None:
        try:
            os.dup2(self.capture_fds[0], 1)
            os.dup2(self.capture_fds[1], 2)
            code = os.pread(self.code_fd, os.fstat(self.code_fd).st_size, 0).decode("utf-8", "surrogatepass")
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead of killing
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            _libc.prctl(_libc.PR_SET_PDEATHSIG, signal.SIGKILL)
            os.chdir(self.iso.work_dir)
            limits_mod.apply(Limits(**{**self.limits.__dict__, "timeout_s": timeout}), self.base_mapped)
            os.setpgid(0, 0)  # the call's own process group (seccomp then forbids leaving it)
            if self.iso.ipc_per_call:
                _libc.unshare(_libc.CLONE_NEWIPC)  # SysV objects of this call die with it
            if self.iso.uid is not None:
                identity.drop_to(self.iso.uid)
                _libc.prctl(_libc.PR_SET_PDEATHSIG, signal.SIGKILL)  # a credential change clears it
            elif os.geteuid() == 0:
                identity.drop_capabilities()
            _libc.prctl(_libc.PR_SET_NO_NEW_PRIVS, 1)
            if self.iso.ruleset_fd is not None:
                landlock.restrict_self(self.iso.ruleset_fd)
            if self.iso.seccomp is not None:
                self.iso.seccomp.load()
            os.closerange(3, 1 << 16)
            os.environ.clear()
            os.environ.update(HOME=self.iso.work_dir, TMPDIR=self.iso.work_dir, LANG="C.UTF-8", MPLBACKEND="Agg")
            tempfile.tempdir = None
            sys.stdin = open(os.devnull)
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
            sys.stderr = io.TextIOWrapper(
                io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
            )
        except BaseException as exc:  # fail closed: never run the code half-isolated
            os.write(2, f"sandbox setup failed: {type(exc).__name__}: {exc}\n".encode())
            os._exit(SETUP_FAILED)
        os._exit(_run_code(code))


def _wait(pid: int, timeout: float) -> bool:
    """Wait for the child up to ``timeout`` seconds of wall clock; SIGKILL it after. True if it timed out."""
    pidfd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if poller.poll(timeout * 1000):
            return False
        os.kill(pid, signal.SIGKILL)
        return True
    finally:
        os.close(pidfd)


def _reap_leftovers(uid: int | None) -> int:
    """Kill every process the call left behind (orphans are re-parented to us) and reap them."""
    killed = 0
    while children := _children():
        killed += len(children)
        if uid is not None:
            _kill_all_of_uid(uid)  # one atomic sweep: a fork bomb cannot outrun it
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _reap_exited(block_for=children)
    _reap_exited()
    return killed


def _reap_namespace() -> int:
    """As init of the PID namespace: ``kill(-1)`` reaches every other process in it at once (atomic against
    fork), and every orphan is re-parented to us; reap them all. Returns how many were left."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass  # none alive; zombies may still wait
    reaped = 0
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return reaped
        reaped += 1


def _run_code(code: str) -> int:
    """Run the model's code as ``__main__``; print a traceback without our frames on error."""
    filename = "<code>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    status = 0
    try:
        exec(compile(code, filename, "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException as exc:
        tb = exc.__traceback__.tb_next if exc.__traceback__ else None
        traceback.print_exception(type(exc), exc, tb)
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return status


def _children() -> list[int]:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:  # kernels without CONFIG_PROC_CHILDREN
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                            found.append(int(entry))
                except (OSError, IndexError, ValueError):
                    continue
        return found


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_all_of_uid(uid: int) -> None:
    """kill(-1) from a helper running as the slot uid reaches exactly the processes of that uid."""
    helper = os.fork()
    if helper == 0:
        try:
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(helper, 0)


def _reap_exited(block_for: list[int] = ()) -> None:
    for pid in block_for:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main() -> None:
    Server(json.loads(sys.argv[1])).serve()

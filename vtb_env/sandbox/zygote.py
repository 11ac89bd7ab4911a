"""The zygote: the process that forks every call's child, and the child that isolates itself and runs the code.

The server forks the zygote before it reads any request and feeds it only timeouts over a
socketpair; the code reaches the child through an unlinked file. A *checking* child (``check_bytes``
above 0) is isolated the same way but runs ``vtb_env.sandbox.normalize`` on the images in that file
instead of code: untrusted images are decoded under a call's limits, never in the server or the
environment. The zygote waits for each child with a wall-clock timeout, then kills and reaps everything
the call left behind (``vtb_env/sandbox/reaping.py``) and reports the exit status.
"""

from __future__ import annotations

import io
import linecache
import os
import select
import signal
import socket
import struct
import sys
import tempfile
import time
import traceback

from vtb_env.sandbox import _libc, identity, landlock, normalize, reaping
from vtb_env.sandbox import limits as limits_mod
from vtb_env.sandbox.isolation import Isolation
from vtb_env.sandbox.limits import Limits

SETUP_FAILED = 125  # child exit code when an isolation layer could not be applied: the code never ran

_SPAWN = struct.Struct("<dQ")  # server -> zygote: the timeout and, for a checking child, its output cap; nothing else
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

    def spawn(self, timeout: float, check_bytes: int = 0) -> tuple[int, bool, float, int]:
        """Run the code now in the code file, or with ``check_bytes`` > 0 check the images it holds (their
        results on stdout, at most ``check_bytes``); raises ConnectionError if the zygote has gone."""
        try:
            self._socket.sendall(_SPAWN.pack(timeout, check_bytes))
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
            timeout, check_bytes = _SPAWN.unpack(message)
            start = time.perf_counter()
            pid = os.fork()
            if pid == 0:
                self._child(timeout, check_bytes)  # never returns
            timed_out = _wait(pid, timeout)
            reaping.kill_group(pid)  # before reaping the child, so its pid (the group id) cannot be reused yet
            status = os.waitpid(pid, 0)[1]
            leftovers = reaping.reap_namespace() if self.iso.pid_namespace else reaping.reap_leftovers(self.iso.uid)
            sock.sendall(
                _DONE.pack(os.waitstatus_to_exitcode(status), timed_out, time.perf_counter() - start, leftovers)
            )

    def _child(self, timeout: float, check_bytes: int) -> None:
        try:
            os.dup2(self.capture_fds[0], 1)
            os.dup2(self.capture_fds[1], 2)
            payload = os.pread(self.code_fd, os.fstat(self.code_fd).st_size, 0)
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead of killing
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            _libc.prctl(_libc.PR_SET_PDEATHSIG, signal.SIGKILL)
            os.chdir(self.iso.work_dir)
            own = {"timeout_s": timeout} | ({"file_size_mb": -(-check_bytes // limits_mod.MiB)} if check_bytes else {})
            limits_mod.apply(Limits(**{**self.limits.__dict__, **own}), self.base_mapped)
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
        if check_bytes:
            os._exit(_run_check(payload))
        os._exit(_run_code(payload.decode("utf-8", "surrogatepass")))


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


def _run_check(request: bytes) -> int:
    """The checking child: results on stdout; a failure is a traceback on stderr (the server refuses what is left)."""
    try:
        return normalize.run_in_child(request, 1)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        return 1


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

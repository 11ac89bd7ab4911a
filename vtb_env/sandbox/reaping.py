"""Killing and reaping every process a call left behind, run by the zygote after each call."""

from __future__ import annotations

import os
import signal


def reap_leftovers(uid: int | None) -> int:
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


def reap_namespace() -> int:
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


def kill_group(pgid: int) -> None:
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

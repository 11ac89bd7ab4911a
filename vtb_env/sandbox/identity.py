"""Per-slot unprivileged uid: the child drops root and every supplementary group."""

from __future__ import annotations

import ctypes
import os
import stat

from vtb_env.sandbox import _libc

UID_BASE = 100_000


def slot_uid(owner_pid: int, slot: int) -> int:
    """A uid unique to (process, slot), so limits and files of one slot never mix with another's."""
    return UID_BASE + owner_pid * 16 + slot


def interpreter_reachable(paths: list[str]) -> str | None:
    """Why an unprivileged uid could not read the interpreter's files, or None if it can."""
    for path in paths:
        current = os.path.abspath(path)
        if os.stat(current).st_mode & (stat.S_IROTH | stat.S_IXOTH) != stat.S_IROTH | stat.S_IXOTH:
            return f"{current} is not readable by other users"
        while current != "/":
            current = os.path.dirname(current)
            if not os.stat(current).st_mode & stat.S_IXOTH:
                return f"{current} cannot be entered by other users"
    return None


def drop_to(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """Root without the per-slot uid (degraded mode): keep uid 0 but no capability, so rlimits bind."""
    header = _CapHeader(version=0x20080522, pid=0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    _libc.check(_libc.libc.capset(ctypes.byref(header), data), "capset")

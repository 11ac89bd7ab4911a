"""Per-slot unprivileged uid: the child drops root and every supplementary group.

Slot uids come from a reserved block chosen to sit clear of the usual allocations (system and
login users, LDAP/SSSD id mapping up to 2,000,200,000, systemd's container range up to
1,879,048,191, subordinate ranges of rootless containers). A uid is used only after checking
that it is mapped in this user namespace, has no passwd entry, lies in no ``/etc/subuid`` or
``/etc/subgid`` range, runs no process, and is not held by another pool (an ``flock`` held for
the slot's life). So the leftover sweep, which kills every process of the slot uid, can only
ever reach the sandbox's own processes.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import pwd
import stat
from typing import Iterable

from vtb_env.sandbox import _libc

UID_BASE = 2_000_500_000
UID_COUNT = 1 << 20
LOCK_DIR = "/run/vtb-sandbox-uids" if os.path.isdir("/run") else "/tmp/vtb-sandbox-uids"
SUBORDINATE_FILES = ("/etc/subuid", "/etc/subgid")


class UidClaim:
    """A slot uid and the lock that reserves it; ``release`` (or process exit) frees it."""

    def __init__(self, uid: int, lock_fd: int):
        self.uid = uid
        self._lock_fd = lock_fd

    def release(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1


def claim_slot_uid(
    seed: int,
    *,
    base: int = UID_BASE,
    count: int = UID_COUNT,
    subordinate_files: Iterable[str] = SUBORDINATE_FILES,
    lock_dir: str = LOCK_DIR,
) -> UidClaim:
    """The first free uid of the block, probing from ``seed`` (e.g. pid * 16 + slot); raises OSError if none is free."""
    taken_ranges = [r for path in subordinate_files for r in _subordinate_ranges(path)]
    mapped = _mapped_uid_ranges()
    running = _running_uids()
    os.makedirs(lock_dir, mode=0o700, exist_ok=True)
    for step in range(min(count, 4096)):
        uid = base + (seed + step) % count
        if not any(lo <= uid < hi for lo, hi in mapped) or any(lo <= uid < hi for lo, hi in taken_ranges):
            continue
        if uid in running or _has_passwd_entry(uid):
            continue
        fd = os.open(os.path.join(lock_dir, str(uid)), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return UidClaim(uid, fd)
    raise OSError(f"no free slot uid in [{base}, {base + count})")


def _has_passwd_entry(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False


def _subordinate_ranges(path: str) -> list[tuple[int, int]]:
    """``name:start:count`` lines as half-open ranges; a missing or unreadable file holds none."""
    ranges = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.strip().split(":")
                if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                    ranges.append((int(parts[1]), int(parts[1]) + int(parts[2])))
    except OSError:
        pass
    return ranges


def _mapped_uid_ranges() -> list[tuple[int, int]]:
    """uids that exist in this user namespace (``/proc/self/uid_map``)."""
    try:
        with open("/proc/self/uid_map") as f:
            rows = [line.split() for line in f]
        return [(int(inside), int(inside) + int(length)) for inside, _, length in rows]
    except (OSError, ValueError):
        return [(0, 1 << 32)]


def _running_uids() -> set[int]:
    uids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                uids.add(os.stat(f"/proc/{entry}").st_uid)
            except OSError:
                continue
    return uids


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

"""ctypes access to the few libc calls the sandbox needs that the os module lacks."""

from __future__ import annotations

import ctypes
import ctypes.util
import os

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_BIND = 0x1000
MS_MOVE = 0x2000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18


def check(result: int, what: str) -> int:
    """Raise OSError with errno when a libc call returned -1."""
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def prctl(option: int, arg2: int = 0) -> None:
    check(libc.prctl(option, ctypes.c_ulong(arg2), 0, 0, 0), f"prctl({option})")


def unshare(flags: int) -> None:
    check(libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def syscall(number: int, *args: int | ctypes.c_void_p) -> int:
    return libc.syscall(number, *args)


IN_ACCESS = 0x00000001  # a read of the watched file (read, pread, readv; not a page fault of an mmap)


def inotify_init() -> int:
    """A non-blocking, close-on-exec inotify descriptor."""
    return check(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC), "inotify_init1")


def inotify_add_watch(fd: int, path: str, mask: int) -> int:
    return check(libc.inotify_add_watch(fd, os.fsencode(path), ctypes.c_uint32(mask)), f"inotify_add_watch {path}")

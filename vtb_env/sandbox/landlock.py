"""Landlock (raw syscalls via ctypes): the child may read the interpreter and system libraries,
read and write its work dir (no symlinks, devices or sockets), and nothing else; no TCP bind or
connect; no abstract unix sockets or signals outside its own domain (ABI >= 6).

The ruleset is built once in the server; each child only calls ``landlock_restrict_self``.
"""

from __future__ import annotations

import ctypes
import os

from vtb_env.sandbox import _libc as c

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


def abi_version() -> int:
    """The kernel's landlock ABI, or 0 when landlock is unavailable."""
    version = c.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(version, 0)


def build_ruleset(read_only: list[str], read_write: list[str], abi: int) -> int:
    """Create the ruleset once; returns its fd (kept open in the server)."""
    handled_fs = _FS_BY_ABI.get(abi, (1 << 16) - 1)
    attr = _RulesetAttr(
        fs=handled_fs,
        net=NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
        scoped=SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0,
    )
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    fd = c.check(
        c.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)),
        "landlock_create_ruleset",
    )
    read = READ_FILE | READ_DIR
    write = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | (TRUNCATE if abi >= 3 else 0)
    for paths, access in ((read_only, read), (read_write, read | write)):
        for path in paths:
            if os.path.exists(path):
                _allow(fd, path, access & handled_fs)
    return fd


def _allow(ruleset_fd: int, path: str, access: int) -> None:
    path_fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not os.path.isdir(path):
            access &= _FILE_ONLY
        rule = _PathBeneath(allowed_access=access, parent_fd=path_fd)
        c.check(
            c.syscall(
                SYS_ADD_RULE,
                ctypes.c_int(ruleset_fd),
                ctypes.c_int(RULE_PATH_BENEATH),
                ctypes.byref(rule),
                ctypes.c_uint32(0),
            ),
            f"landlock_add_rule {path}",
        )
    finally:
        os.close(path_fd)


def restrict_self(ruleset_fd: int) -> None:
    """Enter the domain (needs no_new_privs, which the child sets first)."""
    c.check(c.syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)), "landlock_restrict_self")


def readable_except(roots: list[str], hide: tuple[str, ...] | list[str]) -> list[str]:
    """Landlock only allows: ``roots`` less the ``hide`` directories, as the roots' other entries.

    A root with a hidden directory beneath it is replaced by its entries, recursively along the
    way down to each hidden directory (e.g. a site-packages holding the installed project)."""
    hidden = {os.path.realpath(path) for path in hide}
    allowed: list[str] = []
    for root in roots:
        real = os.path.realpath(root)
        if real in hidden:
            continue
        if not any(path.startswith(real.rstrip("/") + "/") for path in hidden) or not os.path.isdir(real):
            allowed.append(root)
            continue
        allowed += readable_except([os.path.join(real, entry) for entry in sorted(os.listdir(real))], list(hidden))
    return allowed

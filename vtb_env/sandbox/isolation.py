"""The fork server's isolation: every layer the host allows, entered once when the server starts.

``setup`` enters the server's own namespaces (network, IPC, mounts with a private work-dir tmpfs, PIDs),
builds the landlock ruleset and the seccomp filter, and returns an ``Isolation`` saying which layers
it got; each child of the zygote (``vtb_env/sandbox/zygote.py``) applies exactly those. A layer the
host refuses is noted, never fatal.
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from vtb_env.sandbox import _libc, identity, landlock, namespaces, syscall_filter
from vtb_env.sandbox import limits as limits_mod
from vtb_env.sandbox.limits import Limits

SHARED_WORK_DIR = "/tmp/vtb-sandbox-work"  # same path in every slot: each mounts its own tmpfs there privately
OPTIONAL_LAYERS = ("netns", "ipcns", "pidns", "tmpfs", "uid", "landlock", "seccomp")
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

"""Namespaces the fork server enters once at start; every child inherits them for free.

- an empty network namespace (no interfaces: neither 127.0.0.1 nor the outside is reachable);
- a PID namespace for the processes the server forks next: the zygote becomes its init, so a
  call sees only its own slot's processes (``getpgid``/``kill`` on a host pid find nothing) and
  the zygote's ``kill(-1)`` sweeps every process a call left behind;
- a private mount namespace holding the size-capped tmpfs work dir (invisible to the host and
  to other slots, so all slots can use the same path) and, when the interpreter lives under a
  directory other users cannot enter (e.g. ``/root`` with mode 0700), a 0755 tmpfs over that
  directory with only the interpreter bind-mounted back: the slot uid can import the standard
  library while everything else in that directory disappears.
"""

from __future__ import annotations

import os
import stat
import tempfile

from vtb_env.sandbox import _libc as c


def enter_empty_network() -> None:
    c.unshare(c.CLONE_NEWNET)


def enter_private_pids() -> None:
    """Put the server's next child (the zygote) at pid 1 of a new PID namespace; the server stays where it is."""
    c.unshare(c.CLONE_NEWPID)


def enter_private_mounts() -> None:
    c.unshare(c.CLONE_NEWNS)
    c.mount(None, "/", None, c.MS_REC | c.MS_PRIVATE)


def mount_work_tmpfs(path: str, size_mb: int, uid: int) -> None:
    flags = c.MS_NOSUID | c.MS_NODEV | c.MS_NOEXEC
    c.mount("vtb-sandbox", path, "tmpfs", flags, f"size={size_mb}m,nr_inodes=4096,mode=0700,uid={uid},gid={uid}")


def closed_ancestor(path: str) -> str | None:
    """The topmost ancestor of ``path`` that other users cannot traverse, if any."""
    found = None
    current = os.path.dirname(os.path.abspath(path))
    while True:
        if not os.stat(current).st_mode & stat.S_IXOTH:
            found = current
        parent = os.path.dirname(current)
        if parent == current:
            return found
        current = parent


def reveal(paths: list[str]) -> list[str]:
    """Make ``paths`` reachable by other users (inside the private mount namespace). Returns what was hidden."""
    hidden = []
    for path in paths:
        ancestor = closed_ancestor(path)
        if ancestor is None:
            continue
        staging = tempfile.mkdtemp(prefix="vtb-reveal-")
        c.mount(path, staging, None, c.MS_BIND | c.MS_REC)
        c.mount("vtb-reveal", ancestor, "tmpfs", c.MS_NOSUID | c.MS_NODEV, "mode=0755,size=1m")
        os.makedirs(path, mode=0o755)
        c.mount(staging, path, None, c.MS_MOVE)
        os.rmdir(staging)
        hidden.append(ancestor)
    return hidden

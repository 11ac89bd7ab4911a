"""Emptying a work dir without recursion: any depth, any name length, any permission bits the code set."""

from __future__ import annotations

import os
import stat

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def clear_directory(path: str) -> None:
    """Remove everything inside ``path`` (kept itself). Iterative and fd-relative: 1,500 nested
    directories or 4 KiB paths cost no stack and no PATH_MAX; symlinks are unlinked, never followed.
    Call it only when no process of the call is left (they could otherwise move entries under us)."""
    fd = os.open(path, _DIR_FLAGS)
    above: list[tuple[str, list[str]]] = []  # per level: (name of the dir we are in, its parent's unvisited subdirs)
    try:
        pending = _unlink_files(fd)
        while True:
            if pending:
                name = pending.pop()
                sub = _open_subdir(fd, name)
                os.close(fd)
                fd = sub
                above.append((name, pending))
                pending = _unlink_files(fd)
                continue
            if not above:
                return
            name, pending = above.pop()
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(name, dir_fd=fd)
    finally:
        os.close(fd)


def remove_tree(path: str) -> None:
    """``clear_directory`` then the directory itself; a missing path is fine."""
    try:
        clear_directory(path)
        os.rmdir(path)
    except FileNotFoundError:
        pass


def _open_subdir(fd: int, name: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except PermissionError:  # the code chmod-ed it to 0 (it is ours): give access back first
        os.chmod(name, 0o700, dir_fd=fd)
        return os.open(name, _DIR_FLAGS, dir_fd=fd)


def _unlink_files(fd: int) -> list[str]:
    """Unlink every non-directory entry of ``fd``; return the names of its subdirectories."""
    if os.fstat(fd).st_mode & (stat.S_IWUSR | stat.S_IXUSR) != stat.S_IWUSR | stat.S_IXUSR:
        try:
            os.fchmod(fd, 0o700)
        except PermissionError:
            pass
    subdirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    return subdirs

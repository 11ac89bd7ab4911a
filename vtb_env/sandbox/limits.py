"""Resource limits applied in the child before the model's code runs."""

from __future__ import annotations

import math
import os
import resource
from dataclasses import dataclass

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Per-call limits. ``memory_mb`` is address space on top of what the preloaded server already maps."""

    timeout_s: float = 20.0
    memory_mb: int = 4096
    file_size_mb: int = 32  # largest file the code can write; also what stops a 1 GB print
    open_files: int = 256
    processes: int = 64  # per slot uid: threads count too
    allow_fork: bool = False  # True lets the code start processes; RLIMIT_AS then bounds each one, not the call
    disk_mb: int = 256  # size of the work dir tmpfs
    output_bytes: int = 64 * 1024  # stdout/stderr returned per stream
    max_output_files: int = 16
    max_output_file_bytes: int = 32 * MiB


MAX_LISTED = 16  # entries of a skipped-files list shown one by one; the rest are counted
MAX_LISTED_CHARS = 120  # characters of one entry


def capped_listing(entries: list[str]) -> list[str]:
    """At most MAX_LISTED short entries, then a count: a call cannot flood the tool message."""
    shown = [entry if len(entry) <= MAX_LISTED_CHARS else entry[:MAX_LISTED_CHARS] + "..." for entry in entries]
    if len(shown) > MAX_LISTED:
        return shown[:MAX_LISTED] + [f"... and {len(shown) - MAX_LISTED} more files skipped"]
    return shown


def mapped_bytes() -> int:
    """Virtual memory this process maps now (the forked child starts with the same)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * resource.getpagesize()


def apply(limits: Limits, base_mapped: int) -> None:
    """Set the rlimits in the child (CPU a little above the wall-clock timeout so the wall clock fires first)."""
    cpu = math.ceil(limits.timeout_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    address_space = base_mapped + limits.memory_mb * MiB
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    fsize = limits.file_size_mb * MiB
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))


def delegated_memory_cgroup() -> tuple[str | None, str]:
    """This process's cgroup v2 directory if its memory controller is delegated to us, and why (not).

    Reads only: on hosts with cgroup v1 or no delegation nothing is created, moved or written.
    """
    try:
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split(" - ") for line in f]
        roots = [left.split()[4] for left, right in mounts if right.split()[0] == "cgroup2"]
        with open("/proc/self/cgroup") as f:
            unified = [line.strip()[3:] for line in f if line.startswith("0::")]
    except OSError as exc:
        return None, f"cgroups unreadable: {exc}"
    if not roots or not unified:
        return None, "no cgroup v2 hierarchy (cgroup v1 host)"
    directory = os.path.join(roots[0], unified[0].lstrip("/"))
    try:
        with open(os.path.join(directory, "cgroup.controllers")) as f:
            controllers = f.read().split()
    except OSError as exc:
        return None, f"cgroup v2 directory {directory} unreadable: {exc.strerror}"
    if "memory" not in controllers:
        return None, f"memory controller not delegated to {directory}"
    if not os.access(directory, os.W_OK):
        return None, f"cgroup {directory} is not writable by this user"
    return directory, f"memory controller delegated at {directory}"

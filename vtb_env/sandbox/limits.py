"""Resource limits applied in the child before the model's code runs."""

from __future__ import annotations

import math
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
    disk_mb: int = 256  # size of the work dir tmpfs
    output_bytes: int = 64 * 1024  # stdout/stderr returned per stream
    max_output_files: int = 16
    max_output_file_bytes: int = 32 * MiB


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

"""seccomp (via pyseccomp/libseccomp): deny the system calls a computation never needs.

Denied with EPERM: program execution, every ``socket()`` (all families: no TCP/UDP/DNS, no
netlink, packet or unix sockets), tracing and cross-process memory access, namespaces and
mounts, kernel keyrings, BPF, io_uring, module loading, SysV IPC and POSIX message queues
(shared memory, message queues, semaphores: no channel between calls or to the host), memory
objects ``RLIMIT_AS`` does not count (``memfd_create``/``memfd_secret`` files, Linux AIO
contexts), handles on other processes (pidfds, ``kcmp``, ``process_madvise``), legacy x86 and
execution-domain calls (``personality``, ``modify_ldt``, ``iopl``...), clone with namespace
flags, and, unless ``allow_fork``, every new process: ``fork``/``vfork`` and ``clone`` without
``CLONE_THREAD`` (threads still work), so ``RLIMIT_AS`` bounds the call's whole memory.
``clone3`` answers ENOSYS so the C library falls back to ``clone``, whose flags can be checked.
The filter object is built once in the server; each child only loads it.
"""

from __future__ import annotations

import errno
from typing import Any

DENIED = (
    "execve",
    "execveat",
    "socket",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "unshare",
    "setns",
    "pivot_root",
    "chroot",
    "bpf",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "perf_event_open",
    "userfaultfd",
    "open_by_handle_at",
    "fsopen",
    "fsmount",
    "fsconfig",
    "move_mount",
    "open_tree",
    "fspick",
    "mount_setattr",
    "acct",
    "settimeofday",
    "clock_settime",
    "sethostname",
    "setdomainname",
    "lookup_dcookie",
    "quotactl",
    "setsid",
    "setpgid",  # every process of a call stays in its process group: one kill sweeps them all
)
SYSV_IPC = (
    "shmget",
    "shmat",
    "shmdt",
    "shmctl",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
)
# Memory a call could hold outside its address space (RLIMIT_AS counts mappings, not these): a memfd
# written with write() grows without a mapping (40 x 31 MiB held under memory_mb=256 before this).
# tmpfs files are capped by the work dir's size and pipes by the kernel's per-user pipe pages.
UNCOUNTED_MEMORY = (
    "memfd_create",
    "memfd_secret",
    "io_setup",
    "io_destroy",
    "io_submit",
    "io_cancel",
    "io_getevents",
    "io_pgetevents",
)
# Handles on, and comparisons with, other processes: a call has no business with any process but its own.
OTHER_PROCESSES = ("pidfd_open", "pidfd_getfd", "pidfd_send_signal", "kcmp", "process_madvise", "process_mrelease")
# Execution domains and x86 legacy: only exec (denied) or raw hardware access would use them.
LEGACY = ("personality", "modify_ldt", "uselib", "vm86", "vm86old", "iopl", "ioperm")
NEW_PROCESS = ("fork", "vfork")
CLONE_THREAD = 0x00010000
CLONE_NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)


def build(allow_fork: bool = False) -> Any:
    """The filter (not yet loaded). Raises ImportError/OSError where seccomp is unavailable."""
    import pyseccomp as sc

    f = sc.SyscallFilter(defaction=sc.ALLOW)
    for name in DENIED + SYSV_IPC + UNCOUNTED_MEMORY + OTHER_PROCESSES + LEGACY + (() if allow_fork else NEW_PROCESS):
        try:
            f.add_rule(sc.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):  # a syscall this kernel/arch does not know
            continue
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in CLONE_NAMESPACE_FLAGS:
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    if not allow_fork:
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    return f

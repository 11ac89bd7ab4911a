"""The sandbox against the attacks of issue 11, on real processes: the layers reported for this host, nothing of
one call reaches the next (item 1), SysV IPC is private (item 2).

Each test asserts containment AND that the next call works. The attack files (this one,
``tests/test_sandbox_attacks_limits.py``, ``tests/test_sandbox_attacks_slots.py``) run a second time as an
unprivileged user (``test_attack_suite_as_unprivileged_user``: ``setpriv`` to ``nobody``, no capabilities), where
the host refuses namespaces and uid switching: tests that need a layer check that it is reported missing and skip
only that part.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

from tests.support import sandbox_attacks, unprivileged
from tests.support.sandbox_attacks import LIMITS, alive
from vtb_env.sandbox import Sandbox

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")

# the module-scoped sandbox, shared with the other attack files
sandbox = sandbox_attacks.sandbox

ROOT = unprivileged.ROOT
IPC_KEY = 0x56544231  # "VTB1"


def test_layers_are_reported_for_this_host(sandbox):
    layers = " ".join(sandbox.layers)
    for layer in ("rlimits", "landlock", "seccomp", "memory(RLIMIT_AS, single process)"):
        assert layer in layers, (sandbox.layers, sandbox.notes)
    assert any("cgroup memory.max" in note for note in sandbox.notes)
    if ROOT:
        for layer in ("netns", "ipcns", "tmpfs", "uid"):
            assert layer in layers, (sandbox.layers, sandbox.notes)
    else:  # the degraded profile: each missing layer says why
        notes = " ".join(sandbox.notes)
        for missing in (
            "network namespace unavailable",
            "IPC namespace unavailable",
            "no private tmpfs",
            "not root: no per-slot uid",
        ):
            assert missing in notes, sandbox.notes
        assert not any(layer.startswith(("netns", "ipcns", "tmpfs", "uid")) for layer in sandbox.layers)


# -- 1. nothing of one call reaches the next ----------------------------------------------------

SEARCH_FRAMES_AND_HEAP = """
import gc, sys
marker = "".join(["VTB", "LEAK", "{token}"])
raw = marker.encode()
hits = []

def look(obj, where):
    if obj is marker or obj is raw:
        return
    if isinstance(obj, str) and marker in obj or isinstance(obj, (bytes, bytearray)) and raw in obj:
        hits.append(where)
    elif isinstance(obj, memoryview):
        try:
            if raw in obj.tobytes():
                hits.append(where)
        except (TypeError, ValueError):
            pass

frame = sys._getframe()
while frame is not None:
    for name, value in list(frame.f_locals.items()):
        look(value, f"frame {{frame.f_code.co_name}}.{{name}}")
        if isinstance(value, (dict, list, tuple)):
            for item in (value.values() if isinstance(value, dict) else value):
                look(item, f"frame {{frame.f_code.co_name}}.{{name}}[...]")
    frame = frame.f_back
for obj in gc.get_objects():
    look(obj, type(obj).__name__)
    for ref in gc.get_referents(obj):
        look(ref, "referent of " + type(obj).__name__)
print(len(hits), hits[:5])
"""


def test_no_trace_of_the_previous_call_in_frames_or_heap(sandbox):
    token = os.urandom(6).hex()
    marker = f"VTBLEAK{token}"
    writer = (
        "import os, sys\nm = open('in.bin').read()\nprint(m)\nprint(m, file=sys.stderr)\n"
        "open('transformed_image_0.png', 'w').write(m)\nos.mkdir('sub')\nopen('sub/hidden.txt', 'w').write(m)\n"
        "open('.hidden', 'w').write(m)"
    )
    first = sandbox.run(writer, {"in.bin": marker.encode()}, collect_files=True)
    assert first.exit_code == 0 and marker in first.stdout and marker in first.stderr, first.stderr
    assert first.files["transformed_image_0.png"] == marker.encode()
    second = sandbox.run(SEARCH_FRAMES_AND_HEAP.format(token=token))
    assert second.exit_code == 0, second.stderr
    assert second.stdout.startswith("0 []"), second.stdout
    alive(sandbox)


SCAN_RAW_MEMORY = """
import ctypes, sys
marker = "".join(["VTB", "LEAK", "{token}"]).encode()
own = id(marker) + sys.getsizeof(b"") - 1  # where this bytes object keeps its own copy
hits, scanned, step = [], 0, 1 << 24
with open("/proc/self/maps") as f:
    maps = f.read().splitlines()
for line in maps:
    addr, perms = line.split()[:2]
    if perms[0] != "r" or line.endswith(("[vvar]", "[vsyscall]", "[vvar_vclock]")):
        continue
    lo, hi = (int(x, 16) for x in addr.split("-"))
    for start in range(lo, hi, step):
        chunk = ctypes.string_at(start, min(step + len(marker) - 1, hi - start))  # overlap: no marker split
        scanned += len(chunk)
        at = chunk.find(marker)
        while at >= 0:
            if start + at != own:
                hits.append(hex(start + at))
            at = chunk.find(marker, at + 1)
        del chunk
print(len(hits), scanned // 2**20)
"""


def test_no_trace_of_the_previous_call_in_raw_memory():
    """Stronger than frames and the heap: every readable byte of the child (landlock off to read /proc/self/maps)."""
    with Sandbox(1, limits=LIMITS, disable=("landlock",)) as sb:
        token = os.urandom(6).hex()
        marker = f"VTBLEAK{token}"
        first = sb.run(
            f"import sys\nprint({marker!r})\nprint({marker!r}, file=sys.stderr)\n"
            f"open('out.txt', 'w').write({marker!r})",
            {"in.txt": marker.encode()},
            collect_files=True,
        )
        assert first.files == {"out.txt": marker.encode()}
        second = sb.run(SCAN_RAW_MEMORY.format(token=token), timeout_s=30)
        assert second.exit_code == 0, second.stderr
        hits, scanned_mib = map(int, second.stdout.split())
        assert hits == 0 and scanned_mib > 50, second.stdout
        alive(sb)


# -- 2. SysV IPC is private -----------------------------------------------------------------------

IPC_CODE = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
r = [libc.shmget({key}, {size}, {flags}), ctypes.get_errno()]
if r[0] >= 0 and {write}:
    addr = libc.shmat(r[0], None, 0)
    ctypes.memset(addr, 0x41, {size})
r += [libc.msgget({key}, {flags}), ctypes.get_errno(), libc.semget({key}, 1, {flags}), ctypes.get_errno()]
print(*r)
"""
IPC_CREAT = 0o1000


def ipc_code(key: int, size: int, create: bool) -> str:
    return IPC_CODE.format(key=key, size=size, flags=(IPC_CREAT | 0o666) if create else 0, write=create)


def host_segment_keys() -> set[int]:
    with open("/proc/sysvipc/shm") as f:
        return {int(line.split()[0]) for line in f.readlines()[1:]}


def test_sysv_ipc_is_denied(sandbox):
    result = sandbox.run(ipc_code(IPC_KEY, 64 * 2**20, create=True))
    shm, shm_err, msg, msg_err, sem, sem_err = map(int, result.stdout.split())
    assert (shm, msg, sem) == (-1, -1, -1) and {shm_err, msg_err, sem_err} == {1}, result.stdout  # EPERM
    assert IPC_KEY not in host_segment_keys()
    alive(sandbox)


def test_without_seccomp_each_call_has_its_own_ipc_namespace():
    """The layer under seccomp: a segment of one call is gone in the next, host segments are invisible."""
    with Sandbox(2, limits=LIMITS, disable=("seccomp",)) as sb:
        if "ipcns" not in sb.layers:
            assert any("IPC namespace unavailable" in note for note in sb.notes)
            pytest.skip("no IPC namespace on this host (seccomp is the guard there)")
        libc = ctypes.CDLL(None, use_errno=True)
        host_key = IPC_KEY + 1
        host_id = libc.shmget(host_key, 4096, IPC_CREAT | 0o600)
        assert host_id >= 0
        try:
            made = sb.run(ipc_code(IPC_KEY, 64 * 2**20, create=True))
            assert int(made.stdout.split()[0]) >= 0, made.stdout + made.stderr
            for _ in range(2):  # the next call, on either slot
                seen = sb.run(ipc_code(IPC_KEY, 0, create=False))
                assert seen.stdout.split()[0:2] == ["-1", "2"], seen.stdout  # ENOENT
            host = sb.run(ipc_code(host_key, 0, create=False))
            assert host.stdout.split()[0:2] == ["-1", "2"], host.stdout
        finally:
            libc.shmctl(host_id, 0, None)  # IPC_RMID
        assert IPC_KEY not in host_segment_keys()
        alive(sb)
    assert IPC_KEY not in host_segment_keys()


# -- the whole suite once more, unprivileged ------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(not unprivileged.can_run(), reason="needs root and setpriv to drop to nobody")
def test_attack_suite_as_unprivileged_user():
    here = Path(__file__).parent
    attack_files = [str(here / f"test_sandbox_attacks_{part}.py") for part in ("isolation", "limits", "slots")]
    unprivileged.run_module_as_nobody(attack_files, min_passed=12)  # the layer report test included

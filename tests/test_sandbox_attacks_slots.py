"""The sandbox's slots against the attacks of issue 11 (items 4-6), on real processes: a slot heals itself,
start-up failures say why, slot uids never collide with real users. Each test asserts containment AND that the
next call works; ``tests/test_sandbox_attacks_isolation.py`` runs this module once more as nobody."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.support import sandbox_attacks, unprivileged
from tests.support.sandbox_attacks import LIMITS, alive
from vtb_env.sandbox import Limits, Sandbox, SandboxError, identity

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")

# the module-scoped sandbox, shared with the other attack files
sandbox = sandbox_attacks.sandbox

ROOT = unprivileged.ROOT
SETPRIV = unprivileged.SETPRIV


# -- 4. a slot heals itself --------------------------------------------------------------------------

DEEP_TREE = """
import os
for i in range(1500):
    name = "d" * 200 if i % 2 else "e"
    os.mkdir(name)
    os.chdir(name)
    open("f", "w").write("x")
    if i == 700:
        os.mkdir("locked")
        os.chmod("locked", 0)
        try:
            os.symlink("/etc", "link")  # landlock refuses symlinks; without it the cleanup must not follow one
        except OSError:
            pass
print("deep")
"""


@pytest.mark.parametrize("disable", [(), ("tmpfs",)], ids=["tmpfs", "host-disk"])
def test_deep_directory_tree_is_cleaned(disable):
    with Sandbox(1, limits=LIMITS, disable=disable) as sb:
        result = sb.run(DEEP_TREE, timeout_s=60)
        assert (result.exit_code, result.stdout) == (0, "deep\n"), result.stderr
        alive(sb)
        alive(sb)


def test_slot_restarts_after_its_server_or_zygote_dies(sandbox):
    alive(sandbox)
    slot = sandbox._slots[0]
    os.kill(slot.process.pid, signal.SIGKILL)
    slot.process.wait()
    alive(sandbox)  # a dead server is replaced before the next call
    zygote = _children_of(slot.process.pid)
    assert len(zygote) == 1
    os.kill(zygote[0], signal.SIGKILL)
    with pytest.raises(SandboxError, match="zygote"):
        sandbox.run("print(1)")
    alive(sandbox)


def _children_of(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


# -- 5. start-up failures say why ----------------------------------------------------------------------


def test_start_failure_quotes_the_servers_stderr():
    with Sandbox(1, preload=("vtb_no_such_module_for_the_test",)) as sb:
        with pytest.raises(SandboxError, match="No module named 'vtb_no_such_module_for_the_test'"):
            sb.run("print(1)")


def test_server_finds_the_parents_packages(tmp_path, monkeypatch):
    package = tmp_path / "vtb_probe_package"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 42\n")
    os.chmod(tmp_path, 0o755)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("VTB_SECRET_TOKEN", "sk-do-not-pass")
    with Sandbox(1, preload=("numpy", "vtb_probe_package"), limits=LIMITS) as sb:
        result = sb.run(
            "import sys, os; print(sys.modules['vtb_probe_package'].VALUE, 'VTB_SECRET_TOKEN' in os.environ)"
        )
        assert (result.exit_code, result.stdout) == (0, "42 False\n"), result.stderr


# -- 6. slot uids never collide with real users ----------------------------------------------------


def test_uid_claim_skips_users_subordinate_ranges_running_processes_and_other_pools(tmp_path):
    subuid = tmp_path / "subuid"
    subuid.write_text("builder:65531:2\n")
    locks = str(tmp_path / "locks")
    foreign = None
    if ROOT and SETPRIV:  # a process of a uid that has no passwd entry
        foreign = subprocess.Popen(["setpriv", "--reuid=65530", "--regid=65530", "--clear-groups", "sleep", "30"])
        time.sleep(0.2)
    try:
        first = identity.claim_slot_uid(0, base=65530, count=8, subordinate_files=[str(subuid)], lock_dir=locks)
        second = identity.claim_slot_uid(0, base=65530, count=8, subordinate_files=[str(subuid)], lock_dir=locks)
        # 65530 runs a process (when we could start one), 65531-65532 are subordinate, 65534 is nobody
        assert first.uid == (65533 if foreign else 65530) and second.uid not in (first.uid, 65531, 65532, 65534)
        first.release()
        again = identity.claim_slot_uid(0, base=65530, count=8, subordinate_files=[str(subuid)], lock_dir=locks)
        assert again.uid == first.uid
    finally:
        if foreign is not None:
            foreign.kill()
            foreign.wait()


@pytest.mark.skipif(not ROOT or not SETPRIV, reason="starting a process of another uid needs root and setpriv")
def test_leftover_sweep_never_kills_a_process_of_someone_else():
    seed = os.getpid() * 16
    expected = identity.UID_BASE + seed % identity.UID_COUNT  # the uid slot 0 of this process would take first
    foreign = subprocess.Popen(
        ["setpriv", f"--reuid={expected}", f"--regid={expected}", "--clear-groups", "sleep", "60"]
    )
    time.sleep(0.2)
    try:
        with Sandbox(1, limits=Limits(timeout_s=3.0, processes=32, allow_fork=True)) as sb:
            assert f"uid({expected})" not in sb.layers
            result = sb.run("import os, time\nif os.fork() == 0:\n    time.sleep(60)\nprint('left one behind')")
            assert result.leftover_processes >= 1
            alive(sb)
        assert foreign.poll() is None, "the sweep killed a process of another uid"
    finally:
        foreign.kill()
        foreign.wait()

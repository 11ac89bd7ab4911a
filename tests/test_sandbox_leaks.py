"""Nothing in the sandbox can reach a task or an answer: not by import, gc, files, environment or memory.

The fork server starts from ``vtb_env/sandbox/boot.py`` (a bare, sealed ``vtb_env`` package); these
tests run real sandbox processes, with every layer the host allows and with every optional layer
off (what an unprivileged host without landlock has), and read the server's and zygote's memory
from outside for a golden answer the test process holds.
"""

from __future__ import annotations

import json
import os
import re

import pytest

from vtb_env.loaders import load_tasks
from vtb_env.sandbox import Sandbox
from vtb_env.sandbox.isolation import OPTIONAL_LAYERS
from vtb_env.sandbox.landlock import readable_except
from vtb_env.sandbox.pool import project_dirs

PROBE = r"""
import gc, json, os, sys
project = ("vtb_env", "vtb_rewards", "vtb_agents", "vtb_app")
report = {"modules": sorted(m for m in sys.modules if m.split(".")[0] in project), "imports": {}}
for name in ("vtb_env.loaders", "vtb_env.synth", "vtb_env.tasks", "vtb_rewards", "vtb_agents", "vtb_app"):
    try:
        __import__(name)
        report["imports"][name] = "imported"
    except Exception as exc:
        report["imports"][name] = type(exc).__name__
sys.modules.pop("vtb_env", None)
try:
    import vtb_env
    report["reimport"] = "imported"
except Exception as exc:
    report["reimport"] = type(exc).__name__
golden = GOLDEN
types = {(type(o).__module__, type(o).__name__) for o in gc.get_objects()}
report["gc_types"] = sorted(
    f"{module}.{name}" for module, name in types
    if (module.split(".")[0] in project and not module.startswith("vtb_env.sandbox"))
    or name in ("Task", "Turn", "Rubric")
)
def strings(obj):
    return [v for v in (obj.values() if isinstance(obj, dict) else obj) if isinstance(v, str) and v is not golden]
containers = [o for o in gc.get_objects() if isinstance(o, (dict, list, tuple))]
report["gc_golden"] = any(golden in text for o in containers for text in strings(o))
report["environ"] = sorted(os.environ)
report["environ_golden"] = any(golden in value for value in os.environ.values())
print(json.dumps(report))
"""

ALLOWED_MODULES = re.compile(r"^vtb_env(\.sandbox(\.\w+)?)?$")


@pytest.fixture(scope="module")
def golden() -> str:
    """A golden answer this process holds in memory (the demo set is loaded here, never in the server)."""
    return load_tasks("demo")[0].turns[0].golden_answer


def _probe(sandbox: Sandbox, golden: str) -> dict:
    result = sandbox.run(PROBE.replace("GOLDEN", repr(golden[::-1]) + "[::-1]"))  # the code never holds it whole
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("disable", [(), OPTIONAL_LAYERS], ids=["all-layers", "no-optional-layers"])
def test_no_task_code_is_loaded_or_importable_in_the_sandbox(golden, disable):
    with Sandbox(1, disable=disable) as sandbox:
        report = _probe(sandbox, golden)
    assert report["modules"] and all(ALLOWED_MODULES.match(name) for name in report["modules"]), report["modules"]
    assert set(report["imports"].values()) == {"ModuleNotFoundError"}, report["imports"]
    assert report["reimport"] == "ModuleNotFoundError"
    assert report["gc_types"] == [] and not report["gc_golden"]
    assert report["environ"] == ["HOME", "LANG", "MPLBACKEND", "TMPDIR"] and not report["environ_golden"]


def _readable_memory(pid: int) -> bytes:
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("r"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            if end - start > 1 << 30:
                continue
            try:
                mem.seek(start)
                chunks.append(mem.read(end - start))
            except (OSError, ValueError, OverflowError):
                continue
    return b"".join(chunks)


def test_server_and_zygote_memory_hold_no_golden_answer(golden):
    marker = "vtb-leak-test-marker-" + os.urandom(6).hex()
    with Sandbox(1) as sandbox:
        assert sandbox.run(f"print({marker!r})").stdout.strip() == marker
        server = sandbox._slots[0].process.pid
        with open(f"/proc/{server}/task/{server}/children") as f:
            zygotes = [int(pid) for pid in f.read().split()]
        try:
            memories = {pid: _readable_memory(pid) for pid in [server, *zygotes]}
        except PermissionError:
            pytest.skip("this host does not let a process read its child's memory")
    assert marker.encode() in memories[server]  # the scan sees what the server did hold: the request's code
    for pid, memory in memories.items():
        assert golden.encode() not in memory, f"process {pid} holds a golden answer"
        assert b"vtb_env.synth" not in memory and b"vtb_env/loaders" not in memory


def test_project_files_are_unreadable_where_the_host_allows(golden):
    demo = os.path.join(next(d for d in project_dirs() if d.endswith("vtb_env")), "data", "demo", "tasks.jsonl")
    with Sandbox(1) as sandbox:
        if not {"landlock", "hidden(project)"} & {layer.split("(abi")[0].strip() for layer in sandbox.layers}:
            pytest.skip(f"no landlock and no mount rights here: {sandbox.notes}")
        result = sandbox.run(f"print(open({demo!r}).read(200))")
    assert result.exit_code != 0 and golden not in result.stdout
    assert "PermissionError" in result.stderr or "FileNotFoundError" in result.stderr


def test_readable_except_allows_a_root_less_the_hidden_directories(tmp_path):
    site = tmp_path / "site-packages"
    for name in ("numpy", "vtb_env/data", "PIL"):
        (site / name).mkdir(parents=True)
    (site / "six.py").write_text("")
    allowed = readable_except([str(tmp_path), "/usr"], [str(site / "vtb_env")])
    assert sorted(allowed) == sorted(["/usr", str(site / "PIL"), str(site / "numpy"), str(site / "six.py")])
    assert readable_except([str(site / "numpy")], [str(site / "vtb_env")]) == [str(site / "numpy")]

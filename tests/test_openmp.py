"""The CPU entry points set ``OMP_WAIT_POLICY=PASSIVE`` before torch loads, unless the user set it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Runs an entry point (a script's path or a module's name) with --help (argparse exits), then reports the variable.
PROBE = """
import os, runpy, sys
path = sys.argv[1]
sys.argv = [path, "--help"]
try:
    runpy.run_path(path, run_name="__main__") if path.endswith(".py") else runpy.run_module(path, run_name="__main__")
except SystemExit:
    pass
print("OMP_WAIT_POLICY=" + os.environ.get("OMP_WAIT_POLICY", "unset"))
"""


def _policy(entry_point: str, **env: str) -> str:
    environment = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"} | env
    command = [sys.executable, "-c", PROBE, entry_point]
    done = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.parametrize("entry_point", ["vtb_app.cli", "scripts/train_grpo.py", "scripts/learning_check.py"])
def test_entry_points_make_openmp_wait_passively(entry_point):
    assert _policy(entry_point) == "OMP_WAIT_POLICY=PASSIVE"


def test_a_policy_the_user_set_is_kept():
    assert _policy("vtb_app.cli", OMP_WAIT_POLICY="ACTIVE") == "OMP_WAIT_POLICY=ACTIVE"


def test_the_setting_comes_before_torch_loads():
    """The first thing the entry points import sets it: torch is not loaded yet at that point."""
    probe = "import vtb_app.openmp, sys; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "False"
    for path in ("vtb_app/cli.py", "scripts/train_grpo.py", "scripts/learning_check.py"):
        imports = [line for line in (ROOT / path).read_text().splitlines() if line.startswith(("import ", "from "))]
        assert imports[1].startswith("import vtb_app.openmp"), (path, imports[:2])  # after `from __future__`

"""Run a test module again as an unprivileged user (``nobody`` through ``setpriv``, no capabilities).

The host then refuses namespaces and uid switching, so the sandbox falls back to its degraded
profile; the module's tests check that each missing layer is reported and that what remains holds.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

ROOT = os.geteuid() == 0
SETPRIV = shutil.which("setpriv")  # util-linux: starts processes of other uids without privileges
MARKER = "VTB_ATTACKS_UNPRIVILEGED"  # set in the unprivileged run: its module must not recurse
UNPRIVILEGED_RUN = MARKER in os.environ
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_LAUNCHER = """
import os, sys
from vtb_env.sandbox import _libc, namespaces
_libc.unshare(_libc.CLONE_NEWNS)  # only to make a 0700 /root (the interpreter's home) passable for nobody
_libc.mount(None, "/", None, _libc.MS_REC | _libc.MS_PRIVATE)
namespaces.reveal(sorted({sys.base_prefix, sys.prefix}))
os.execv(SETPRIV, ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
         "--bounding-set=-all", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         "-k", "not unprivileged_user", TEST_FILE])
"""


def can_run() -> bool:
    return ROOT and SETPRIV is not None and not UNPRIVILEGED_RUN


def run_module_as_nobody(test_file: str | list[str], min_passed: int) -> None:
    """Run ``test_file`` (one path or several, in one pytest run; without their ``*unprivileged_user`` test) as
    nobody; assert at least ``min_passed`` tests passed and none failed."""
    test_files = [test_file] if isinstance(test_file, str) else test_file
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": REPO,
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": "/tmp",
        MARKER: "1",
        "LANG": "C.UTF-8",
    }
    paths = ", ".join(repr(os.path.abspath(path)) for path in test_files)
    code = _LAUNCHER.replace("TEST_FILE", paths).replace("SETPRIV", repr(SETPRIV))
    run = subprocess.run([sys.executable, "-c", code], cwd="/tmp", env=env, capture_output=True, text=True, timeout=300)
    tail = (run.stdout + run.stderr)[-3000:]
    assert run.returncode == 0, tail
    passed = re.search(r"(\d+) passed", tail)
    assert passed and int(passed.group(1)) >= min_passed and "failed" not in tail, tail

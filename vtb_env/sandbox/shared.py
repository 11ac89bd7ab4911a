"""This process's shared pools, one per profile, started lazily and closed at exit.

``shared_sandbox(profile)`` returns the pool for a profile ("image": PIL, NumPy, OpenCV;
"interpreter": the same plus pandas, SciPy, SymPy, scikit-learn, tabulate and BeautifulSoup).
A process made by fork (e.g. a gymnasium AsyncVectorEnv worker) forgets its parent's pools and
starts its own.
"""

from __future__ import annotations

import atexit
import os
import threading

from vtb_env.sandbox.pool import IMAGE_MODULES, Sandbox

INTERPRETER_MODULES = IMAGE_MODULES + (
    "pandas",
    "scipy",
    "scipy.stats",
    "scipy.optimize",
    "sympy",
    "sklearn",
    "tabulate",
    "bs4",
    "math",
    "statistics",
    "fractions",
    "decimal",
    "json",
    "datetime",
    "collections",
    "itertools",
    "re",
)
PROFILES = {"image": IMAGE_MODULES, "interpreter": INTERPRETER_MODULES}

_shared: dict[str, Sandbox] = {}
_shared_lock = threading.Lock()
_shared_pid = os.getpid()


def shared_sandbox(profile: str = "image", slots: int | None = None) -> Sandbox:
    """This process's pool for ``profile`` (created on first use, closed at exit)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown sandbox profile {profile!r}; choose from {sorted(PROFILES)}")
    with _shared_lock:
        if profile not in _shared:
            _shared[profile] = Sandbox(slots, preload=PROFILES[profile])
        return _shared[profile]


@atexit.register
def close_shared() -> None:
    """Close this process's shared pools (at exit; a forked child leaves its parent's alone)."""
    if os.getpid() != _shared_pid:
        return
    for sandbox in list(_shared.values()):
        sandbox.close()
    _shared.clear()


def _after_fork_in_child() -> None:
    global _shared_lock, _shared_pid
    _shared_lock = threading.Lock()
    _shared_pid = os.getpid()
    for sandbox in _shared.values():
        sandbox.forget()
    _shared.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)

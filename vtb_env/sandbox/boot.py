"""The fork server's entry point: it holds the sandbox's own modules and none of the project's task code.

The pool runs this file by path (``python -S -P .../vtb_env/sandbox/boot.py '<json config>'``), never
``python -m vtb_env.sandbox.server``: importing any module of the ``vtb_env`` package would run
``vtb_env/__init__.py``, which imports the loaders and, through them, the synthetic generator,
and model code in the sandbox could then call ``vtb_env.load_tasks`` or walk the generator's
objects for answers. Instead this script registers ``vtb_env`` as a bare package (its ``__init__``
never runs), imports ``vtb_env.sandbox.server`` (the sandbox modules only: ``tests/test_sandbox_leaks.py``
checks the list), then *seals* the bare package (empty ``__path__``), so no further ``vtb_env``
submodule can be found by name in the server, its zygote or any child. ``-S`` runs no ``.pth`` file
(an editable install's finder maps ``vtb_env`` to its sources), the pool leaves the project's source
roots off the server's ``PYTHONPATH``, and the server's landlock ruleset leaves the project's package
directories (and their data) unreadable (see ``isolation.setup``). Left on a host with neither landlock
nor mount rights: a child that knows where the sources lie can still read them as files.
"""

from __future__ import annotations

import importlib.util
import os
import site
import sys
import types

PROJECT_PACKAGE = "vtb_env"
BOOT_SCRIPT = os.path.abspath(__file__)
# The project's top-level packages: task code, loaders, generator, rewards, data. The server never
# imports them and its children can neither import nor read them (see isolation.setup).
PROJECT_PACKAGES = ("vtb_env", "vtb_rewards", "vtb_agents", "vtb_app")


def server_python_path() -> str:
    """The server's ``PYTHONPATH``: this interpreter's ``sys.path`` less the project's source roots."""
    source_roots = {os.path.dirname(path) for path in project_dirs()} - {_site_dir(p) for p in sys.path}
    entries = [
        p for p in sys.path if os.path.isabs(p) and os.path.exists(p) and os.path.realpath(p) not in source_roots
    ]
    return os.pathsep.join(dict.fromkeys(entries))


def clean_environment() -> dict[str, str]:
    """The fork server's whole environment: no keys, tokens or user settings reach it.

    ``PYTHONPATH`` is this interpreter's own ``sys.path`` entries (paths, not secrets), so the server
    imports the same libraries as the process that started it, less the project's source roots."""
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": "/nonexistent",
        "PYTHONPATH": server_python_path(),
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "MPLBACKEND": "Agg",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        # glibc reserves 64 MiB of address space per malloc arena, and how many a call's threads create
        # depends on how they happen to interleave: two arenas make RLIMIT_AS measure what the code allocates
        "MALLOC_ARENA_MAX": "2",
    }


def _site_dir(path: str) -> str:
    """``path`` when it is an installation directory (site- or dist-packages), which other libraries share."""
    return os.path.realpath(path) if os.path.basename(path) in ("site-packages", "dist-packages") else ""


def project_dirs() -> list[str]:
    """The directories of the project's packages (real paths), found without importing any of them."""
    found = []
    for name in PROJECT_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            found.extend(os.path.realpath(path) for path in spec.submodule_search_locations)
    return sorted(set(found))


def _bare_package(name: str, path: str) -> types.ModuleType:
    """A package module that finds submodules in ``path`` without executing the package's ``__init__``."""
    module = types.ModuleType(name, f"{name} as seen by the sandbox: the sandbox modules only")
    module.__path__ = [path]
    module.__package__ = name
    sys.modules[name] = module
    return module


def _as_site_would() -> None:
    """What ``-S`` leaves out that the server needs: ``sys.prefix`` in a virtual environment (the server's
    landlock rules allow reading the interpreter's prefixes), and the ``exit``/``help`` builtins code may call."""
    for builtin in (site.setquit, site.setcopyright, site.sethelper):
        builtin()
    exe_dir = os.path.dirname(sys.executable)
    for candidate in (exe_dir, os.path.dirname(exe_dir)):
        if os.path.isfile(os.path.join(candidate, "pyvenv.cfg")):
            sys.prefix = sys.exec_prefix = candidate
            return


def main() -> None:
    _as_site_would()
    sandbox_dir = os.path.dirname(os.path.abspath(__file__))
    package = _bare_package(PROJECT_PACKAGE, os.path.dirname(sandbox_dir))
    from vtb_env.sandbox import server  # the package __init__ of vtb_env.sandbox: pool, limits, server, protocol

    package.__path__ = []  # sealed: nothing else of the project can be imported by name from here on
    server.main()


if __name__ == "__main__":
    main()

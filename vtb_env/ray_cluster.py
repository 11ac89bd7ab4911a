"""Connecting to Ray (an optional extra: ``pip install 'vtb-gym[ray]'``), imported only when used.

``connect`` joins an existing cluster (``address``: ``auto``, ``HOST:PORT`` or
``ray://HOST:PORT``) or starts a local one. A local one is kept off the user's home and temp
directories as far as Ray allows: its session files, sockets, logs and spilled objects go to
``temp_dir`` (``$VTB_RAY_TEMP_DIR``, else ``/tmp/vtb-ray-<uid>``: Ray's unix sockets must fit in
107 bytes, so a deep run directory cannot hold them), no dashboard is started, and the
authentication token Ray would write to ``~/.ray/auth_token`` is passed in the environment
instead (token authentication stays on). A cluster that is already connected (a trainer that
called ``ray.init`` itself, verl) is used as it is.
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path
from typing import Any

INSTALL_HINT = "Ray is not installed: pip install 'vtb-gym[ray]' (or pip install ray)"
_TOKEN_SOURCES = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")
MAX_TEMP_DIR_CHARS = 60  # Ray appends session_<date>_<pid>/sockets/plasma_store (~60 chars) to it
PROBE_TIMEOUT_S = 10.0  # a cluster address must accept a TCP connection within this


def import_ray() -> Any:
    """The ``ray`` module, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(INSTALL_HINT) from exc
    return ray


def default_temp_dir() -> Path:
    return Path(os.environ.get("VTB_RAY_TEMP_DIR") or f"/tmp/vtb-ray-{os.getuid()}")


def keep_token_off_home() -> None:
    """Give a new local cluster its auth token in the environment (children inherit it) instead of ``~/.ray``."""
    if any(name in os.environ for name in _TOKEN_SOURCES) or (Path.home() / ".ray" / "auth_token").exists():
        return
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def connect(
    address: str | None = None,
    *,
    temp_dir: str | Path | None = None,
    num_cpus: int | None = None,
    log_to_driver: bool = False,
    **init_options: Any,
) -> Any:
    """Initialise Ray once per process and return the module; see the module docstring.

    ``num_cpus`` applies to a new local cluster only; ``log_to_driver`` forwards the actors'
    stdout/stderr to this process (off by default: the progress bar and the tables stay readable).
    """
    ray = import_ray()
    if ray.is_initialized():
        return ray
    options: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": log_to_driver,
        "configure_logging": False,
        **init_options,
    }
    if address:
        probe(address)
        ray.init(address=address, **options)
        return ray
    directory = Path(temp_dir) if temp_dir else default_temp_dir()
    directory = directory.resolve()
    if len(str(directory)) > MAX_TEMP_DIR_CHARS:
        raise ValueError(
            f"Ray temp dir {directory} is longer than {MAX_TEMP_DIR_CHARS} characters: "
            "Ray's unix socket paths would not fit; choose a shorter --ray-temp-dir"
        )
    directory.mkdir(parents=True, exist_ok=True)
    keep_token_off_home()
    ray.init(num_cpus=num_cpus, _temp_dir=str(directory), **options)
    return ray


def probe(address: str) -> None:
    """``ConnectionError`` unless a ``HOST:PORT`` (or ``ray://HOST:PORT``) address accepts a TCP connection
    within ``PROBE_TIMEOUT_S``: ``ray.init`` retries an unreachable cluster for minutes. Other addresses
    (``auto``, ``local``) are Ray's to resolve."""
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT_S):
            pass
    except (OSError, OverflowError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        raise ConnectionError(f"the Ray cluster at {address} cannot be reached: {reason}") from None


def alive_cpu_nodes(ray: Any) -> list[tuple[str, int]]:
    """(node id, CPUs) of every alive node that has CPUs, in a stable order."""
    nodes = [(node["NodeID"], int(node["Resources"].get("CPU", 0))) for node in ray.nodes() if node.get("Alive")]
    return sorted((node_id, cpus) for node_id, cpus in nodes if cpus > 0)

"""How the ``vtb`` command reports errors: one line on stderr and an exit code per kind, no traceback.

``vtb_app.cli.main`` sends whatever a subcommand raises through ``describe``; ``--debug`` (any
subcommand) or ``VTB_DEBUG=1`` shows the traceback instead. A run that finished with failed
items prints ``error_kinds``: the failures counted by kind, with the first message of each.

| code | meaning |
|---|---|
| 0 | done |
| 1 | the command ran, some of its items failed (the summary says which kinds) |
| 2 | a bad argument or spec (argparse's too, on one line), a run in the way, `vtb serve` unable to listen |
| 3 | an optional dependency is missing: the message names the extra to install |
| 4 | a path that does not exist or cannot be read or written |
| 5 | a dataset, run or results file that cannot be read |
| 6 | a server (agent, judge, Ray) that cannot be reached |
| 70 | an internal error (a bug): one line, the traceback with ``--debug`` |
| 130 | interrupted |
"""

from __future__ import annotations

import importlib.util
import re
from collections import Counter
from enum import IntEnum
from typing import Iterable


class ExitCode(IntEnum):
    OK = 0
    FAILED_ITEMS = 1
    USAGE = 2
    MISSING_EXTRA = 3
    NOT_FOUND = 4
    BAD_DATA = 5
    UNREACHABLE = 6
    INTERNAL = 70
    INTERRUPTED = 130


# Optional packages -> the extra of pyproject.toml that installs them.
EXTRAS = {
    "matplotlib": "eval",
    "jinja2": "eval",
    "torch": "hf",
    "transformers": "hf",
    "datasets": "hf",
    "accelerate": "hf",
    "trl": "train",
    "ray": "ray",
    "openenv": "serve",
    "fastapi": "serve",
    "uvicorn": "serve",
    "verifiers": "verifiers",
    "skyrl_gym": "skyrl",
}
# Extras that cannot join a venv holding another package: extra -> (that package, why, the command that makes the
# venv the extra needs). The advice to `pip install` such an extra where the other is installed would break the venv.
CLASHES = {
    "serve": (
        "verifiers",
        "openenv needs mcp < 2, verifiers pins mcp 2.0.0",
        "bash scripts/setup_serve.sh (in a checkout; it makes .venv-serve), or: python3 -m venv .venv-serve && "
        '.venv-serve/bin/pip install "vtb-gym[serve]", then run .venv-serve/bin/vtb',
    ),
}
# Exception names that mean a server was not reached (httpx, openai, the standard library, Ray).
UNREACHABLE_KINDS = frozenset(
    {
        "ConnectError",
        "ConnectTimeout",
        "APIConnectionError",
        "APITimeoutError",
        "ConnectionError",
        "ConnectionRefusedError",
        "ConnectionResetError",
        "RaySystemError",
    }
)
# Errors that say a file's content is wrong (each names its file): exit 5.
DATA_ERROR_KINDS = frozenset(
    {
        "DatasetError",
        "ToolkitFormatError",
        "JSONDecodeError",
        "UnicodeDecodeError",
        "ImageDecodeError",
        "CacheFileError",
        "RunFileError",
    }
)
MAX_LINE = 600


def one_line(text: str) -> str:
    """``text`` on one line (whitespace collapsed), cut at MAX_LINE characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= MAX_LINE else line[: MAX_LINE - 3] + "..."


def describe(exc: BaseException, command: str) -> tuple[ExitCode, str]:
    """The exit code and the one-line message for what ``vtb <command>`` raised."""
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED, "interrupted"
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return ExitCode.MISSING_EXTRA, _missing(exc.name.split(".")[0], command)
    if isinstance(exc, ImportError) and "not installed" in str(exc):  # a message that already says what to install
        return ExitCode.MISSING_EXTRA, one_line(exc)
    if isinstance(exc, (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)):
        return ExitCode.NOT_FOUND, one_line(_os_error(exc))
    if isinstance(exc.__cause__, FileNotFoundError):  # e.g. a results file that is not there
        return ExitCode.NOT_FOUND, one_line(exc)
    kind = type(exc).__name__
    if kind in UNREACHABLE_KINDS or isinstance(exc, ConnectionError):
        return ExitCode.UNREACHABLE, one_line(f"a server could not be reached: {kind}: {exc}")
    if kind in ("SpecError", "DatasetSpecError", "RunConflictError", "ArgumentTypeError"):
        return ExitCode.USAGE, one_line(exc)
    if kind in DATA_ERROR_KINDS:
        return ExitCode.BAD_DATA, one_line(exc)
    if isinstance(exc, OSError):  # a disk full, a device gone: the system's message says it
        return ExitCode.NOT_FOUND, one_line(_os_error(exc))
    return ExitCode.INTERNAL, one_line(f"internal error: {kind}: {exc} (run with --debug for the traceback)")


def _missing(package: str, command: str) -> str:
    extra = EXTRAS.get(package)
    clash = CLASHES.get(extra or "")
    if clash is not None and importlib.util.find_spec(clash[0]) is not None:  # the plain install would break this venv
        return (
            f"vtb {command} needs the package {package!r}, which is not installed; its extra {extra!r} cannot share "
            f"this venv ({clash[1]}): make a venv of its own with {clash[2]}"
        )
    install = f'pip install "vtb-gym[{extra}]"' if extra else f"pip install {package}"
    return f"vtb {command} needs the package {package!r}, which is not installed: {install}"


def _os_error(exc: OSError) -> str:
    if exc.filename is None:
        return str(exc)
    target = f"{exc.filename} -> {exc.filename2}" if exc.filename2 else str(exc.filename)
    return f"{target}: {exc.strerror or exc}"


_KIND = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Timeout|Interrupt))\b")


def error_kind(message: str) -> str:
    """The kind of a recorded error: the innermost exception name it quotes (``AgentCallError: openai:m:
    ConnectError: ...`` is a ConnectError), else its text before the first colon."""
    names = _KIND.findall(message)
    if names:
        return names[-1]
    return message.split(":", 1)[0].strip()[:60] or "error"


def error_kinds(messages: Iterable[str]) -> list[str]:
    """One line per kind of error, most frequent first: ``2 x ConnectError, first: <message>``."""
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for message in messages:
        kind = error_kind(message)
        counts[kind] += 1
        first.setdefault(kind, message)
    return [f"{count} x {kind}, first: {one_line(first[kind])}" for kind, count in counts.most_common()]


def all_unreachable(messages: list[str]) -> bool:
    """Every failure was a server that could not be reached (nothing else went wrong)."""
    return bool(messages) and all(error_kind(message) in UNREACHABLE_KINDS for message in messages)

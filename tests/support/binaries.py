"""System programs that some tests need: skipped on a developer machine without them, a failure under CI.

``scripts/setup.sh`` installs tesseract and chromium, and CI (``CI=true``) runs it first, so a
missing program there is a broken set-up that must not pass as a skip.
"""

from __future__ import annotations

import os
import shutil

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require(available: bool, what: str) -> None:
    """Skip the calling test when ``what`` is missing; under CI, fail it instead."""
    if available:
        return
    message = f"{what} is not installed (scripts/setup.sh installs it)"
    if in_ci():
        pytest.fail(f"{message}; CI=true, so this is a failure, not a skip", pytrace=False)
    pytest.skip(message)


def require_binary(*names: str) -> str:
    """The path of the first of ``names`` on PATH; see ``require`` for when none is there."""
    path = next((found for found in map(shutil.which, names) if found), None)
    require(path is not None, " or ".join(names))
    return path  # type: ignore[return-value]

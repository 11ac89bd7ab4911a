"""What the sandbox attack tests share: their limits, a module-scoped sandbox of one slot, and the check that a
pool still answers normally."""

from __future__ import annotations

import pytest

from vtb_env.sandbox import Limits, Sandbox

LIMITS = Limits(timeout_s=3.0, memory_mb=1024, file_size_mb=8, disk_mb=64, processes=32)


@pytest.fixture(scope="module")
def sandbox():
    """A started sandbox of one slot under ``LIMITS``, shared by a module's tests."""
    with Sandbox(1, limits=LIMITS) as sb:
        sb.start()
        yield sb


def alive(sb: Sandbox) -> None:
    """The pool answers the next call normally and the work dir starts empty."""
    result = sb.run("import os; print(sorted(os.listdir('.')), 6 * 7)")
    assert (result.exit_code, result.stdout) == (0, "[] 42\n"), result.stderr

"""tests.support.binaries: a missing system program skips a test locally and fails it under CI."""

from __future__ import annotations

import pytest

from tests.support.binaries import require_binary


def test_a_missing_program_skips_locally_and_fails_under_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-such-program-vtb is not installed"):
        require_binary("no-such-program-vtb")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        require_binary("no-such-program-vtb")
    assert require_binary("no-such-program-vtb", "sh").endswith("/sh")  # the first one found wins

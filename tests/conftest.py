"""Fixtures shared by the test suite."""

from __future__ import annotations

import os

import pytest

from tests.support.binaries import require, require_binary


@pytest.fixture(scope="session")
def chromium() -> str:
    """Path of headless-capable Chromium (skip without it; fail under CI)."""
    return require_binary("chromium", "chromium-browser")


@pytest.fixture(scope="session")
def tesseract() -> None:
    """Tesseract OCR through ``vtb_env.ocr`` (skip without it; fail under CI). Use as ``usefixtures("tesseract")``."""
    from vtb_env import ocr

    require(ocr.is_available(), "tesseract (OCR)")


@pytest.fixture
def exact_rubric_checks_only(monkeypatch):
    """The env's default reward judges with VTB_JUDGE_* when set: a test that uses this fixture (``pytestmark =
    pytest.mark.usefixtures("exact_rubric_checks_only")``) scores with exact checks only, whatever the shell says."""
    for name in [n for n in os.environ if n.startswith("VTB_JUDGE")]:
        monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def chatml_path(tmp_path_factory):
    """A tiny ChatML Llama checkpoint (``tests.support.chatml_model``), built once for the session."""
    from tests.support.chatml_model import build_chatml_model

    return build_chatml_model(tmp_path_factory.mktemp("chatml"))

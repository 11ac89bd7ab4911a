"""Fixtures shared by the test suite."""

from __future__ import annotations

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

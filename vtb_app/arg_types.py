"""Argument types of the ``vtb`` command: numbers within a closed range, so that a bad value is a usage error
(one line, exit 2) before anything runs, never an internal error later or a silent replacement."""

from __future__ import annotations

import argparse
import math
from typing import Callable


def integer(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer in ``[low, high]`` (``high`` None: no upper bound)."""
    span = f"from {low} to {high}" if high is not None else f"of at least {low}"

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer {span}, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected an integer {span}, got {text!r}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


def number(low: float, high: float) -> Callable[[str], float]:
    """A finite number in ``[low, high]`` (NaN and infinities refused)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and low <= value <= high):
            raise argparse.ArgumentTypeError(f"expected a number from {low:g} to {high:g}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


PORT = integer(0, 65535)  # 0: any free port (the server prints the one it got)

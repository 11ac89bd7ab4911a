"""OpenMP's passive wait for the project's CPU entry points: imported first, before torch loads.

With OpenMP's default spin-wait, a torch thread that finishes its share of an operation keeps
spinning on its core; on a shared or loaded machine the spinning threads starve the ones still
working. Measured on 2 busy cores (2026-11-28, issue 40): a 4 x 96-token ``generate`` of
SmolLM2-135M took 223 s wall / 71 CPU-s with the default and 13 s / 3.0 CPU-s with
``OMP_WAIT_POLICY=PASSIVE``. OpenMP reads the variable once, when torch's runtime loads, so this module
sets it at import (only when the user has not set it) and the entry points (``vtb``,
``scripts/train_grpo.py``, ``scripts/learning_check.py``) import it before anything that imports torch.
"""

from __future__ import annotations

import os

VARIABLE, PASSIVE = "OMP_WAIT_POLICY", "PASSIVE"


def passive_wait_policy() -> str:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless it is set; returns the value in force."""
    return os.environ.setdefault(VARIABLE, PASSIVE)


passive_wait_policy()

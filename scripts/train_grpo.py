"""GRPO on VisualToolBench with TRL: multi-turn, tool-using rollouts in the real environment.

    python scripts/train_grpo.py --model PATH --tasks synth:64:0 --num-generations 4 --max-steps 100

A thin entry point: the trainer pieces live in ``vtb_app.integrations.trl`` (``train``,
``parse_args``, ``EnvRollout``, ...). See docs/training.md.
"""

from __future__ import annotations

import vtb_app.openmp  # noqa: F401  (OMP_WAIT_POLICY=PASSIVE before torch loads)

# isort: split
from vtb_app.integrations.trl import main

if __name__ == "__main__":
    main()

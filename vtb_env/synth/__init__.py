"""Procedural VisualToolBench-style tasks with exact answers (see docs/synth.md).

- ``generate_pair(seed, index, ...)``: one tool-required task and its tool-redundant twin
  (``generator="v3"``, the default: the same pages and print in both twins, only reading tells the label;
  ``"v2"``: one shared photo, only the key pages differ; ``"v1"``: the first generator);
- ``generate(n, seed, mix)`` / ``stream(seed, mix)``: a batch / an endless RL stream;
- ``demo_tasks()``: the bundled demo set (written by ``vtb synth --demo``);
- ``probe``: OCR measurement of whether tool-required tasks really need the tools.
"""

from vtb_env.synth.stream import DEMO_SEED, demo_tasks, generate, generate_pair, stream
from vtb_env.synth.twins import TOOL_REDUNDANT, TOOL_REQUIRED

__all__ = ["DEMO_SEED", "TOOL_REDUNDANT", "TOOL_REQUIRED", "demo_tasks", "generate", "generate_pair", "stream"]

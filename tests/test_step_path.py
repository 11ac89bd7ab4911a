"""docs/architecture.md's "One step()" names the files a step passes through: each of them runs in that step.

``scripts/trace_step.py`` plays the page's episode (a vision call in the hermes format, then the final answer)
with every Python call watched; a file the page names in bold that no longer runs (moved, renamed, bypassed)
fails here, so the page cannot drift from the code.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOLD_PATH = re.compile(r"\*\*`([\w/.]+\.py)`\*\*")


def _step_section() -> str:
    page = (ROOT / "docs" / "architecture.md").read_text()
    start = page.index("## One `step()`, from action text to reward")
    end = page.find("\n## ", start + 1)
    return page[start : end if end != -1 else len(page)]


def _trace_step():
    spec = importlib.util.spec_from_file_location("trace_step", ROOT / "scripts" / "trace_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_file_the_page_puts_on_the_path_runs_in_the_step():
    named = BOLD_PATH.findall(_step_section())
    assert len(named) >= 5 and all((ROOT / path).is_file() for path in named), named
    steps = _trace_step().trace_episode()
    assert "vtb_env/sandbox/pool.py" in steps["call"] and "rewards/compose.py" in steps["answer"]
    ran = set(steps["call"]) | set(steps["answer"])
    assert [path for path in named if path not in ran] == []

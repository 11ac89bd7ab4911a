"""Project-format tasks and scripted chat replies for the `vtb` CLI evaluation tests."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from PIL import Image

from vtb_app.cli import main

TASK_TAG = re.compile(r"\[(t\d+)\]")


def write_tasks(
    root: Path, n: int, *, domains=("finance",), checks: bool = True, key_steps=(), turns: int = 1, images: int = 1
) -> Path:
    """``n`` project-format tasks ``t0..``: "[tI] What is the total?", golden answer 9."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    for k in range(images):
        Image.new("RGB", (64, 48), (40 * k, 90, 160)).save(root / "images" / f"img{k}.png")
    rubric = {
        "description": "states that the total is 9",
        "weight": 5,
        **({"check": {"type": "number", "value": 9}} if checks else {}),
    }
    with open(root / "tasks.jsonl", "w") as handle:
        for i in range(n):
            turn = {
                "prompt": f"[t{i}] What is the total?",
                "images": [f"img{k}.png" for k in range(images)],
                "golden_answer": "9",
                "rubrics": {"r1": rubric},
                "key_steps": list(key_steps),
            }
            handle.write(
                json.dumps(
                    {
                        "id": f"t{i}",
                        "prompt_category": domains[i % len(domains)],
                        "eval_focus": "region_switch_qa",
                        "turns": [turn] + [{**turn, "images": []} for _ in range(turns - 1)],
                    }
                )
                + "\n"
            )
    return root


def text_of(message: dict[str, Any]) -> str:
    """The text of a chat message, whether its content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def task_of(request: dict[str, Any]) -> str:
    """The task id (``tI``) a chat request is about, read from its ``[tI]`` tag."""
    return next(m.group(1) for message in request["messages"] if (m := TASK_TAG.search(text_of(message))))


def answers(text: str = "The total is 9."):
    """A chat-server responder that always replies ``text``."""
    return lambda request: {"content": text}


def verdict(met: bool) -> dict[str, Any]:
    """A judge reply: Met or Not Met."""
    return {"content": json.dumps({"explanation": "checked", "judge_result": "Met" if met else "Not Met"})}


def vtb(*args: Any) -> int:
    """Runs the `vtb` CLI in process; returns its exit code."""
    return main([str(a) for a in args])


def summary_of(report: Path) -> dict[str, Any]:
    """The first run's summary in a report directory."""
    return json.loads((report / "summary.json").read_text())["runs"][0]

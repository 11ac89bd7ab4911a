"""Is "tool-required" really required? An OCR probe over generated tasks.

For a tool-required task the probe reads each key fact (``metadata["key_facts"]``) in the
original image, then runs the turn's reference ``python_image_processing`` code in a temporary
working directory (in-process) and reads the images it saved. For a tool-redundant twin it
reads the original images only. A fact is read when its value is found and, where the fact names
its row (v3's ``names``: the row's label as printed, a map leg's two towns), those names too: a value
nobody can tie to the asked row is not read.

``reader`` (image -> text) replaces the engine: a caller with its own readings (the learning
check's OCR cache) probes with exactly the words its policy is shown.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from PIL import Image

from vtb_env import ocr
from vtb_env.image_names import TOOL_IMAGE_NAME
from vtb_env.synth.twins import TOOL_REQUIRED
from vtb_env.tasks import Task
from vtb_env.toolsets import VISION_TOOL


@dataclass(frozen=True)
class ProbeResult:
    task_id: str
    mode_label: str
    facts: int
    read_before: int  # key facts the OCR reads in the original images
    read_after: int  # key facts it reads in the reference code's output (tool-required only)

    @property
    def needs_tools(self) -> bool:
        """Some key fact is unreadable as shown and all are readable after the reference code."""
        return self.read_before < self.facts and self.read_after == self.facts

    @property
    def readable_directly(self) -> bool:
        return self.read_before == self.facts


def run_reference_code(task: Task, workdir: Path) -> dict[int, list[Path]]:
    """Execute every turn's ``python_image_processing`` code; returns the images each turn saved."""
    for image in task.images:
        (workdir / image.name).write_bytes(image.read_bytes())
    saved: dict[int, list[Path]] = {}
    with contextlib.chdir(workdir):
        for t, turn in enumerate(task.turns):
            before = _tool_images(workdir)
            for call in json.loads(turn.tool_trajectory_raw or "[]"):
                if call["tool"] == VISION_TOOL:
                    exec(
                        compile(call["arguments"]["code"], f"<{task.id} turn {t + 1}>", "exec"),
                        {"__name__": "__main__"},
                    )
            new = _tool_images(workdir) - before
            saved[t] = sorted(new, key=lambda path: int(TOOL_IMAGE_NAME.fullmatch(path.name).group(1)))
    return saved


def _tool_images(workdir: Path) -> set[Path]:
    return {path for path in workdir.iterdir() if TOOL_IMAGE_NAME.fullmatch(path.name)}


def fact_read(text: str, fact: Mapping[str, Any]) -> bool:
    """Does ``text`` show the key fact: its value, and every printed name of its row where the fact has them?"""
    return ocr.contains(text, fact["text"]) and all(ocr.contains(text, name) for name in fact.get("names", ()))


def probe_task(
    task: Task, engine: ocr.OcrEngine | None = None, reader: Callable[[Image.Image], str] | None = None
) -> ProbeResult:
    """Key facts read as shown, and (tool-required) after the reference code, by ``reader`` or ``engine``."""
    facts = task.metadata.get("key_facts", [])
    images = {image.name: image for image in task.images}
    read_image = reader or (lambda image: ocr.text_of(image, engine))
    seen: dict[str, str] = {}

    def read(name: str, path: Path | None = None) -> str:
        if name not in seen:
            with Image.open(path) if path else images[name].open() as image:
                image.load()
                seen[name] = read_image(image)
        return seen[name]

    before = sum(fact_read(read(f["image"]), f) for f in facts)
    after = 0
    if task.mode_label == TOOL_REQUIRED:
        with tempfile.TemporaryDirectory(prefix="vtb-probe-") as tmp:
            outputs = run_reference_code(task, Path(tmp))
            for fact in facts:
                texts = [read(f"{task.id}/{p.name}", p) for p in outputs.get(fact["turn"], [])]
                after += any(fact_read(text, fact) for text in texts)
    return ProbeResult(task.id, task.mode_label or "", len(facts), before, after)


def confirms_label(result: ProbeResult) -> bool:
    """The reader agrees with the task's mode label: a tool-required task needs the tools (some key fact
    unread as shown, all read after the reference code), a tool-redundant one has every key fact read as shown."""
    return result.needs_tools if result.mode_label == TOOL_REQUIRED else result.readable_directly


def summarize_probes(results: Iterable[ProbeResult]) -> dict[str, float]:
    """The headline shares: tool-required tasks that need the tools, twins read directly."""
    results = list(results)
    required = [r for r in results if r.mode_label == "tool_required"]
    redundant = [r for r in results if r.mode_label == "tool_redundant"]
    share = lambda flags: round(sum(flags) / len(flags), 3) if flags else float("nan")  # noqa: E731
    return {
        "tool_required": len(required),
        "required_unreadable_before": share([r.read_before < r.facts for r in required]),
        "required_readable_after": share([r.read_after == r.facts for r in required]),
        "required_needs_tools": share([r.needs_tools for r in required]),
        "tool_redundant": len(redundant),
        "redundant_readable_directly": share([r.readable_directly for r in redundant]),
    }

"""The learning check's policies: the reading policy, its question-blind control and the pixel policy.

- ``text``: ``vtb_agents.two_action_text`` over the question and the OCR words of the pictures
  (``vtb_env.ocr_view.OcrView``);
- ``text-no-question``: the same policy shown the pages' words alone (the control: what a reader
  learns without the question);
- ``vlm``: ``vtb_agents.two_action_vlm``, the pixel policy (the other control).

All three reply with the same two action tokens and train through the same env, SFT export and TRL
loop; only what they are shown differs. The text policies read through the process-wide OCR cache
(``vtb_env.ocr_view.default_cache``), which ``prepare_reading`` fills before the run: every task
image, and what the ``CALL`` action's zoom will show of each task's first image.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any, Sequence

from vtb_agents.two_action_text import build_two_action_text
from vtb_agents.two_action_vlm import build_two_action_vlm, zoomed
from vtb_env.ocr_view import default_cache
from vtb_env.tasks import Task

POLICIES = ("text", "text-no-question", "vlm")
TEXT_VIEWS = {"text": "ocr", "text-no-question": "ocr-pages"}
# (SFT, GRPO) learning rates. The reading policy's were measured (docs/results/learning_check.md: GRPO at 1e-3
# after the warm-up undid part of it, 0.88 -> 0.76 held-out, at 3e-4 it went on to 0.96); the pixel policy keeps
# its earlier ones.
POLICY_LEARNING_RATES = {"text": (1e-3, 3e-4), "text-no-question": (1e-3, 3e-4), "vlm": (1e-2, 3e-3)}


def build_policy(args: argparse.Namespace, path: Path) -> Path:
    """The initial (random-weight, uniform) policy ``args.policy`` written to ``path``."""
    if args.policy == "vlm":
        return build_two_action_vlm(
            path,
            image_size=args.image_size,
            patch_size=args.patch_size,
            stem_width=args.stem_width or None,
            seed=args.seed,
        )
    return build_two_action_text(path, hidden_size=args.hidden_size, image_view=TEXT_VIEWS[args.policy], seed=args.seed)


def is_vision(path: str | Path) -> bool:
    from transformers import AutoConfig

    return getattr(AutoConfig.from_pretrained(path), "vision_config", None) is not None


def load_model(path: str | Path) -> Any:
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    return (AutoModelForImageTextToText if is_vision(path) else AutoModelForCausalLM).from_pretrained(path)


def load_processing_class(path: str | Path) -> Any:
    from transformers import AutoProcessor, AutoTokenizer

    return (AutoProcessor if is_vision(path) else AutoTokenizer).from_pretrained(path)


def ocr_cache_file(args: argparse.Namespace) -> Path | None:
    """The OCR readings file of ``--ocr-cache`` (None: none)."""
    return Path(args.ocr_cache).expanduser() if args.ocr_cache else None


def load_ocr_cache(args: argparse.Namespace) -> int:
    """Load ``--ocr-cache`` into the process-wide cache, if the file exists; how many readings it held."""
    path = ocr_cache_file(args)
    return default_cache().load(path) if path is not None and path.exists() else 0


def cached_reader(image: Any) -> str:
    """The words the text policies are shown of ``image`` (``OcrView``'s reading, through the shared cache)."""
    return " ".join(default_cache().read(image))


def prepare_reading(args: argparse.Namespace, tasks: Sequence[Task], loaded: int) -> dict[str, Any]:
    """For the text policies: read every task image and every first-image zoom not in the OCR cache yet
    (``args.ocr_workers`` at a time) and save the cache back; the counts and time (``loaded``: readings the
    cache file held)."""
    if args.policy not in TEXT_VIEWS:
        return {}
    start = time.perf_counter()
    cache, path = default_cache(), ocr_cache_file(args)
    images = []
    for task in tasks:
        shown = [ref.open() for turn in task.turns for ref in turn.images]
        images += shown + ([zoomed(shown[0])] if shown else [])
    read = cache.fill(images, workers=args.ocr_workers)
    if path is not None and read:
        cache.save(path)
    return {"images": len(images), "loaded": loaded, "read": read, "seconds": time.perf_counter() - start}

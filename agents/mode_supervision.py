"""The supervised bound of the learning check: a two-action policy trained on the mode labels directly.

What GRPO has to discover from rewards, given here as labels: at each task's first assistant
header (the prompt and images exactly as the env shows them, rendered by ``vtb_agents.rollout``),
the action token ``CALL`` for a tool-required task and ``ANSWER`` for a tool-redundant one,
trained with cross-entropy over the two action logits. The held-out MCC this reaches bounds what
the same policy can learn about mode selection from the reward.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from PIL import Image, ImageEnhance

from vtb_agents.rollout import ChatRenderer, start_episode, vision_inputs
from vtb_agents.two_action_vlm import action_token_ids
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.tasks import Task
from vtb_env.tools.base import ToolRegistry
from vtb_rewards.mode import ConfusionMatrix

TOOL_REQUIRED = "tool_required"


@dataclass
class Decision:
    """One first decision: the prompt tokens, its images, and whether the label says call."""

    prompt_ids: list[int]
    images: list[Image.Image]
    call: bool


def first_decisions(tasks: Sequence[Task], processor: Any, tools: ToolRegistry, config: EnvConfig) -> list[Decision]:
    """Each task's first policy prompt as the env shows it (reset, rendered and encoded like a rollout)."""
    env = VisualToolBenchEnv(tasks=list(tasks), tools=tools, config=config)
    renderer = ChatRenderer(processor)
    decisions = []
    for task in tasks:
        observation, _ = env.reset(options={"task_id": task.id})
        episode = start_episode(renderer, task.id, observation)
        decisions.append(Decision(episode.prompt_ids, episode.images, task.mode_label == TOOL_REQUIRED))
    return decisions


def action_logits(model: Any, processor: Any, batch: Sequence[Decision]) -> Any:
    """``[batch, 2]`` logits of (CALL, ANSWER) at the end of each prompt (left-padded batch)."""
    import torch

    tokenizer = processor.tokenizer
    actions = action_token_ids(tokenizer)
    width = max(len(d.prompt_ids) for d in batch)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(d.prompt_ids)) + d.prompt_ids for d in batch])
    attention_mask = torch.tensor([[0] * (width - len(d.prompt_ids)) + [1] * len(d.prompt_ids) for d in batch])
    pixels = vision_inputs(processor, input_ids, [d.images for d in batch])
    logits = model(input_ids=input_ids, attention_mask=attention_mask, **pixels).logits[:, -1]
    return logits[:, [actions["call"], actions["answer"]]]


def fit_mode_labels(
    model: Any,
    processor: Any,
    decisions: Sequence[Decision],
    *,
    epochs: int,
    learning_rate: float,
    batch_size: int = 16,
    seed: int = 0,
    augment: Callable[[Image.Image, random.Random], Image.Image] | None = None,
    on_epoch: Callable[[dict[str, float]], None] | None = None,
) -> list[dict[str, float]]:
    """Train ``model`` in place on the labels (AdamW, cross-entropy over the two actions); per-epoch loss, accuracy.

    ``augment``: applied to every image of a batch each time it is drawn (e.g. ``keep_label_jitter``).
    ``on_epoch``: called with each epoch's entry, the model in eval mode (e.g. to evaluate it)."""
    import torch

    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
    history = []
    model.train()
    for epoch in range(epochs):
        order = list(decisions)
        rng.shuffle(order)
        total, correct = 0.0, 0
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            if augment is not None:
                batch = [replace(d, images=[augment(image, rng) for image in d.images]) for d in batch]
            targets = torch.tensor([0 if d.call else 1 for d in batch])
            logits = action_logits(model, processor, batch)
            loss = torch.nn.functional.cross_entropy(logits, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
            correct += int((logits.argmax(-1) == targets).sum())
        history.append({"epoch": epoch + 1, "loss": total / len(order), "accuracy": correct / len(order)})
        if on_epoch is not None:
            model.eval()
            on_epoch(history[-1])
            model.train()
    model.eval()
    return history


def keep_label_jitter(image: Image.Image, rng: random.Random) -> Image.Image:
    """A small random crop (each side keeps >= 94%, so the corner pages stay in the picture), brightness and
    contrast x0.85-1.15. No flips or rotations: page orientation belongs to the scene."""
    width, height = image.size
    keep_w, keep_h = (int(size * rng.uniform(0.94, 1.0)) for size in (width, height))
    left, top = rng.randint(0, width - keep_w), rng.randint(0, height - keep_h)
    image = image.convert("RGB").crop((left, top, left + keep_w, top + keep_h))
    image = ImageEnhance.Brightness(image).enhance(rng.uniform(0.85, 1.15))
    return ImageEnhance.Contrast(image).enhance(rng.uniform(0.85, 1.15))


def decision_mcc(model: Any, processor: Any, decisions: Sequence[Decision], batch_size: int = 16) -> float:
    """MCC of the argmax first action (CALL = tool use) against the labels."""
    import torch

    outcomes = []
    with torch.no_grad():
        for start in range(0, len(decisions), batch_size):
            batch = decisions[start : start + batch_size]
            calls = (action_logits(model, processor, batch).argmax(-1) == 0).tolist()
            outcomes += [
                ("TP" if call else "FN") if d.call else ("FP" if call else "TN")
                for d, call in zip(batch, calls, strict=True)
            ]
    return ConfusionMatrix.from_outcomes(outcomes).mcc()

"""Cold-start SFT data (``vtb synth --sft``): reference trajectories replayed in the env, for TRL's SFTTrainer."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from vtb_app.cli import main as vtb
from vtb_env.sft import SFT_FILE, sft_env_config, sft_rows
from vtb_env.synth import TOOL_REDUNDANT, TOOL_REQUIRED, generate
from vtb_env.tools import default_tools

datasets = pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """``vtb synth --n 4 --seed 1 --sft``: two twin pairs (one needs two vision calls and a calculator)."""
    out = tmp_path_factory.mktemp("sft")
    assert vtb(["synth", "--n", "4", "--seed", "1", "--sft", "--out", str(out)]) == 0
    return out, datasets.load_dataset("parquet", data_files=str(out / SFT_FILE), split="train")


def _image_placeholders(message):
    return sum(part["type"] == "image" for part in message["content"])


def _text(message):
    return "".join(part["text"] for part in message["content"] if part["type"] == "text")


def test_export_replays_reference_trajectories_for_real(exported):
    out, ds = exported
    tasks = {t.id: t for t in generate(4, seed=1)}
    assert sorted(ds["task_id"]) == sorted(tasks)
    for row in ds:
        task, messages = tasks[row["task_id"]], row["messages"]
        assert row["mode_label"] == task.mode_label
        assert sum(map(_image_placeholders, messages)) == len(row["images"])  # one image per placeholder
        finals = [m for m in messages if m["role"] == "assistant" and not m.get("tool_calls")]
        assert [_text(m) for m in finals] == [turn.golden_answer for turn in task.turns]
        calls = [c for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        assert (
            row["tool_calls"] == len(calls) == sum(len(json.loads(t.tool_trajectory_raw or "[]")) for t in task.turns)
        )
        assert {t["function"]["name"] for t in json.loads(row["tools"])} >= {c["function"]["name"] for c in calls}
        if task.mode_label == TOOL_REDUNDANT:
            assert calls == [] and len(row["images"]) == len(task.images)  # answers directly
            continue
        assert task.mode_label == TOOL_REQUIRED and calls
        made = []  # the images the sandboxed calls saved, as their tool messages name them
        for i, message in enumerate(messages):
            if message["role"] != "tool":
                continue
            assert message["name"] in {c["function"]["name"] for c in calls}
            if message["name"] == "python_image_processing":  # the sandbox's real result, then its images
                result = json.loads(_text(message))
                assert result["exit_code"] == 0 and result["images"], result
                shown = messages[i + 1]
                assert shown["role"] == "user" and _image_placeholders(shown) == len(result["images"])
                assert [p["text"] for p in shown["content"] if p["type"] == "text"][1:] == [
                    f"[{name}]" for name in result["images"]
                ]
                made += result["images"]
            if message["name"] == "calculator":
                assert "result" in json.loads(_text(message))
        assert made == [f"transformed_image_{i}.png" for i in range(len(made))]
        assert len(row["images"]) == len(task.images) + len(made)
        originals = {image.open().size for image in task.images}
        assert all(image.size not in originals for image in row["images"][len(task.images) :])  # crops, enlarged


def test_a_trajectory_that_fails_is_skipped_with_its_reason():
    task = next(
        t
        for t in generate(4, seed=1)
        if t.mode_label == TOOL_REQUIRED and json.loads(t.turns[0].tool_trajectory_raw or "[]")
    )
    broken_turn = replace(
        task.turns[0],
        tool_trajectory_raw=json.dumps([{"tool": "python_image_processing", "arguments": {"code": "1/0"}}]),
    )
    broken = replace(task, id="broken", turns=(broken_turn, *task.turns[1:]))
    unknown = replace(
        task,
        id="unknown",
        turns=(replace(task.turns[0], tool_trajectory_raw='[{"tool": "teleport", "arguments": {}}]'), *task.turns[1:]),
    )
    tools = default_tools()
    try:
        rows, skipped = sft_rows([broken, unknown, task], tools)
    finally:
        tools.close()
    assert [row["task_id"] for row in rows] == [task.id]
    reasons = dict(skipped)
    assert "ZeroDivisionError" in reasons["broken"] and "teleport" in reasons["unknown"]


@pytest.mark.parametrize("scope", ["turn", "task"])
def test_reference_calls_past_the_env_cap_are_left_out(scope):
    """Under a cap of one call, a turn with two reference calls plays its first and then its golden answer."""
    task = next(
        t for t in generate(4, seed=1) if sum(len(json.loads(u.tool_trajectory_raw or "[]")) for u in t.turns) >= 2
    )
    tools = default_tools()
    try:
        config = sft_env_config(max_tool_calls=1, cap_scope=scope)
        (row,), skipped = sft_rows([task], tools, config)
    finally:
        tools.close()
    assert skipped == []
    per_turn = [len(json.loads(u.tool_trajectory_raw or "[]")) for u in task.turns]
    first = next(i for i, n in enumerate(per_turn) if n)  # under a per-task cap only the first call runs
    kept = [min(n, 1) for n in per_turn] if scope == "turn" else [int(i == first) for i in range(len(per_turn))]
    assert row["tool_calls"] == sum(kept) >= 1
    finals = [m for m in row["messages"] if m["role"] == "assistant" and not m.get("tool_calls")]
    assert [_text(m) for m in finals] == [turn.golden_answer for turn in task.turns]


@pytest.mark.slow
def test_trl_sft_trainer_trains_a_vlm_on_the_export(exported, tmp_path):
    """TRL's own SFTTrainer, one step on the parquet: finite loss, every image of the batch through the vision tower."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor
    from trl import SFTConfig, SFTTrainer

    from tests.support.tiny_models import build_tiny_idefics3
    from vtb_app.integrations.trl_args import checkpointing

    out, ds = exported
    path = build_tiny_idefics3(tmp_path / "vlm")
    model, processor = AutoModelForImageTextToText.from_pretrained(path), AutoProcessor.from_pretrained(path)
    encoded = []  # images per vision-tower call

    def count(module, args, kwargs, output):
        encoded.append((args[0] if args else kwargs["pixel_values"]).shape[0])

    model.model.vision_model.register_forward_hook(count, with_kwargs=True)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    train = datasets.load_dataset("parquet", data_files=str(out / SFT_FILE), split="train")
    batch = 4
    trainer = SFTTrainer(
        model=model,
        processing_class=processor,
        train_dataset=train,
        args=SFTConfig(
            output_dir=str(tmp_path / "run"),
            max_steps=1,
            per_device_train_batch_size=batch,
            learning_rate=1e-3,
            max_length=None,
            bf16=False,
            use_cpu=True,
            **checkpointing(SFTConfig, False),
            report_to=[],
            logging_steps=1,
            save_strategy="no",
            dataloader_num_workers=0,
            seed=0,
        ),
    )
    trainer.train()
    loss = next(entry["loss"] for entry in trainer.state.log_history if "loss" in entry)
    assert math.isfinite(loss) and loss > 0
    assert sum(encoded) == sum(len(row["images"]) for row in train), encoded  # the batch is the whole export
    changed = {name for name, p in model.named_parameters() if not torch.equal(p.detach(), before[name])}
    assert any(name.startswith("model.vision_model") for name in changed)
    assert any(name.startswith("model.connector") for name in changed)

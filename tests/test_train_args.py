"""``scripts/train_grpo.py``'s flags by TRL's own ``TrlParser``: the env's fields, every ``GRPOConfig`` field, YAML."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

trl = pytest.importorskip("trl", reason="the `train` extra")

from vtb_app.integrations.trl import parse_args  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_env_flags_and_grpo_flags_parse_into_one_run_with_the_scripts_defaults():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # no deprecated TrainingArguments field set on our side
        args = parse_args(
            ["--model", "m", "--num-generations", "4", "--tasks-per-step", "3", "--max-new-tokens", "16"]
            + ["--learning_rate", "0.05", "--cap-scope", "turn", "--lr_scheduler_type", "cosine", "--use-vllm"]
        )
    grpo = args.grpo
    assert isinstance(grpo, trl.GRPOConfig) and (args.model, args.cap_scope, args.tasks) == ("m", "turn", "synth:64:0")
    assert grpo.per_device_train_batch_size == 12 and grpo.max_completion_length == args.max_new_tokens == 16
    assert (grpo.learning_rate, grpo.lr_scheduler_type.value, grpo.use_vllm) == (0.05, "cosine", True)
    # the script's defaults where TRL's differ; checkpointing by transformers' current name
    assert (grpo.output_dir, grpo.seed, grpo.max_steps, grpo.logging_steps, grpo.bf16) == (
        "runs/grpo",
        0,
        100,
        1,
        False,
    )
    assert getattr(grpo, "activation_checkpointing", grpo.gradient_checkpointing) is True  # the old name before 5.2x
    assert grpo.save_strategy.value == "no"
    assert (args.seed, args.use_vllm, args.temperature) == (grpo.seed, grpo.use_vllm, grpo.temperature)  # flat too


def test_a_yaml_config_sets_any_field_and_the_command_line_wins(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("tasks: demo\nmax_tool_calls: 3\nnum_generations: 2\nbeta: 0.04\nlearning_rate: 0.001\n")
    args = parse_args(["--model", "m", "--config", str(config), "--learning-rate", "0.002"])
    assert (args.tasks, args.max_tool_calls) == ("demo", 3)
    assert (args.grpo.num_generations, args.grpo.beta, args.grpo.learning_rate) == (2, 0.04, 0.002)
    assert args.grpo.per_device_train_batch_size == 4  # 2 tasks per step x G = 2


def test_every_grpo_config_field_is_a_flag_of_the_script():
    done = subprocess.run(
        [sys.executable, "scripts/train_grpo.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    fields = {field.name for field in dataclasses.fields(trl.GRPOConfig) if field.init}
    assert len(fields) > 150 and not {name for name in fields if f"--{name} " not in done.stdout.replace("\n", " ")}
    with pytest.raises(SystemExit):
        parse_args(["--model", "m", "--cap-scope", "episode"])  # a closed set: task or turn


def test_the_train_extra_brings_what_qwen_vl_processors_need():
    """transformers' Qwen2-VL video processor, which Qwen2.5-VL's processor requires, imports torchvision (the
    `train` extra's trl[vlm]); the main venv's CPU torch has no importable torchvision (scripts/setup.sh), so
    this runs in scripts/test_py312.sh."""
    pytest.importorskip("torchvision", reason="PyPI's torchvision is a CUDA build: scripts/test_py312.sh")
    from PIL import Image
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    frames = [Image.new("RGB", (56, 56), "white")] * 2
    out = Qwen2VLVideoProcessor()(videos=[frames], return_tensors="pt")
    ((t, h, w),) = out["video_grid_thw"].tolist()  # 2 frames: one temporal patch
    assert t == 1 and out["pixel_values_videos"].shape[0] == t * h * w > 0

"""A policy learns from the environment: a shortened scripts/learning_check.py run (GRPO, tiny VLM, real env).

The two-action Idefics3 policy starts uniform (MCC ~0 on held-out twins) and, trained with TRL's
GRPO on the env's composed reward, must select the tool mode from the image on held-out tasks.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

pytest.importorskip("trl")

from transformers import Idefics3ForConditionalGeneration  # noqa: E402

from vtb_agents.two_action_vlm import (  # noqa: E402
    ANSWER_TEXT,
    CALL_TEXT,
    ConvStem,
    action_token_ids,
    build_tokenizer,
    build_two_action_vlm,
)

ROOT = Path(__file__).resolve().parents[1]


# The v1 twins (label in plain sight) with the earlier small policy (64 px, linear 8 px patches): the
# shortened runs the slow tests make, 64 training tasks and 32 held-out.
_V1_SMALL_POLICY = [
    "--policy", "vlm", "--tasks", "synth:64:0", "--eval-tasks", "synth:32:1", "--generator", "v1",
    "--image-size", "64", "--patch-size", "8", "--stem-width", "0",
]  # fmt: skip


def _script():
    spec = importlib.util.spec_from_file_location("learning_check", ROOT / "scripts" / "learning_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_policy_loads_with_auto_classes_and_starts_uniform(tmp_path):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from vtb_env.parsers import parse_action

    path = build_two_action_vlm(tmp_path)
    model, processor = AutoModelForImageTextToText.from_pretrained(path), AutoProcessor.from_pretrained(path)
    assert type(model).__name__ == "ConvStemIdefics3ForConditionalGeneration"
    assert isinstance(model, Idefics3ForConditionalGeneration)  # everything but the patch embedding is Idefics3's
    assert isinstance(model.model.vision_model.embeddings.patch_embedding, ConvStem)
    actions = action_token_ids(processor.tokenizer)
    assert processor.tokenizer.decode([actions["call"]], skip_special_tokens=True) == CALL_TEXT
    assert processor.tokenizer.decode([actions["answer"]], skip_special_tokens=True) == ANSWER_TEXT
    assert set(model.generation_config.suppress_tokens) == set(range(len(processor.tokenizer))) - set(actions.values())
    parsed = parse_action(CALL_TEXT)
    assert [(call.name, call.error, call.repaired) for call in parsed.calls] == [
        ("python_image_processing", None, False)
    ]
    assert parse_action(ANSWER_TEXT).calls == []
    head = model.get_output_embeddings().weight
    assert torch.equal(head[actions["call"]], head[actions["answer"]])  # uniform start; other rows random
    assert head.abs().sum() > 0


def test_template_renders_each_assistant_message_as_its_action_token():
    """What SFT on the reference conversations trains: CALL where the reference calls, ANSWER where it answers,
    and only those tokens (assistant mask)."""
    tokenizer = build_tokenizer()
    actions = action_token_ids(tokenizer)
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "What is in this image?"}, {"type": "image"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Crop."}], "tool_calls": [{"function": {}}]},
        {"role": "tool", "content": [{"type": "text", "text": '{"exit_code": 0}'}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Pirates: 77.1%"}]},
    ]
    out = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    trained = [token for token, mask in zip(out["input_ids"], out["assistant_masks"], strict=True) if mask]
    assert trained == [actions["call"], actions["answer"]]
    head = tokenizer.apply_chat_template(messages[:1], tokenize=False, add_generation_prompt=True)
    assert tokenizer.apply_chat_template(messages, tokenize=False).startswith(head)  # prefix-preserving


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a few minutes alone on 2 cores; several times that on a loaded machine
def test_grpo_teaches_mode_selection_on_held_out_twins(tmp_path):
    # The v1 twins (--generator v1 turns synth:N:SEED into the first generator's tasks), whose label is in
    # plain sight, with the small linear-patch policy (64 px, 8 px patches, --stem-width 0): 12 steps show the
    # loop learning. The default CNN-stem policy learns slower (measured here: +0.05 -> +0.21 in 12 steps), and
    # on the default v2 twins its supervised bound is about 0.5 held-out MCC (docs/training.md), so no
    # shortened GRPO run there can clear a fixed bar.
    # 20 steps: an over-cap second call, which never runs, is no call and costs no tool-success credit (issue
    # 31 item 3), so the signal against it is only the mode's; 12 steps reached 0.05 -> 0.51 (0.05 -> 0.81 before).
    script = _script()
    args = script.parse_args(
        [
            *_V1_SMALL_POLICY,
            "--sft-steps",
            "0",
            "--max-steps",
            "20",
            "--eval-modes",
            "sampled",
            "--eval-samples",
            "1",
            "--policy-dir",
            str(tmp_path / "policy"),
        ]
    )
    result = script.run(args)
    script.print_curve(result["curve"])
    before, after = result["before"]["sampled"], result["after"]["sampled"]
    print(
        f"\nheld-out MCC {before['mcc']:+.3f} -> {after['mcc']:+.3f}, mode reward {before['mode_reward']:.3f} -> "
        f"{after['mode_reward']:.3f}, reward {before['reward']:.4f} -> {after['reward']:.4f} "
        f"in {result['total_seconds']:.0f} s ({result['total_cpu_seconds']:.0f} CPU s)"
    )
    assert result["generator"] == "v1" and len(result["curve"]) == 20
    assert before["mcc"] <= 0.4, before  # a fair coin on every input (32 tasks: MCC noise ~0.2)
    assert after["mcc"] >= 0.6 and after["mcc"] - before["mcc"] >= 0.3, (before, after)
    assert after["mode_reward"] > before["mode_reward"] and after["reward"] > before["reward"]
    assert after["tool_call_success"] > 0.5  # the calls it makes run in the sandbox
    assert (tmp_path / "policy" / "trained" / "model.safetensors").exists()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_sft_cold_start_on_reference_conversations_teaches_mode_selection(tmp_path):
    # --sft-steps: TRL's SFTTrainer on the training tasks' exported reference conversations (real sandboxed
    # replays), then GRPO. On the v1 twins the small policy learns from the references alone which twin calls: at
    # lr 1e-2 (the default) the first ~6-8 steps only lift the two action tokens past the suppressed vocabulary
    # (greedy: never calls); measured on synth:64:0, 16 steps gave held-out greedy MCC 1.00, 32 steps 0.94 (and
    # sampled 0.61); 16 steps on synth:32:0 still gave 0.00, so the test takes 32 steps on 64 tasks.
    script = _script()
    args = script.parse_args(
        [
            *_V1_SMALL_POLICY,
            "--sft-steps",
            "32",
            "--max-steps",
            "2",
            "--eval-modes",
            "greedy",
        ]
    )
    result = script.run(args)
    before, after_sft = result["before"]["greedy"], result["sft"]["held_out"]["greedy"]
    print(
        f"\nheld-out greedy MCC {before['mcc']:+.3f} -> {after_sft['mcc']:+.3f} after SFT; "
        f"{result['total_seconds']:.0f} s ({result['total_cpu_seconds']:.0f} CPU s)"
    )
    assert result["sft"]["rows"] == 64 and result["sft"]["skipped"] == 0
    losses = [entry["loss"] for entry in result["sft"]["log"]]
    assert len(losses) == 32 and losses[-1] < losses[0] - 1.0
    assert before["mcc"] <= 0.4, before
    assert after_sft["mcc"] >= 0.6, after_sft
    assert len(result["curve"]) == 2  # GRPO continues from the SFT checkpoint


@pytest.mark.slow  # 22 s at load average ~15 on 2 cores: builds a policy and renders 8 tasks' first decisions
def test_supervised_bound_tools_train_on_first_decisions_with_label_keeping_jitter(tmp_path):
    """``fit_mode_labels`` trains on the env's first decisions (jittered images), reports each epoch through
    ``on_epoch``, and ``decision_mcc`` scores the argmax decision against the labels."""
    import random

    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from vtb_agents.mode_supervision import decision_mcc, first_decisions, fit_mode_labels, keep_label_jitter
    from vtb_app.learning_eval import env_config
    from vtb_app.learning_tasks import load_learning_tasks
    from vtb_env.tools.base import ToolRegistry

    image = Image.new("RGB", (200, 100), (120, 130, 140))
    jittered = keep_label_jitter(image, random.Random(0))
    assert 188 <= jittered.width <= 200 and 94 <= jittered.height <= 100 and jittered.mode == "RGB"

    path = build_two_action_vlm(tmp_path, image_size=64, patch_size=8, stem_width=None)
    model, processor = AutoModelForImageTextToText.from_pretrained(path), AutoProcessor.from_pretrained(path)
    tasks = load_learning_tasks("synth:8:0", "v1")
    tools = ToolRegistry([])
    decisions = first_decisions(tasks, processor, tools, env_config(1))
    assert [d.call for d in decisions] == [t.mode_label == "tool_required" for t in tasks]
    assert decision_mcc(model, processor, decisions) == 0.0  # uniform start: ties go to CALL for every task
    seen = []
    history = fit_mode_labels(
        model,
        processor,
        decisions,
        epochs=2,
        learning_rate=1e-2,
        batch_size=4,
        augment=keep_label_jitter,
        on_epoch=lambda entry: seen.append((entry["epoch"], model.training)),
    )
    assert seen == [(1, False), (2, False)] and len(history) == 2
    assert history[1]["loss"] < history[0]["loss"], history  # deterministic: seeded model, shuffle and jitter
    assert -1.0 <= decision_mcc(model, processor, decisions) <= 1.0

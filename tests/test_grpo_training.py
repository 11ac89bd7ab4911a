"""GRPO end to end on CPU: TRL's GRPOTrainer, rollouts in the real env (sandboxed vision tool), a tiny model. The
policy is the scripted tiny model (tests/support/tiny_models.py) made stochastic: its first token chooses
between ``<tool_call>`` (a real python_image_processing crop) and the final answer with equal logits, so a group
mixes tool-using and tool-free episodes and GRPO has a signal (the mode reward separates them on tool-required
and tool-redundant tasks). The same policy is built as a Llama and as an Idefics3 vision-language model."""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest
import torch

pytest.importorskip("trl")

from tests.support import grpo_rollouts  # noqa: E402
from tests.support.grpo import coin_flip_policy, one_step_grpo_config  # noqa: E402
from tests.support.grpo_rollouts import TEST_MODEL_RESPONSE_TEMPLATE, plumbing_config, train_args  # noqa: E402
from vtb_app.integrations import trl as vtb_trl  # noqa: E402
from vtb_env.synth import generate  # noqa: E402

# module-scoped fixtures shared with the other GRPO test files
policy_path, tasks, tools = grpo_rollouts.policy_path, grpo_rollouts.tasks, grpo_rollouts.tools


@pytest.mark.slow
def test_grpo_trains_on_env_rewards(policy_path, tasks, tools, tmp_path):
    from transformers import AutoModelForCausalLM

    steps = 3
    args = train_args(policy_path, tmp_path / "run", steps, "--tools", "python_image_processing", "--log-completions")
    before = {n: p.detach().clone() for n, p in AutoModelForCausalLM.from_pretrained(policy_path).named_parameters()}
    start = time.perf_counter()
    trainer = vtb_trl.train(args, tasks=tasks, tools=tools)
    elapsed = time.perf_counter() - start
    print({k: round(v, 3) for k, v in trainer.state.log_history[-2].items() if isinstance(v, float)})

    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert trainer.state.global_step == steps and len(logs) == steps
    for entry in logs:
        for key in (
            "vtb/reward",
            "vtb/reward/mode",
            "vtb/reward/format",
            "vtb/mode/mcc",
            "vtb/episode/tool_calls",
            "rewards/vtb_reward/mean",
        ):
            assert key in entry, (key, sorted(entry))
    assert any(entry["vtb/episode/tool_calls"] > 0 for entry in logs)
    # tool_success is paid only beside a call that revealed a hidden fact (docs/rewards.md), which a random tiny
    # policy never makes; that its calls ran and counted is what this run can show
    assert any(entry.get("vtb/reward/used_tools", 0) > 0 for entry in logs), "no tool call counted"
    assert any(entry["vtb/group/frac_zero_std"] < 1.0 for entry in logs), "no group had a reward spread"
    after = dict(trainer.model.named_parameters())
    changed = [n for n, p in before.items() if not torch.equal(p, after[n].detach().cpu())]
    assert "lm_head.weight" in changed, changed
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["architectures"] == ["LlamaForCausalLM"]
    tables = [pd.read_parquet(path) for path in sorted((tmp_path / "run" / "completions").glob("*.parquet"))]
    assert tables and all(len(table) == 8 for table in tables)  # --log-completions: every step's 8 episodes
    # the tool's images are logged with the episodes that made them (on some step: a policy that learns calls
    # reveal nothing, as a random tiny one's do, may stop calling by the last step)
    assert any("transformed_image_0.png" in names for table in tables for names in table["vtb_images"])
    print(f"\nGRPO: {steps} steps x 8 episodes in {elapsed:.1f} s = {steps / elapsed:.3f} steps/s on CPU")


@pytest.mark.slow
def test_grpo_trains_a_vlm_on_every_image_of_the_episode(tmp_path_factory, tasks, tools, tmp_path, monkeypatch):
    """Idefics3 policy: the loss forward passes get the prompt images and the images the tool returned."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    policy = coin_flip_policy(tmp_path_factory.mktemp("vlm"), "idefics3")
    processor = AutoProcessor.from_pretrained(policy)
    image_token = processor.tokenizer.convert_tokens_to_ids(processor.image_token)
    steps_episodes: list = []  # per rollout: its episodes
    loss_images: list[int] = []  # per vision forward of the loss pass (grad enabled): images encoded
    generation_images: list[int] = []  # per vision forward while sampling (no_grad)

    def count_images(module, args, kwargs):
        images = (kwargs["pixel_values"] if "pixel_values" in kwargs else args[0]).shape[0]
        (loss_images if torch.is_grad_enabled() else generation_images).append(images)

    class RecordingRollout(vtb_trl.EnvRollout):
        def __call__(self, prompts, trainer):
            if not steps_episodes:
                trainer.model.model.vision_model.register_forward_pre_hook(count_images, with_kwargs=True)
            output = super().__call__(prompts, trainer)
            steps_episodes.append(output["vtb_episode"])
            return output

    steps = 2
    before = {n: p.detach().clone() for n, p in AutoModelForImageTextToText.from_pretrained(policy).named_parameters()}
    start = time.perf_counter()
    trainer = vtb_trl.train(
        train_args(policy, tmp_path / "run", steps), tasks=tasks, tools=tools, rollout_class=RecordingRollout
    )
    elapsed = time.perf_counter() - start

    assert trainer.state.global_step == steps and len(steps_episodes) == steps
    episodes = [e for step in steps_episodes for e in step]
    tool_images = [e for e in episodes if "transformed_image_0.png" in e.image_names]
    assert tool_images, "no episode got an image back from python_image_processing"
    for e in episodes:  # every image has its placeholder's image tokens in the trained sequence
        ids = torch.tensor(e.prompt_ids + e.completion_ids)
        assert (
            (ids == image_token).sum().item()
            == processor.image_seq_len * len(e.images)
            == processor.image_seq_len * len(e.image_names)
        )
        if e in tool_images:
            assert (torch.tensor(e.prompt_ids) == image_token).sum().item() < processor.image_seq_len * len(e.images)
    # one loss pass per step, over the 8 episodes: all their images, tool-returned ones included
    assert loss_images == [sum(len(e.images) for e in step) for step in steps_episodes]
    assert sum(generation_images) >= sum(loss_images), (
        "the sampler did not see the images"
    )  # each round re-encodes them
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logs) == steps and all("vtb/mode/mcc" in entry and entry["vtb/episode/images"] > 1 for entry in logs)
    after = dict(trainer.model.named_parameters())
    changed = {n for n, p in before.items() if not torch.equal(p, after[n].detach().cpu())}
    assert "lm_head.weight" in changed
    # the image features reached the loss: the vision-to-text connector got gradients
    assert any("connector" in n for n in changed), sorted(changed)
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["architectures"] == ["Idefics3ForConditionalGeneration"]
    print(
        f"\nVLM GRPO: {steps} steps x 8 episodes in {elapsed:.1f} s = {steps / elapsed:.3f} steps/s on CPU; "
        f"{sum(loss_images)} images in the loss passes"
    )


@pytest.mark.slow
def test_grpo_step_through_environment_factory(policy_path, tools, tmp_path):
    """TRL's own tool loop calls the env's tool methods; the env's reward reaches TRL's logs; the model changes."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    single = [t for t in generate(40, seed=0) if len(t.turns) == 1][:2]
    factory = vtb_trl.VTBEnvironmentFactory(single, tools, plumbing_config())
    assert (
        str(__import__("inspect").signature(factory.environment_class.python_image_processing))
        == "(self, *, code: str)"
    )
    with pytest.raises(ValueError, match="single-turn"):
        vtb_trl.VTBEnvironmentFactory([t for t in generate(40, seed=0) if len(t.turns) > 1][:1], tools)
    tokenizer = AutoTokenizer.from_pretrained(policy_path)
    tokenizer.response_template = TEST_MODEL_RESPONSE_TEMPLATE
    made: list = []

    def environment_factory():
        made.append(factory())
        return made[-1]

    before = {n: p.detach().clone() for n, p in AutoModelForCausalLM.from_pretrained(policy_path).named_parameters()}
    config = one_step_grpo_config(tmp_path)
    start = time.perf_counter()
    trainer = GRPOTrainer(
        model=str(policy_path),
        processing_class=tokenizer,
        args=config,
        train_dataset=factory.dataset(),
        reward_funcs=[vtb_trl.vtb_env_reward],
        environment_factory=environment_factory,
    )
    trainer.train()
    elapsed = time.perf_counter() - start

    log = next(entry for entry in trainer.state.log_history if "loss" in entry)
    assert trainer.state.global_step == 1 and "rewards/vtb_env_reward/mean" in log and "vtb/reward/mode" in log
    finished = [env for env in made if env.info]
    assert len(finished) >= 8 and all("record" in env.info for env in finished)
    calls = [c for env in finished for c in env.info["record"].tool_calls]
    assert calls and all(
        c.name == "python_image_processing" and c.error is None for c in calls if c.error_kind != "tools_withdrawn"
    )
    assert any(not env.info["record"].used_tools for env in finished), "no episode answered without tools"
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(p, after[n].detach().cpu()) for n, p in before.items())
    print(
        f"\nenvironment_factory GRPO: 1 step x 8 episodes in {elapsed:.1f} s; {len(calls)} tool calls; log "
        f"{dict((k, round(v, 3)) for k, v in log.items() if isinstance(v, float))}"
    )

"""GRPO end to end on CPU: TRL's GRPOTrainer, rollouts in the real env (sandboxed vision tool), a tiny model.

The policy is the scripted tiny model (tests/support/tiny_models.py) made stochastic: its first
token chooses between ``<tool_call>`` (a real python_image_processing crop) and the final
answer with equal logits, so a group mixes tool-using and tool-free episodes and GRPO has a
signal (the mode reward separates them on tool-required and tool-redundant tasks). The same
policy is built as a Llama and as an Idefics3 vision-language model.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

pytest.importorskip("trl")

from tests.support.grpo import ANSWER, coin_flip_policy, one_step_grpo_config  # noqa: E402
from vtb_agents.rollout import ChatRenderer, HFGenerator, run_episodes, summarize_rollouts  # noqa: E402
from vtb_app.integrations import trl as vtb_trl  # noqa: E402
from vtb_env.batch import EnvPool  # noqa: E402
from vtb_env.config import EnvConfig  # noqa: E402
from vtb_env.env import VisualToolBenchEnv  # noqa: E402
from vtb_env.synth import generate  # noqa: E402
from vtb_env.tools.base import ToolRegistry  # noqa: E402
from vtb_env.tools.python_tools import PythonImageProcessing  # noqa: E402


@pytest.fixture(scope="module")
def policy_path(tmp_path_factory) -> Path:
    return coin_flip_policy(tmp_path_factory.mktemp("policy"), "llama")


@pytest.fixture(scope="module")
def tasks():
    """Short synthetic tasks: one- and two-turn, tool-required and tool-redundant."""
    picked = [t for t in generate(40, seed=0) if len(t.turns) <= 2]
    return picked[:4]


@pytest.fixture(scope="module")
def tools():
    registry = ToolRegistry([PythonImageProcessing()])
    yield registry
    registry.close()


# The scripted policies answer a constant: their only reward spread is the mode decision, which the
# default (process credit earned by the rubric score) does not pay for a wrong answer.
PLUMBING_REWARD = {"process_credit": "always"}


def _config() -> EnvConfig:
    # per turn: the scripted models call once in every turn of multi-turn tasks
    return EnvConfig.preset(
        "default",
        image_parts="name",
        system_prompt=None,
        max_tool_calls=2,
        cap_scope="turn",
        reward_options=PLUMBING_REWARD,
    )


@pytest.mark.slow
def test_rollout_runs_real_tools_and_masks_env_tokens(policy_path, tasks, tools):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(policy_path)
    model = AutoModelForCausalLM.from_pretrained(policy_path)
    torch.manual_seed(0)
    pool = EnvPool([VisualToolBenchEnv(tasks=tasks, tools=tools, config=_config()) for _ in range(8)])
    renderer = ChatRenderer(tokenizer)
    start = time.perf_counter()
    episodes = run_episodes(
        pool, [t.id for t in tasks[:2] for _ in range(4)], HFGenerator(model, tokenizer, max_new_tokens=8), renderer
    )
    elapsed = time.perf_counter() - start
    pool.close()

    calls = [
        c for e in episodes for c in e.record.tool_calls if c.error_kind != "tools_withdrawn"
    ]  # past the cap: not run
    assert calls, "no episode called the tool"
    assert all(c.error is None for c in calls), [c.error for c in calls]
    # an episode's first crop is a new image (a repeat writes identical bytes, which the tool does not return again)
    assert all(
        e.record.tool_calls[0].images[0]["name"] == "transformed_image_0.png" for e in episodes if e.record.used_tools
    )
    assert any(not e.record.used_tools for e in episodes), "no episode answered without tools"
    for e in episodes:
        assert len(e.completion_ids) == len(e.env_mask) == len(e.logprobs)
        policy_text = renderer.decode([t for t, m in zip(e.completion_ids, e.env_mask, strict=True) if m])
        env_text = renderer.tokenizer.decode([t for t, m in zip(e.completion_ids, e.env_mask, strict=True) if not m])
        assert policy_text.count("python_image_processing") == len(e.record.tool_calls)
        assert (ANSWER in policy_text) == (e.record.turns[-1].final_answer == ANSWER)
        assert '"exit_code"' not in policy_text and "<image>" not in policy_text
        if e.record.used_tools:  # the tool's result and its image came back into the conversation as env tokens
            assert '"exit_code": 0' in env_text and "[transformed_image_0.png]<image>" in env_text
        assert e.components and "mode" in e.components and e.mode_outcome is not None
    metrics = summarize_rollouts(episodes, group_size=4)
    assert -1.0 <= metrics["mode/mcc"] <= 1.0 and metrics["episode/tool_calls"] > 0
    print(f"\nrollout: {len(episodes)} episodes in {elapsed:.2f} s ({elapsed / len(episodes):.3f} s/episode, batched)")


def test_vlm_renderer_expands_image_placeholders_and_refuses_a_mismatch(tmp_path):
    from PIL import Image
    from transformers import AutoProcessor

    from tests.support.tiny_models import build_tiny_idefics3

    processor = AutoProcessor.from_pretrained(build_tiny_idefics3(tmp_path))
    renderer = ChatRenderer(processor)
    image_token = processor.tokenizer.convert_tokens_to_ids(processor.image_token)
    ids = renderer.encode("[image_1.png]<image> and [transformed_image_0.png]<image>", [Image.new("RGB", (80, 60))] * 2)
    assert ids.count(image_token) == 2 * processor.image_seq_len
    with pytest.raises(ValueError, match="1 image placeholders"):
        renderer.encode("[image_1.png]<image>", [])


def _train_args(policy: Path, output_dir: Path, steps: int, *extra: str):
    return vtb_trl.parse_args(
        [
            "--model",
            str(policy),
            "--output-dir",
            str(output_dir),
            "--num-generations",
            "4",
            "--tasks-per-step",
            "2",
            "--max-steps",
            str(steps),
            "--learning-rate",
            "0.05",
            "--max-new-tokens",
            "8",
            "--max-tool-calls",
            "2",
            "--system-prompt",
            "none",
            "--loss-type",
            "grpo",
            "--seed",
            "1",
            "--process-credit",
            PLUMBING_REWARD["process_credit"],
            *extra,
        ]
    )


@pytest.mark.slow
def test_grpo_trains_on_env_rewards(policy_path, tasks, tools, tmp_path):
    from transformers import AutoModelForCausalLM

    steps = 3
    args = _train_args(policy_path, tmp_path / "run", steps, "--tools", "python_image_processing", "--log-completions")
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
        _train_args(policy, tmp_path / "run", steps), tasks=tasks, tools=tools, rollout_class=RecordingRollout
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


def test_tools_flag_takes_a_comma_list_and_refuses_unknown_names():
    from vtb_env.tools.calculator import Calculator

    registry = ToolRegistry([PythonImageProcessing(), Calculator()])
    assert list(registry.select("calculator,python_image_processing").names) == [
        "calculator",
        "python_image_processing",
    ]
    assert list(registry.select(["calculator"]).names) == ["calculator"]
    with pytest.raises(ValueError, match="unknown tools \\['web_search'\\]"):
        registry.select("calculator,web_search")
    registry.close()


def _width_recording(sampler):
    """``sampler`` as a generate function that records each call's batch width (in the returned list)."""
    widths: list[int] = []

    def generate(prompts, images=None):
        widths.append(len(prompts))
        return sampler(prompts, images)

    return generate, widths


def test_round_sync_keeps_generation_calls_equal_across_processes(policy_path, tasks, tools):
    """Another process still has 3 live episodes for 6 rounds: this one keeps generating (padded) until it is done
    too."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(policy_path)
    sampler = HFGenerator(AutoModelForCausalLM.from_pretrained(policy_path), tokenizer, max_new_tokens=8)
    generate, widths = _width_recording(sampler)

    rounds = iter(range(100))
    other = lambda active: max(active, 3 if next(rounds) < 6 else 0)  # noqa: E731 - the other process's count
    pool = EnvPool([VisualToolBenchEnv(tasks=tasks, tools=tools, config=_config()) for _ in range(2)])
    torch.manual_seed(0)
    episodes = run_episodes(pool, [tasks[0].id] * 2, generate, ChatRenderer(tokenizer), round_sync=other)
    pool.close()
    assert len(widths) == 6 and all(
        w == 3 for w in widths
    )  # this process finishes within 6 rounds (cap 2 calls per turn)
    assert all(e.record is not None and e.policy_steps <= 6 for e in episodes)


# TRL parses tool calls with the tokenizer's response template; the test model's Llama-3-style template writes
# hermes calls.
TEST_MODEL_RESPONSE_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "fields": {
        "tool_calls": {
            "open": "<tool_call>",
            "close_pattern": r"</tool_call>\s*",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"<\|eot_id\|>\s*", "content": "text"},
    },
}


@pytest.mark.slow
def test_grpo_step_through_environment_factory(policy_path, tools, tmp_path):
    """TRL's own tool loop calls the env's tool methods; the env's reward reaches TRL's logs; the model changes."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    single = [t for t in generate(40, seed=0) if len(t.turns) == 1][:2]
    factory = vtb_trl.VTBEnvironmentFactory(single, tools, _config())
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


def _rank_rollout(rank: int, world: int, port: int, model_path: str, out_dir: str) -> None:
    """One process of a 2-process CPU (gloo) group: rank 0 plays 1-turn tasks, rank 1 2-turn tasks."""
    import os

    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world),
    )
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.support.env_tools import exact_reward, make_task
    from vtb_env.tools.calculator import Calculator

    accelerator = Accelerator(cpu=True)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    sampler = HFGenerator(AutoModelForCausalLM.from_pretrained(model_path), tokenizer, max_new_tokens=16)
    generate, widths = _width_recording(sampler)

    task = make_task(f"r{rank}", turns=rank + 1)
    pool = EnvPool(
        [
            VisualToolBenchEnv(
                tasks=[task], tools=ToolRegistry([Calculator()]), reward=exact_reward(), config=_config()
            )
            for _ in range(2)
        ]
    )
    episodes = run_episodes(
        pool, [task.id] * 2, generate, ChatRenderer(tokenizer), round_sync=vtb_trl.accelerator_round_sync(accelerator)
    )
    pool.close()
    Path(out_dir, f"{rank}.json").write_text(
        json.dumps(
            {
                "widths": widths,
                "calls": [len(e.record.tool_calls) for e in episodes],
                "steps": [e.policy_steps for e in episodes],
            }
        )
    )
    accelerator.wait_for_everyone()


@pytest.mark.slow
def test_round_sync_across_two_real_processes(tmp_path):
    """Real torch.distributed (gloo) group through accelerate: with round_sync both ranks generate equally often."""
    import socket

    import torch.multiprocessing as mp

    from tests.support.tiny_models import build_scripted_model

    model = build_scripted_model(
        tmp_path / "m", "llama", tool_call={"name": "calculator", "arguments": {"expression": "6*7"}}
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mp.spawn(_rank_rollout, args=(2, port, str(model), str(tmp_path)), nprocs=2)
    ranks = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(2)]
    # rank 0's episodes need 2 rounds (a call, the answer), rank 1's 4 (two turns): without round_sync
    # rank 0 would stop generating after 2 calls and leave rank 1 alone in the collective
    assert [r["calls"] for r in ranks] == [[1, 1], [2, 2]] and [r["steps"] for r in ranks] == [[2, 2], [4, 4]]
    assert ranks[0]["widths"] == ranks[1]["widths"] == [2, 2, 2, 2]  # same number of calls, same batch width


def test_trl_environment_scores_a_final_reply_that_still_calls_a_tool_through_the_env():
    from tests.support.env_tools import ImageMakerTool, exact_reward, hermes, make_task

    env = VisualToolBenchEnv(tasks=[make_task("a")], tools=ToolRegistry([ImageMakerTool()]), reward=exact_reward())
    rollout = vtb_trl.VTBEnvironment(env, show_images=False)
    rollout.reset("a")
    reward = rollout._answer(hermes("python_image_processing", code="save"))
    record = rollout.info["record"]
    assert "reward_error" not in rollout.info and rollout.info["reward_components"]["tool_success"] == 1.0
    assert reward == rollout.info["reward_components"]["reward"] and record.turns[-1].truncated
    assert record.metadata["truncation"] == "the completion ended before the episode"

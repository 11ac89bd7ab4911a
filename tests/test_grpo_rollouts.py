"""Rollouts for GRPO on CPU: episodes in the real env (sandboxed vision tool) with env tokens masked, the VLM
renderer's image placeholders, the --tools flag, and TRL's environment scoring a final reply that still calls a
tool."""

from __future__ import annotations

import time

import pytest
import torch

pytest.importorskip("trl")

from tests.support import grpo_rollouts  # noqa: E402
from tests.support.grpo import ANSWER  # noqa: E402
from tests.support.grpo_rollouts import plumbing_config  # noqa: E402
from vtb_agents.rollout import ChatRenderer, HFGenerator, run_episodes, summarize_rollouts  # noqa: E402
from vtb_app.integrations import trl as vtb_trl  # noqa: E402
from vtb_env.batch import EnvPool  # noqa: E402
from vtb_env.env import VisualToolBenchEnv  # noqa: E402
from vtb_env.tools.base import ToolRegistry  # noqa: E402
from vtb_env.tools.python_tools import PythonImageProcessing  # noqa: E402

# module-scoped fixtures shared with the other GRPO test files
policy_path, tasks, tools = grpo_rollouts.policy_path, grpo_rollouts.tasks, grpo_rollouts.tools


@pytest.mark.slow
def test_rollout_runs_real_tools_and_masks_env_tokens(policy_path, tasks, tools):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(policy_path)
    model = AutoModelForCausalLM.from_pretrained(policy_path)
    torch.manual_seed(0)
    pool = EnvPool([VisualToolBenchEnv(tasks=tasks, tools=tools, config=plumbing_config()) for _ in range(8)])
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

"""``HFGenerator`` on a real tiny Llama: the greedy switch, and KV reuse across an episode's rounds in the real env."""

from __future__ import annotations

import pytest
import torch

from tests.support.env_tools import exact_reward, make_task
from tests.support.tiny_models import build_tiny_idefics3, build_tiny_llama
from vtb_agents.generation import HFGenerator
from vtb_agents.rollout import ChatRenderer, run_episodes
from vtb_env.batch import EnvPool
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.tools.base import ToolRegistry


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = build_tiny_llama(tmp_path_factory.mktemp("llama"))
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def _play(policy, tasks, generator: HFGenerator, copies: int = 2):
    """Greedy episodes of each task (``copies`` each, one batch) in real envs without tools (one reply per turn)."""
    config = EnvConfig.preset("default", image_parts="name", system_prompt=None, tool_set="none")
    pool = EnvPool(
        [
            VisualToolBenchEnv(tasks=tasks, tools=ToolRegistry([]), reward=exact_reward(), config=config)
            for _ in range(copies * len(tasks))
        ]
    )
    try:
        return run_episodes(pool, [t.id for t in tasks for _ in range(copies)], generator, ChatRenderer(policy[1]))
    finally:
        pool.close()


def test_greedy_generation_is_the_argmax_and_repeats(policy):
    model, tokenizer = policy
    generator = HFGenerator(model, tokenizer, max_new_tokens=6, greedy=True, temperature=5.0)
    prompt = tokenizer.encode("What is shown in the image? Crop the top left", add_special_tokens=False)
    first, again = generator([prompt]), generator([prompt])
    assert first[0].token_ids == again[0].token_ids
    with torch.no_grad():  # the first token is the argmax of the model's own next-token logits
        logits = model(torch.tensor([prompt])).logits[0, -1]
    assert first[0].token_ids[0] == int(logits.argmax())
    assert first[0].logprobs[0] == pytest.approx(float(logits.log_softmax(-1).max()), abs=1e-5)


def test_kv_reuse_generates_the_same_tokens_as_prefilling_each_round_and_prefills_less(policy):
    tasks = [make_task("three", turns=3), make_task("one", turns=1)]
    plain = HFGenerator(*policy, max_new_tokens=8, greedy=True)
    reusing = HFGenerator(*policy, max_new_tokens=8, greedy=True, kv_reuse=True)
    expected, reused = _play(policy, tasks, plain), _play(policy, tasks, reusing)
    for a, b in zip(expected, reused, strict=True):
        assert a.task_id == b.task_id and a.policy_steps == b.policy_steps
        assert a.completion_ids == b.completion_ids and a.env_mask == b.env_mask  # token for token
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    assert [e.policy_steps for e in reused] == [3, 3, 1, 1]
    # each round of the 3-turn episodes prefills only what the env appended, not the whole dialogue again
    assert reusing.prefilled_tokens < 0.7 * plain.prefilled_tokens, (reusing.prefilled_tokens, plain.prefilled_tokens)


def test_kv_reuse_refuses_a_vision_policy(tmp_path):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    path = build_tiny_idefics3(tmp_path)
    model, processor = AutoModelForImageTextToText.from_pretrained(path), AutoProcessor.from_pretrained(path)
    with pytest.raises(ValueError, match="text policies"):
        HFGenerator(model, processor, kv_reuse=True)

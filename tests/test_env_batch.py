"""EnvPool: tool calls of all episodes run concurrently; a slow call does not stall the others."""

from __future__ import annotations

import time
from concurrent.futures import as_completed

import pytest

from tests.support.env_tools import exact_reward, hermes, make_task, small_tools, unserializable_actions
from vtb_env.batch import EnvPool
from vtb_env.env import EpisodeOverError, VisualToolBenchEnv


def make_pool(n: int) -> EnvPool:
    return EnvPool.make(n, tasks=[make_task(f"t{i}") for i in range(4)], tools=small_tools(), reward=exact_reward())


def test_batched_step_runs_tool_calls_concurrently():
    pool = make_pool(4)
    resets = pool.reset(seed=0)
    assert [info["task"]["id"] for _, info in resets] == [info["task"]["id"] for _, info in make_pool(4).reset(seed=0)]
    start = time.perf_counter()
    results = pool.step([hermes("web_search", query="sleep 0.4")] * 4)
    elapsed = time.perf_counter() - start
    assert elapsed < 1.2, f"4 calls of 0.4 s took {elapsed:.2f} s: not concurrent"
    assert all(r.observation["messages"][-1]["role"] == "tool" and r.reward == 0.0 for r in results)
    finals = pool.step(["It is 10.", None, "It is 10.", "nothing"])
    assert (
        finals[1] is None
        and finals[0].terminated
        and finals[0].reward == 1.0
        and finals[3].info["reward_components"]["rubric_score"] == 0.0
    )
    pool.close()


def test_fast_episodes_complete_while_a_slow_call_runs():
    pool = make_pool(3)
    pool.reset(seed=1)
    slow = pool.submit(0, hermes("web_search", query="sleep 0.6"))
    fast = [pool.submit(i, hermes("calculator", expression="1")) for i in (1, 2)]
    first_two = []
    for future in as_completed([slow, *fast]):
        first_two.append(future)
        if len(first_two) == 2:
            break
    assert slow not in first_two and not slow.done()
    with pytest.raises(RuntimeError, match="in flight"):
        pool.submit(0, "x")
    again = pool.submit(1, "It is 10.").result()  # a fast episode moves on
    assert again.terminated
    assert slow.result().observation["messages"][-1]["role"] == "tool"
    pool.close()


def test_batched_results_match_sequential_stepping():
    actions = [
        [hermes("python_image_processing", code="save save"), "It is 10."],
        [hermes("calculator", expression="9"), "It is 9."],
    ]
    pool = make_pool(2)
    pool.reset(seed=5)
    batched = [pool.step([a[k] for a in actions]) for k in range(2)][-1]
    for i, env_actions in enumerate(actions):
        env = VisualToolBenchEnv(
            tasks=[make_task(f"t{j}") for j in range(4)], tools=small_tools(), reward=exact_reward()
        )
        env.reset(seed=5 + i)
        for action in env_actions:
            obs, reward, terminated, truncated, info = env.step(action)
        assert obs["messages"] == batched[i].observation["messages"] and reward == batched[i].reward
        assert info["record"] == batched[i].info["record"]
    pool.close()


def test_unserializable_dict_actions_are_parse_errors_in_the_pool():
    actions = [action for action, _ in unserializable_actions()]
    pool = make_pool(len(actions))
    pool.reset(seed=0)
    results = pool.step(actions)
    for result, (_, reason) in zip(results, unserializable_actions(), strict=True):
        assert not result.terminated and reason in result.info["parse_errors"][0]
        assert result.observation["messages"][-1]["role"] == "tool"
    assert all(r.terminated for r in pool.step(["It is 10."] * len(actions)))
    pool.close()


def test_a_slow_to_parse_action_does_not_hold_up_the_batch():
    """Parsing runs in the worker: while env 0's action is still being parsed, env 1 is submitted and finishes."""
    import threading

    from vtb_env.config import EnvConfig
    from vtb_env.parsers import PARSERS, ToolCallParser, register_parser

    released, seen = threading.Event(), []

    class SlowFormat(ToolCallParser):
        name = "slow_test_format"

        def detect(self, text):
            return True

        def parse(self, text):
            seen.append(released.wait(timeout=10))  # False if nothing else could run meanwhile
            return text, []

    register_parser(SlowFormat())
    try:
        tasks = [make_task("t0")]
        slow_env = VisualToolBenchEnv(
            tasks=tasks, tools=small_tools(), reward=exact_reward(), config=EnvConfig(tool_format="slow_test_format")
        )
        pool = EnvPool([slow_env, VisualToolBenchEnv(tasks=tasks, tools=small_tools(), reward=exact_reward())])
        pool.reset(seed=0)
        slow = pool.submit(0, "It is 10.")
        fast = pool.submit(1, hermes("calculator", expression="1")).result(timeout=10)
        released.set()
        assert fast.observation["messages"][-1]["role"] == "tool" and slow.result(timeout=10).terminated
        assert seen == [True]
        pool.close()
    finally:
        PARSERS.pop("slow_test_format")


def test_a_finished_episode_cannot_be_stepped_through_the_pool():
    pool = make_pool(2)
    pool.reset(seed=0)
    assert pool.step(["It is 10.", None])[0].terminated
    with pytest.raises(EpisodeOverError, match="reset"):
        pool.submit(0, "It is 10.")
    pool.reset(seed=0, indices=[0])
    assert pool.step(["It is 10.", None])[0].terminated
    pool.close()

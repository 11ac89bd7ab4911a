"""gymnasium conformance: check_env without warnings, spaces, SyncVectorEnv and AsyncVectorEnv."""

from __future__ import annotations

import warnings

import gymnasium
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

import vtb_env  # noqa: F401
from tests.support.env_tools import exact_reward, hermes, make_task, small_tools
from vtb_env.spaces import AssistantActionSpace, DialogueObservationSpace

TASKS = [make_task("a"), make_task("b", turns=2)]


def _make():
    return gymnasium.make("VisualToolBench-v0", tasks=TASKS, tools=small_tools(), reward=exact_reward())


def test_check_env_passes_without_warnings():
    env = _make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any gymnasium warning fails the test
        check_env(env.unwrapped)
    env.close()


def test_spaces_accept_what_the_env_emits_and_reject_other_things():
    actions, observations = AssistantActionSpace(), DialogueObservationSpace()
    actions.seed(0)
    assert actions.sample() in actions and {"role": "assistant", "content": "x"} in actions
    assert (
        5 not in actions
        and {"role": "user", "content": "x"} not in actions
        and "x" * 10 not in AssistantActionSpace(max_length=5)
    )
    sample = observations.sample()
    assert sample in observations
    assert {**sample, "images": ["not an image"], "image_names": ["n"]} not in observations
    assert {**sample, "messages": [{"role": "robot", "content": "x"}]} not in observations
    assert {**sample, "messages": [{"role": "tool", "content": "x"}]} not in observations  # no tool_call_id
    env = _make().unwrapped
    obs, _ = env.reset(seed=0)
    obs_with_image_dropped = {**obs, "images": []}
    assert obs in observations and obs_with_image_dropped not in observations


def _run_vector(vector_env):
    observations, infos = vector_env.reset(seed=3)
    assert len(observations) == 2 and all(obs in vector_env.single_observation_space for obs in observations)
    observations, rewards, terminated, truncated, infos = vector_env.step(
        (hermes("python_image_processing", code="save"), hermes("calculator", expression="1"))
    )
    assert observations[0]["image_names"][-1] == "transformed_image_0.png"
    assert observations[1]["messages"][-1]["role"] == "tool" and not terminated.any()
    return vector_env.step(("It is 10.", "It is 10."))


def test_sync_vector_env():
    vector_env = SyncVectorEnv([_make, _make])
    observations, rewards, terminated, truncated, infos = _run_vector(vector_env)
    assert terminated.shape == (2,) and not truncated.any()
    assert list(terminated) == list(infos["task"]["num_turns"] == 1)
    vector_env.close()


def test_async_vector_env():
    vector_env = AsyncVectorEnv([_make, _make], shared_memory=False)  # custom spaces: no shared memory
    observations, rewards, terminated, truncated, infos = _run_vector(vector_env)
    assert all(obs in vector_env.single_observation_space for obs in observations)
    assert rewards.dtype.kind == "f" and terminated.shape == (2,)
    vector_env.close()

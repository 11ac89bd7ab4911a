"""One env, one stepping thread (issue 22, item 4). Before, two threads stepping one env
interleaved silently: the record and the dialogue held ``call_2`` before ``call_1`` in 20 of 20
trials, with no error."""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.env_tools import exact_reward, hermes, make_task, small_tools
from vtb_env.batch import EnvPool
from vtb_env.env import VisualToolBenchEnv
from vtb_env.stepping import ConcurrentStepError


def new_env() -> VisualToolBenchEnv:
    env = VisualToolBenchEnv(tasks=[make_task("a")], tools=small_tools(), reward=exact_reward())
    env.reset(seed=0)
    return env


def wait_until_stepping(env: VisualToolBenchEnv) -> None:
    while env._guard._holder == "":
        time.sleep(0.001)


def while_stepping(env: VisualToolBenchEnv, other) -> tuple[list, BaseException | None]:
    """Run ``other()`` while a thread is inside a 0.4 s tool call of ``env``; its error, if any."""
    results: list = []
    slow = threading.Thread(target=lambda: results.append(env.step(hermes("web_search", query="sleep 0.4"))))
    slow.start()
    wait_until_stepping(env)
    try:
        other()
        error = None
    except ConcurrentStepError as exc:
        error = exc
    slow.join()
    return results, error


def test_a_second_concurrent_step_raises_and_the_first_is_intact():
    env = new_env()
    results, error = while_stepping(env, lambda: env.step(hermes("web_search", query="sleep 0.1")))
    assert error is not None and "step() called while thread" in str(error) and "is in step()" in str(error)
    assert "one env is stepped by one thread at a time" in str(error)
    record = results[0][4]["record"]
    assert [call.call_id for call in record.tool_calls] == ["call_1"]
    obs, *_ = env.step(hermes("calculator", expression="6*7"))  # the env goes on normally
    assert [call.call_id for call in record.tool_calls] == ["call_1", "call_2"]
    assert [m["tool_call_id"] for m in obs["messages"] if m["role"] == "tool"] == ["call_1", "call_2"]


@pytest.mark.parametrize("what", ["reset", "truncate"])
def test_reset_or_truncate_during_a_step_raises(what):
    env = new_env()
    other = (lambda: env.reset(seed=1)) if what == "reset" else (lambda: env.truncate("budget"))
    results, error = while_stepping(env, other)
    assert error is not None and f"{what}() called while" in str(error)
    assert results[0][4]["record"].tool_calls[0].ok
    env.reset(seed=1)  # free again once the step is over


def test_a_failed_step_gives_the_env_back():
    env = VisualToolBenchEnv(tasks=[make_task("a")], tools=small_tools(), reward=exact_reward())
    with pytest.raises(RuntimeError, match="reset"):
        env.step("hello")  # begin_step fails before any episode: the guard is released
    env.reset(seed=0)
    env.step(hermes("calculator", expression="1"))


def test_envpool_keeps_its_guarantee_and_its_envs_refuse_a_second_stepper():
    pool = EnvPool([new_env() for _ in range(3)])
    try:
        futures = [pool.submit(i, hermes("web_search", query="sleep 0.3")) for i in range(3)]
        with pytest.raises(RuntimeError, match="still has a step in flight"):
            pool.submit(0, hermes("calculator", expression="1"))
        wait_until_stepping(pool.envs[1])
        with pytest.raises(ConcurrentStepError):
            pool.envs[1].step(hermes("calculator", expression="1"))  # behind the pool's back
        assert all(not f.result().terminated for f in futures)
        assert all(r.info["record"].tool_calls[-1].ok for r in pool.step([hermes("calculator", expression="2")] * 3))
    finally:
        pool.close()

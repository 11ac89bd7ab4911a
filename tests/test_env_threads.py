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
from vtb_env.stepping import ConcurrentStepError, StaleStepError


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


# ---- a PendingStep is single-use (issue 32, item 3). Before, end_step(pending) a second time appended the
# round again (the dialogue held the tool messages twice, the record the step twice) with no error; a second
# execute(pending) ran the tools again; two threads applying one step both applied it.


def snapshot(env: VisualToolBenchEnv) -> tuple:
    episode = env._episode
    return (len(episode.dialogue), len(episode.record.tool_calls), len(episode.turn_record.steps), episode.done)


def test_end_step_twice_raises_and_changes_nothing():
    env = new_env()
    pending = env.execute(env.begin_step(hermes("python_image_processing", code="save")))
    obs, *_ = env.end_step(pending)
    before = snapshot(env)
    with pytest.raises(StaleStepError, match="not this env's step in progress"):
        env.end_step(pending)
    assert snapshot(env) == before
    assert obs["image_names"] == ["image_1.png", "transformed_image_0.png"]
    obs, *_ = env.step(hermes("calculator", expression="6*7"))  # the env goes on
    assert [m["tool_call_id"] for m in obs["messages"] if m["role"] == "tool"] == ["call_1", "call_2"]


def test_a_stale_step_leaves_the_step_in_progress_alone():
    env = new_env()
    old = env.execute(env.begin_step(hermes("calculator", expression="1")))
    env.end_step(old)
    current = env.begin_step(hermes("calculator", expression="2"))
    with pytest.raises(StaleStepError):
        env.end_step(old)  # must not release the guard that `current` holds
    with pytest.raises(ConcurrentStepError):
        env.step(hermes("calculator", expression="3"))
    with pytest.raises(StaleStepError):
        env.end_step(new_env().begin_step(hermes("calculator", expression="4")))  # another env's step
    obs, *_ = env.end_step(env.execute(current))
    assert [m["content"] for m in obs["messages"] if m["role"] == "tool"] == ['{"result": "1"}', '{"result": "2"}']


def wait_until_executing(env: VisualToolBenchEnv) -> None:
    while env._guard._stage != "executing":
        time.sleep(0.001)


def test_execute_runs_a_step_once_and_end_step_cannot_run_during_it():
    env = new_env()
    pending = env.begin_step(hermes("python_image_processing", code="save"))
    env.execute(pending)
    with pytest.raises(StaleStepError, match="executed already"):
        env.execute(pending)
    obs, *_ = env.end_step(pending)
    assert obs["image_names"] == ["image_1.png", "transformed_image_0.png"]  # one image: the tool ran once

    slow = env.begin_step(hermes("web_search", query="sleep 0.4"))
    worker = threading.Thread(target=env.execute, args=(slow,))
    worker.start()
    wait_until_executing(env)
    with pytest.raises(StaleStepError, match="executing already"):
        env.end_step(slow)
    worker.join()
    env.end_step(slow)


def apply_from_two_threads(env: VisualToolBenchEnv, pending) -> list[str]:
    start, outcomes = threading.Barrier(2), []

    def apply() -> None:
        start.wait()
        try:
            env.end_step(pending)
            outcomes.append("applied")
        except StaleStepError:
            outcomes.append("stale")

    threads = [threading.Thread(target=apply) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(outcomes)


def test_two_threads_applying_one_step_apply_it_once():
    for _ in range(20):
        env = new_env()
        pending = env.execute(env.begin_step(hermes("calculator", expression="1")))
        assert apply_from_two_threads(env, pending) == ["applied", "stale"]
        assert len(env._episode.record.tool_calls) == 1 and len(env._episode.turn_record.steps) == 1

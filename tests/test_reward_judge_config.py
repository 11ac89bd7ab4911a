"""The env's own judge is configurable like `vtb eval`'s: EnvConfig, gymnasium.make, VTB_JUDGE_*, TRL and verl.

The judge is a real HTTP server on 127.0.0.1 that behaves like a reasoning-model endpoint: it
refuses any request carrying ``temperature`` or ``max_tokens`` (400), and answers the rest.
"""

import json

import gymnasium
import pytest

import vtb_env  # noqa: F401  (registers VisualToolBench-v0)
from tests.support.chat_server import ChatServer
from tests.support.env_tools import small_tools
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.tasks import Rubric, Task, Turn
from vtb_rewards.grpo import compute_score, make_trl_reward_func
from vtb_rewards.judge.factory import JudgeRequest

TASK = Task(
    id="judged",
    turns=(
        Turn(
            prompt="Describe the sign.",
            golden_answer="It is a red stop sign.",
            rubrics=(Rubric(id="r1", description="says the sign is red", weight=5, critical=True),),
        ),
    ),
)
ANSWER = "It is a red stop sign."


def reasoning_judge(request):
    refused = [name for name in ("temperature", "max_tokens") if name in request]
    if refused:
        return {"status": 400, "body": {"error": {"message": f"Unsupported parameter: '{refused[0]}'"}}}
    return {"content": json.dumps({"explanation": "", "judge_result": "Met"})}


@pytest.fixture
def judge(monkeypatch, tmp_path):
    with ChatServer(reasoning_judge) as server:
        monkeypatch.setenv("VTB_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("VTB_JUDGE_MODEL", "o4-mini")
        monkeypatch.setenv("VTB_JUDGE_CACHE", str(tmp_path / "verdicts.sqlite"))
        for name in ("VTB_JUDGE_TEMPERATURE", "VTB_JUDGE_MAX_TOKENS", "VTB_JUDGE_TOKEN_FIELD"):
            monkeypatch.delenv(name, raising=False)
        yield server


def play(env) -> dict:
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(ANSWER)
    env.close()
    assert terminated
    return {"reward": reward, **info["reward_components"]}


def test_default_request_options_fail_on_a_reasoning_judge(judge):
    result = play(VisualToolBenchEnv(tasks=[TASK], tools=small_tools()))
    assert result["judge_errors"] == 1.0 and result["rubric_score"] == 0.0


def test_gymnasium_make_and_env_config_send_none_of_the_refused_fields(judge):
    via_make = play(
        gymnasium.make(
            "VisualToolBench-v0",
            tasks=[TASK],
            tools=small_tools(),
            judge_options={"temperature": None, "max_tokens": "none"},
        )
    )
    config = EnvConfig(judge_options={"temperature": None, "max_tokens": 700, "token_field": "max_completion_tokens"})
    env = VisualToolBenchEnv(tasks=[TASK], tools=small_tools(), config=config)
    sent = env.reward_fn.judge.backend.request("a prompt")
    assert sent["max_completion_tokens"] == 700 and not {"temperature", "max_tokens"} & sent.keys()
    via_config = play(env)
    for result in (via_make, via_config):
        assert result["judge_errors"] == 0.0 and result["rubric_score"] == 1.0 and result["reward"] > 0.9


def test_environment_variables_configure_the_request(judge, monkeypatch):
    monkeypatch.setenv("VTB_JUDGE_TEMPERATURE", "none")
    monkeypatch.setenv("VTB_JUDGE_MAX_TOKENS", "none")
    assert play(VisualToolBenchEnv(tasks=[TASK], tools=small_tools()))["rubric_score"] == 1.0
    assert {"temperature", "max_tokens", "max_completion_tokens"}.isdisjoint(judge.requests[-1])
    monkeypatch.setenv("VTB_JUDGE_MAX_TOKENS", "lots")
    with pytest.raises(ValueError, match="VTB_JUDGE_MAX_TOKENS"):
        VisualToolBenchEnv(tasks=[TASK], tools=small_tools())


def test_trl_and_verl_reward_paths_take_the_options(judge):
    options = {"temperature": None, "max_tokens": None}
    reward_func = make_trl_reward_func({TASK.id: TASK}, judge_options=options)
    assert reward_func(prompts=["p"], completions=[ANSWER], task_id=[TASK.id])[0] > 0.9
    assert reward_func.last_components[0]["judge_errors"] == 0.0
    score = compute_score("vtb", ANSWER, json.dumps(TASK.to_dict()), {}, judge_options=options)
    assert score["judge_errors"] == 0.0 and score["rubric_score"] == 1.0
    refused = compute_score("vtb", ANSWER, TASK.to_dict(), {})  # the defaults still send temperature
    assert refused["judge_errors"] == 1.0


def test_bad_options_are_clear_errors():
    with pytest.raises(ValueError, match="unknown judge options"):
        JudgeRequest().updated({"temprature": 0})
    with pytest.raises(ValueError, match="token_field"):
        JudgeRequest(token_field="max_output_tokens")


def test_env_config_configures_the_default_reward(monkeypatch):
    monkeypatch.delenv("VTB_JUDGE_BASE_URL", raising=False)
    wrong = Task(
        id="w",
        turns=(
            Turn(
                prompt="How much?",
                rubrics=(Rubric(id="n", description="16", weight=5, check={"type": "number", "value": 16}),),
            ),
        ),
        mode_label="tool_redundant",
    )

    def reward(**options):
        env = VisualToolBenchEnv(tasks=[wrong], tools=small_tools(), config=EnvConfig(**options))
        env.reset(seed=0)
        return env.step("It is 99.")[1]

    assert reward() == 0.0  # a wrong answer earns no process credit
    assert reward(reward_options={"process_credit": "always"}) == pytest.approx((0.25 + 0.1) / 2.35)
    with pytest.raises(ValueError, match="unknown reward options"):
        reward(reward_options={"proces_credit": "always"})

"""Full episodes through a real vLLM server: agent -> server -> env -> sandbox -> server -> reward.

The scripted Idefics3 model (conftest) asks for a crop of ``image_1.png``; the server parses the
call (native mode, hermes parser) or returns it as raw text that the env parses (text mode); the
env runs it in the real sandbox (``python_image_processing``), sends the crop back as an image
part, and the model answers. Rewards come from ``vtb_rewards.compose`` with exact checks, or with
the served judge model through ``vtb_rewards.judge``'s OpenAI backend; ``vtb eval`` runs the same
against both servers. Run by ``scripts/test_vllm.sh`` (``pytest -m vllm``).
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import time

import httpx
import pytest
from PIL import Image

from tests.integration.conftest import JUDGE_VERDICT, ROOT, SCRIPTED_ANSWER, SCRIPTED_CALL, VLLMServer
from vtb_agents.openai_chat import OpenAIChatAgent
from vtb_env.env import VisualToolBenchEnv
from vtb_env.loaders.project import save_tasks
from vtb_env.tasks import ImageRef, Rubric, Task, Turn
from vtb_env.tools import ALL_TOOLS, default_tools
from vtb_rewards.compose import PROCESS_COMPONENTS, EpisodeReward, RewardConfig
from vtb_rewards.judge.backends import OpenAIChatBackend
from vtb_rewards.judge.judge import Judge

pytestmark = pytest.mark.vllm

IMAGE_SIZE = (96, 64)
CROP_SIZE = (48, 32)  # what SCRIPTED_CALL's code saves


def _png(size: tuple[int, int], color: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


def _harbour_task(task_id: str = "harbour") -> Task:
    """One turn, one image; rubrics: an exact check the scripted answer meets (weight 5), one it
    misses (weight 1), and one without a check that only an LLM judge can decide (weight 2)."""
    rubrics = (
        Rubric(
            id="count", description="States that there are 3 boats.", weight=5, check={"type": "number", "value": 3}
        ),
        Rubric(id="colour", description="Says the boats are red.", weight=1, check={"type": "text", "any_of": ["red"]}),
        Rubric(id="judged", description="Gives a single clear count.", weight=2),
    )
    turn = Turn(
        prompt="How many boats are in the harbour?",
        images=(ImageRef(name="harbour.png", data=_png(IMAGE_SIZE, (20, 120, 220))),),
        golden_answer="3",
        rubrics=rubrics,
    )
    return Task(id=task_id, turns=(turn,), mode_label="tool_required")


class RequestLog:
    """The request bodies the agent put on the wire (an httpx request hook on the transport under its SDK client)."""

    def __init__(self, agent: OpenAIChatAgent):
        self.bodies: list[dict] = []
        agent._http.event_hooks["request"].append(self._record)

    def _record(self, request: httpx.Request) -> None:
        self.bodies.append(json.loads(request.content))

    def image_parts(self, index: int) -> list[Image.Image]:
        """The images of request ``index``'s ``image_url`` parts, decoded."""
        urls = [
            part["image_url"]["url"]
            for message in self.bodies[index]["messages"]
            if isinstance(message["content"], list)
            for part in message["content"]
            if part.get("type") == "image_url"
        ]
        return [Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) for url in urls]


def _run_episode(server: VLLMServer, mode: str, reward: EpisodeReward, metrics: dict, key: str):
    """One episode of ``_harbour_task`` through the server; returns (record, reward, info, request log, agent calls)."""
    env = VisualToolBenchEnv([_harbour_task()], tools=default_tools(), reward=reward)  # all six, offline backends
    agent = OpenAIChatAgent(server.model, server.base_url, tool_mode=mode, max_retries=0, timeout_s=60)
    requests = RequestLog(agent)
    began = time.perf_counter()
    try:
        observation, info = env.reset(options={"task_id": "harbour"})
        for _ in range(4):
            observation, episode_reward, terminated, truncated, info = env.step(agent.act(observation))
            if terminated or truncated:
                break
    finally:
        agent.close()
        env.close()
    metrics[f"{key}_s"] = round(time.perf_counter() - began, 3)
    assert terminated and not truncated
    return info["record"], episode_reward, info, requests, agent.drain_records()


@pytest.mark.parametrize("mode", ["native", "text"])
def test_full_episode_through_the_server(scripted_vlm_server, vllm_metrics, mode):
    record, reward, info, requests, calls = _run_episode(
        scripted_vlm_server, mode, EpisodeReward(judge=Judge(backend=None)), vllm_metrics, f"episode_{mode}"
    )

    [turn] = record.turns
    call_step, answer_step = turn.steps
    [call] = call_step.tool_calls
    assert (call.name, call.arguments, call.error) == (SCRIPTED_CALL["name"], SCRIPTED_CALL["arguments"], None)
    assert call_step.parser == ("openai" if mode == "native" else "hermes") and not call_step.parse_errors
    assert json.loads(call.output)["stdout"] == f"{IMAGE_SIZE}\n"  # the code really ran on image_1.png
    assert [image["name"] for image in call.images] == ["transformed_image_0.png"]
    assert answer_step.final_answer == turn.final_answer == SCRIPTED_ANSWER

    # The server got the task image first, then the task image and the sandbox's crop.
    assert [image.size for image in requests.image_parts(0)] == [IMAGE_SIZE]
    assert [image.size for image in requests.image_parts(1)] == [IMAGE_SIZE, CROP_SIZE]
    assert [tool["function"]["name"] for tool in requests.bodies[0]["tools"]] == list(ALL_TOOLS)
    assert requests.bodies[0].get("tool_choice") == (None if mode == "native" else "none")
    assert [c.meta["finish_reason"] for c in calls] == (
        ["tool_calls", "stop"] if mode == "native" else ["stop", "stop"]
    )
    assert calls[1].prompt_tokens > calls[0].prompt_tokens and not any(c.error for c in calls)

    # Composed reward: exact checks only (the unchecked rubric is a judge error, counted Not Met).
    components = info["reward_components"]
    assert components["rubric_score"] == pytest.approx(5 / 8)
    assert components["passed"] == 1.0  # the only critical rubric (weight >= 4) is Met
    assert (components["format"], components["tool_success"], components["mode"]) == (1.0, 1.0, 1.0)
    assert components["judge_errors"] == 1.0
    weights = RewardConfig().weights()
    used = {name: w for name, w in weights.items() if w > 0 and name in components}
    # process credit (mode, format, tool success) is earned by the rubric score (the default, docs/rewards.md)
    earned = {name: components["rubric_score"] if name in PROCESS_COMPONENTS else 1.0 for name in used}
    expected = sum(w * components[name] * earned[name] for name, w in used.items()) / sum(used.values())
    assert reward == pytest.approx(expected)
    vllm_metrics[f"episode_{mode}_model_s"] = round(sum(c.latency_s for c in calls), 3)
    vllm_metrics[f"episode_{mode}_tool_s"] = round(call.latency_s, 3)


def test_served_judge_grades_a_served_episode(scripted_vlm_server, judge_server, vllm_metrics):
    """vtb_rewards.judge's OpenAI backend against the judge server decides the rubric without a check."""
    judge = Judge(OpenAIChatBackend(judge_server.model, judge_server.base_url, retries=0))
    _, reward, info, _, _ = _run_episode(
        scripted_vlm_server, "native", EpisodeReward(judge=judge), vllm_metrics, "episode_judged"
    )
    components = info["reward_components"]
    assert components["judge_errors"] == 0.0
    assert components["rubric_score"] == pytest.approx(7 / 8)  # count (5) and judged (2) Met, colour (1) not
    assert judge.stats.backend_calls == 1 and judge.stats.checks == 2
    assert 0.0 < reward < 1.0


def test_vtb_eval_against_both_servers(scripted_vlm_server, judge_server, vllm_metrics, tmp_path):
    """The documented command line: `vtb eval --agent openai:NAME@URL --judge openai:NAME@URL`."""
    data = save_tasks([_harbour_task("harbour-eval")], tmp_path / "tasks").parent
    out = tmp_path / "run"
    began = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "vtb_app.cli",
            "eval",
            "--data",
            str(data),
            "--agent",
            f"openai:{scripted_vlm_server.model}@{scripted_vlm_server.base_url}",
            "--judge",
            f"openai:{judge_server.model}@{judge_server.base_url}",
            "--agent-extra-body",
            json.dumps({"chat_template_kwargs": {"unused_by_this_template": True}}),
            "--out",
            str(out),
            "--no-progress",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    vllm_metrics["vtb_eval_s"] = round(time.perf_counter() - began, 1)
    assert done.returncode == 0, done.stdout + done.stderr
    [record] = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert record["status"] == "ok" and record["answers"] == [SCRIPTED_ANSWER]
    assert record["tool_use"] == {"calls": 1, "failed_calls": 0, "used_tools": True}
    # The env's reward asked the judge server during the episode; the record keeps that verdict
    # (evaluation judges once: the verdict is the LLM's own, not a second lookup through the cache).
    verdicts = {v["rubric_id"]: (v["status"], v["source"]) for v in record["verdicts"][0]}
    assert verdicts == {"count": ("Met", "check"), "colour": ("Not Met", "check"), "judged": ("Met", "llm")}
    assert record["verdicts"][0][2]["explanation"] == json.loads(JUDGE_VERDICT)["explanation"]
    assert record["score"]["score"] == pytest.approx(7 / 8) and record["score"]["passed"] is True
    config = json.loads((out / "config.json").read_text())
    assert config["agent"]["sampling"]["chat_template_kwargs"] == {"unused_by_this_template": True}

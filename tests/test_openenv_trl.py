"""TRL's GRPOTrainer drives ``vtb serve`` over OpenEnv: one GRPO step, every tool call and reward over the wire.

What runs is TRL's own tool loop (``environment_factory``) with the environment class TRL's OpenEnv
pattern uses: one holding an OpenEnv client. Here that is openenv's ``GenericEnvClient`` talking to
``make_app`` under uvicorn on 127.0.0.1; the tool is the real sandboxed ``python_image_processing``;
the reward is the server's. TRL 1.16's OpenEnv-specific worker (``trl.experimental.async_grpo.openenv_harness``)
imports beside ``vtb serve`` on openenv 0.10 (the ``serve`` extra); running it needs a vLLM server and an
OpenEnv ``ResourceSessionFactory`` (docs/training.md).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.slow  # a sandbox pool, uvicorn and one GRPO step of a tiny model: ~30 s on 2 cores

pytest.importorskip("trl")
pytest.importorskip("openenv", reason="openenv is the `serve` extra (docs/training.md; CI: scripts/test_py312.sh)")
pytest.importorskip("uvicorn")

from openenv import GenericEnvClient  # noqa: E402

from tests.support.env_server import Server  # noqa: E402
from tests.support.grpo import coin_flip_policy, one_step_grpo_config  # noqa: E402
from tests.support.grpo_rollouts import PLUMBING_REWARD, TEST_MODEL_RESPONSE_TEMPLATE  # noqa: E402
from vtb_app.integrations import trl as vtb_trl  # noqa: E402
from vtb_app.openenv_server import make_app  # noqa: E402
from vtb_app.serve_limits import ServeLimits  # noqa: E402
from vtb_env.config import EnvConfig  # noqa: E402
from vtb_env.synth import generate  # noqa: E402
from vtb_env.tools.base import ToolRegistry  # noqa: E402
from vtb_env.tools.python_tools import PythonImageProcessing  # noqa: E402


class ServedEpisode:
    """An ``environment_factory`` environment holding an OpenEnv client of ``vtb serve`` (TRL's OpenEnv pattern).

    ``reset`` starts the row's task, the tool method sends the call as an assistant message, and
    ``answer`` (private: TRL offers every public method as a tool) sends the final reply.
    """

    def __init__(self, url: str):
        self.client = GenericEnvClient(base_url=url).sync()
        self.client.connect()
        self.result: Any = None
        self.tool_messages: list[str] = []

    def reset(self, task_id: str, **row: Any) -> None:
        self.result, self.tool_messages = self.client.reset(task_id=task_id), []

    def python_image_processing(self, code: str) -> str:
        """Run Python code on the task's images; save results as transformed_image_<i>.png.

        Args:
            code: the Python code to run
        """
        if self.result.done:
            return "The episode is over: tools are no longer available."
        seen = len(self.result.observation["messages"])
        call = {
            "type": "function",
            "function": {"name": "python_image_processing", "arguments": json.dumps({"code": code})},
        }
        self.result = self.client.step({"message": {"content": "", "tool_calls": [call]}})
        new = self.result.observation["messages"][seen + 1 :]  # after the server's copy of the call
        self.tool_messages += [m["content"] for m in new if m["role"] == "tool"]
        return "\n".join(m["content"] if isinstance(m["content"], str) else "[images]" for m in new)

    def _answer(self, text: str) -> float:
        if not self.result.done:
            self.result = self.client.step({"text": text})
        return float(self.result.reward or 0.0) if self.result.done else 0.0


def served_reward(completions: list, environments: list[ServedEpisode], **_: Any) -> list[float]:
    """Each environment sends its completion's last assistant text as the answer; the server's reward comes back."""
    answers = [next(m["content"] for m in reversed(c) if m["role"] == "assistant") for c in completions]
    return [env._answer(answer or "") for answer, env in zip(answers, environments, strict=True)]


def _parse_tool_calls_like_the_test_model(tokenizer: Any) -> None:
    """TRL reads tool calls with the tokenizer's response template (transformers >= 5.13) or, before, its legacy
    schema: here TRL's own Qwen3 schema with the test model's end of turn (SkyRL 0.3 pins transformers <= 5.8)."""
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__) >= Version("5.13"):
        tokenizer.response_template = TEST_MODEL_RESPONSE_TEMPLATE
    else:
        from trl.chat_template_utils import qwen3_schema

        end_of_turn = qwen3_schema["x-regex"].replace(r"<\|im_end\|>", r"<\|eot_id\|>")
        tokenizer.response_schema = {**qwen3_schema, "x-regex": end_of_turn}


def test_grpo_step_through_vtb_serve_over_openenv(tmp_path_factory, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    policy = coin_flip_policy(tmp_path_factory.mktemp("policy"), "llama")
    tasks = [t for t in generate(40, seed=0) if len(t.turns) == 1][:2]
    config = EnvConfig.preset(
        "default", system_prompt=None, max_tool_calls=2, cap_scope="turn", reward_options=PLUMBING_REWARD
    )
    tools = ToolRegistry([PythonImageProcessing()])
    dataset = vtb_trl.VTBEnvironmentFactory(tasks, tools, EnvConfig.preset("default", system_prompt=None)).dataset()
    limits = ServeLimits(max_sessions=16)
    made: list[ServedEpisode] = []
    try:
        with Server(make_app(tasks, tools, config, limits=limits)) as server:

            def environment_factory() -> ServedEpisode:
                made.append(ServedEpisode(server.url))
                return made[-1]

            tokenizer = AutoTokenizer.from_pretrained(policy)
            _parse_tool_calls_like_the_test_model(tokenizer)
            before = {n: p.detach().clone() for n, p in AutoModelForCausalLM.from_pretrained(policy).named_parameters()}
            trainer = GRPOTrainer(
                model=str(policy),
                processing_class=tokenizer,
                args=one_step_grpo_config(tmp_path),
                train_dataset=dataset,
                reward_funcs=[served_reward],
                environment_factory=environment_factory,
            )
            trainer.train()
            finished = [env.result for env in made if env.result is not None and env.result.done]
            crops = [env.tool_messages[0] for env in made if env.tool_messages]
            for env in made:
                env.client.close()
            log = next(entry for entry in trainer.state.log_history if "loss" in entry)
    finally:
        tools.close()

    assert trainer.state.global_step == 1 and "rewards/served_reward/mean" in log
    assert len(finished) >= 8  # every episode of the step ended on the server, which paid its reward
    components = [r.observation["reward_components"] for r in finished]
    assert all("rubric_score" in c and "mode" in c for c in components)
    assert {c["used_tools"] for c in components} == {0.0, 1.0}  # the coin flip: crops and direct answers
    # an episode's first crop comes back as the sandbox made it (a repeat writes the same bytes: no new image)
    assert crops and all('"exit_code": 0, "images": ["transformed_image_0.png"]' in first for first in crops), crops
    after = dict(trainer.model.named_parameters())
    assert any(not torch.equal(p, after[n].detach().cpu()) for n, p in before.items())


def test_trls_openenv_harness_imports_beside_vtb_serve():
    import importlib.metadata

    from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker
    from trl.experimental.async_grpo.openenv_harness import HarnessRolloutWorker

    assert issubclass(HarnessRolloutWorker, AsyncRolloutWorker)
    assert tuple(int(part) for part in importlib.metadata.version("openenv").split(".")[:2]) >= (0, 10)
    with pytest.raises(importlib.metadata.PackageNotFoundError):  # the old name would overwrite the same package
        importlib.metadata.version("openenv-core")

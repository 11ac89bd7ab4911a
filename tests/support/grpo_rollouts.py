"""What the GRPO rollout and training tests share: the coin-flip policy, short synthetic tasks and the sandboxed
vision tool as module-scoped fixtures, the env configuration for scripted policies, and a generate function that
records batch widths."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.grpo import coin_flip_policy
from vtb_app.integrations.trl_environment import hermes_response_template
from vtb_env import synth
from vtb_env.config import EnvConfig
from vtb_env.tools.base import ToolRegistry
from vtb_env.tools.python_tools import PythonImageProcessing


@pytest.fixture(scope="module")
def policy_path(tmp_path_factory) -> Path:
    """The coin-flip policy as a tiny Llama."""
    return coin_flip_policy(tmp_path_factory.mktemp("policy"), "llama")


@pytest.fixture(scope="module")
def tasks():
    """Short synthetic tasks: one- and two-turn, tool-required and tool-redundant."""
    picked = [t for t in synth.generate(40, seed=0) if len(t.turns) <= 2]
    return picked[:4]


@pytest.fixture(scope="module")
def tools():
    """The sandboxed vision tool, closed after the module."""
    registry = ToolRegistry([PythonImageProcessing()])
    yield registry
    registry.close()


# The scripted policies answer a constant: their only reward spread is the mode decision, which the
# default (process credit earned by the rubric score) does not pay for a wrong answer.
PLUMBING_REWARD = {"process_credit": "always"}


def plumbing_config() -> EnvConfig:
    """The env configuration for the scripted policies: image names in the text, no system prompt, and a cap of 2
    calls per turn (they call once in every turn of multi-turn tasks)."""
    return EnvConfig.preset(
        "default",
        image_parts="name",
        system_prompt=None,
        max_tool_calls=2,
        cap_scope="turn",
        reward_options=PLUMBING_REWARD,
    )


def width_recording(sampler):
    """``sampler`` as a generate function that records each call's batch width (in the returned list)."""
    widths: list[int] = []

    def generate(prompts, images=None):
        widths.append(len(prompts))
        return sampler(prompts, images)

    return generate, widths


def train_args(policy: Path, output_dir: Path, steps: int, *extra: str):
    """``train_grpo.py``'s arguments for the scripted policies: groups of 4, 2 tasks per step, plumbing reward."""
    from vtb_app.integrations import trl as vtb_trl  # needs TRL: imported by the tests that skip without it

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


# TRL parses tool calls with the tokenizer's response template; the test model's Llama-3-style template writes
# hermes calls.
TEST_MODEL_RESPONSE_TEMPLATE = hermes_response_template(
    "<|start_header_id|>assistant<|end_header_id|>\n\n", r"<\|eot_id\|>\s*"
)

"""What trains in a GRPO run through the real TRL trainer: LoRA adapters (peft), the top layers, bf16 autocast.

The policy is the coin-flip scripted model (tests.support.grpo): a group mixes tool calls and direct
answers, so one step has a reward spread and moves whatever is trainable.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("trl")
pytest.importorskip("peft")

from tests.support.grpo import coin_flip_policy  # noqa: E402
from vtb_app.integrations import trl as vtb_trl  # noqa: E402
from vtb_env.synth import generate  # noqa: E402
from vtb_env.tools.base import ToolRegistry  # noqa: E402
from vtb_env.tools.python_tools import PythonImageProcessing  # noqa: E402


@pytest.fixture(scope="module")
def policy_path(tmp_path_factory) -> Path:
    return coin_flip_policy(tmp_path_factory.mktemp("policy"), "llama")


@pytest.fixture(scope="module")
def tools():
    registry = ToolRegistry([PythonImageProcessing()])
    yield registry
    registry.close()


def _train(policy: Path, output_dir: Path, tools: ToolRegistry, *extra: str, rollout_class=vtb_trl.EnvRollout):
    args = vtb_trl.parse_args(
        ["--model", str(policy), "--output-dir", str(output_dir), "--num-generations", "4", "--tasks-per-step", "2"]
        + ["--max-steps", "1", "--max-new-tokens", "8", "--max-tool-calls", "2", "--system-prompt", "none"]
        + ["--loss-type", "grpo", "--seed", "1", "--process-credit", "always", "--task-filter", "turns=1", *extra]
    )
    return vtb_trl.train(args, tasks=generate(40, seed=0), tools=tools, rollout_class=rollout_class)


def _weights(path: Path) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM

    return {n: p.detach().clone() for n, p in AutoModelForCausalLM.from_pretrained(path).named_parameters()}


def _changed(before: dict[str, torch.Tensor], model) -> set[str]:
    after = dict(model.named_parameters())
    return {n for n, p in before.items() if not torch.equal(p, after[n].detach().cpu())}


class TrainableNames(vtb_trl.EnvRollout):
    """Records the names of the parameters that require grad while the trainer runs."""

    names: set[str] = set()

    def __call__(self, prompts, trainer):
        TrainableNames.names = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
        return super().__call__(prompts, trainer)


@pytest.mark.slow
def test_lora_trains_only_the_adapters_and_saves_a_merged_checkpoint(policy_path, tools, tmp_path):
    before = _weights(policy_path)
    _train(
        policy_path,
        tmp_path / "run",
        tools,
        "--learning-rate",
        "0.05",
        "--lora-rank",
        "4",
        rollout_class=TrainableNames,
    )

    assert TrainableNames.names and all("lora_" in n for n in TrainableNames.names)
    saved = _weights(tmp_path / "run")
    assert set(saved) == set(before)  # a plain checkpoint (adapters merged): the base model's parameter names
    moved = {n for n in before if not torch.equal(before[n], saved[n])}
    # the linear layers took their adapters' updates; embeddings and norms did not move
    assert moved and all(n.endswith("proj.weight") or n == "lm_head.weight" for n in moved), sorted(moved)


@pytest.mark.slow
def test_top_layers_train_in_fp32_under_bf16_autocast_and_a_small_step_moves_them(tmp_path, tools):
    path = coin_flip_policy(tmp_path / "policy", "llama", pass_through_blocks=1)  # blocks 0 (scripted) and 1
    before = _weights(path)
    seen: list[tuple[bool, torch.dtype, torch.dtype]] = []

    class Recording(vtb_trl.EnvRollout):
        def __call__(self, prompts, trainer):
            if not seen:
                trainer.model.model.layers[1].mlp.register_forward_hook(
                    lambda module, args, out: seen.append(
                        (torch.is_autocast_enabled("cpu"), out.dtype, module.down_proj.weight.dtype)
                    )
                )
            return super().__call__(prompts, trainer)

    trainer = _train(
        path,
        tmp_path / "run",
        tools,
        *("--learning-rate", "1e-5", "--train-layers", "1", "--bf16-autocast"),
        rollout_class=Recording,
    )
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
    # every forward of the trained block (sampling, and the loss pass through TRL's fused head): autocast, bf16
    # activations, fp32 weights
    assert seen and set(seen) == {(True, torch.bfloat16, torch.float32)}, sorted(set(seen), key=str)
    changed = _changed(before, trainer.model)
    # a 1e-5 step survives in fp32 master weights (in bf16 weights it would round away)
    assert changed and all(n.startswith(("model.layers.1.", "model.norm.", "lm_head.")) for n in changed), changed
    assert "lm_head.weight" in changed

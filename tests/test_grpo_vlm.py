"""TRL 1.16's VLM paths with the families people train: tiny Qwen2.5-VL and Qwen3-VL (tests/support/tiny_qwen_vl.py).

One GRPO step each on CPU, real sandboxed crops, with a hook on the model's vision tower that
counts the images it encodes while sampling (no grad) and in the loss pass (grad):

- ``environment_factory`` (TRL's own tool loop; ``VTBEnvironmentFactory(show_images=True)``):
  Qwen3-VL, whose template TRL recognises (tool-call parsing set up by TRL itself). Qwen2.5-VL's
  own template renders no tools, and TRL refuses it for tool use: tested as such.
- the project's ``rollout_func`` (``vtb_app.integrations.trl.train``, multi-turn tasks): both.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("trl")

from tests.support.grpo import one_step_grpo_config  # noqa: E402
from tests.support.tiny_qwen_vl import build_tiny_qwen_vl  # noqa: E402
from vtb_app.integrations import trl as vtb_trl  # noqa: E402
from vtb_env.config import EnvConfig  # noqa: E402
from vtb_env.synth import generate  # noqa: E402
from vtb_env.tools.base import ToolRegistry  # noqa: E402
from vtb_env.tools.python_tools import PythonImageProcessing  # noqa: E402

CROP = "from PIL import Image\nImage.open('image_1.png').crop((0, 0, 64, 64)).save('transformed_image_0.png')"
CALL = {"name": "python_image_processing", "arguments": {"code": CROP}}


@pytest.fixture(scope="module")
def tools():
    registry = ToolRegistry([PythonImageProcessing()])
    yield registry
    registry.close()


def _policy(tmp_path_factory, family: str) -> Path:
    return build_tiny_qwen_vl(tmp_path_factory.mktemp(family), family, CALL)


class VisionCounter:
    """Images the vision tower encodes, split into loss passes (grad enabled) and sampling (no grad)."""

    def __init__(self, model: torch.nn.Module):
        self.loss: list[int] = []
        self.sampling: list[int] = []
        model.model.visual.register_forward_pre_hook(self._count, with_kwargs=True)

    def _count(self, module, args, kwargs) -> None:
        grid = kwargs["grid_thw"] if "grid_thw" in kwargs else args[1]
        (self.loss if torch.is_grad_enabled() else self.sampling).append(int(grid.shape[0]))


def _grpo_config(output_dir: Path, policy: Path):
    from transformers import GenerationConfig

    # TRL samples with its own generation config: the two-action mask must be handed over
    suppress = GenerationConfig.from_pretrained(policy).suppress_tokens
    return one_step_grpo_config(
        output_dir,
        max_completion_length=1024,  # a tool result (text + image tokens) must fit, or TRL drops it
        seed=3,
        max_tool_calling_iterations=2,
        generation_kwargs={"suppress_tokens": suppress},
    )


@pytest.mark.slow
def test_qwen3_vl_grpo_step_through_environment_factory_sends_tool_images_to_the_vision_tower(
    tmp_path_factory, tools, tmp_path
):
    from transformers import AutoModelForImageTextToText, AutoProcessor
    from trl import GRPOTrainer

    policy = _policy(tmp_path_factory, "qwen3_vl")
    single = [t for t in generate(40, seed=0) if len(t.turns) == 1 and len(t.turns[0].images) == 1][:2]
    # the two-action policy's fixed answer meets no rubric: with the default (process credit earned by the
    # rubric score) every reward is 0 and GRPO has no spread to learn from, so process credit is paid as such
    config = EnvConfig.preset(
        "default",
        image_parts="name",
        system_prompt=None,
        max_tool_calls=2,
        reward_options={"process_credit": "always"},
    )
    factory = vtb_trl.VTBEnvironmentFactory(single, tools, config, show_images=True)
    made: list = []

    def environment_factory():
        made.append(factory())
        return made[-1]

    model = AutoModelForImageTextToText.from_pretrained(policy)
    counter = VisionCounter(model)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    start = time.perf_counter()
    trainer = GRPOTrainer(
        model=model,
        processing_class=AutoProcessor.from_pretrained(policy),
        args=_grpo_config(tmp_path, policy),
        train_dataset=factory.dataset(),
        reward_funcs=[vtb_trl.vtb_env_reward],
        environment_factory=environment_factory,
    )
    trainer.train()
    elapsed = time.perf_counter() - start

    finished = [env for env in made if env.info]
    assert len(finished) == 8
    crops = [c for env in finished for c in env.info["record"].tool_calls if c.error is None]
    assert crops, "no episode called the tool"
    tool_images = sum(len(c.images) for c in crops)
    assert tool_images >= 1
    # sampling saw the 8 prompt images and then, in TRL's tool loop, the crops; the loss pass saw both too
    assert sum(counter.sampling) >= 8 + tool_images, (counter.sampling, counter.loss, tool_images)
    assert counter.loss and sum(counter.loss) == 8 + tool_images
    log = next(entry for entry in trainer.state.log_history if "loss" in entry)
    env_rewards = [env.reward for env in finished]
    assert log["rewards/vtb_env_reward/mean"] == pytest.approx(sum(env_rewards) / len(env_rewards), abs=1e-6)
    changed = {n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p.detach().cpu())}
    assert any(n.startswith("model.visual") for n in changed), "the vision tower got no gradient"
    print(
        f"\nQwen3-VL environment_factory: 1 step x 8 episodes in {elapsed:.1f} s; {len(crops)} crops, "
        f"vision tower images sampling {sum(counter.sampling)} / loss {sum(counter.loss)}"
    )


@pytest.mark.slow  # TRL loads the model before checking the template: ~15 s
def test_qwen2_5_vl_own_template_renders_no_tools_and_trl_refuses_it_for_tool_use(tmp_path_factory, tools, tmp_path):
    from transformers import AutoProcessor
    from trl import GRPOTrainer

    policy = _policy(tmp_path_factory, "qwen2_5_vl")
    single = [t for t in generate(40, seed=0) if len(t.turns) == 1][:1]
    factory = vtb_trl.VTBEnvironmentFactory(single, tools, show_images=True)
    with pytest.raises(ValueError, match="does not support tool calling"):
        GRPOTrainer(
            model=str(policy),
            processing_class=AutoProcessor.from_pretrained(policy),
            args=_grpo_config(tmp_path, policy),
            train_dataset=factory.dataset(),
            reward_funcs=[vtb_trl.vtb_env_reward],
            environment_factory=factory,
        )


@pytest.mark.slow
@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl"])
def test_rollout_func_grpo_step_trains_qwen_vl_on_every_image_of_the_episode(family, tmp_path_factory, tools, tmp_path):
    policy = _policy(tmp_path_factory, family)
    tasks = [t for t in generate(40, seed=0) if len(t.turns) <= 2][:4]
    counters: list[VisionCounter] = []
    steps_episodes: list = []

    class RecordingRollout(vtb_trl.EnvRollout):
        def __call__(self, prompts, trainer):
            if not counters:
                counters.append(VisionCounter(trainer.model))
            output = super().__call__(prompts, trainer)
            steps_episodes.append(output["vtb_episode"])
            return output

    args = vtb_trl.parse_args(
        [
            *("--model", str(policy), "--output-dir", str(tmp_path / "run")),
            *("--num-generations", "4", "--tasks-per-step", "2", "--max-steps", "1"),
            *("--learning-rate", "0.05", "--max-new-tokens", "4", "--max-tool-calls", "2"),
            *("--cap-scope", "turn", "--system-prompt", "none", "--loss-type", "grpo", "--seed", "3"),
        ]
    )
    start = time.perf_counter()
    trainer = vtb_trl.train(args, tasks=tasks, tools=tools, rollout_class=RecordingRollout)
    elapsed = time.perf_counter() - start

    (episodes,) = steps_episodes
    (counter,) = counters
    assert trainer.state.global_step == 1
    with_crops = [e for e in episodes if "transformed_image_0.png" in e.image_names]
    assert with_crops, "no episode got an image back from python_image_processing"
    assert sum(counter.loss) == sum(len(e.images) for e in episodes)  # tool crops included
    assert sum(counter.sampling) >= sum(len(e.images) for e in episodes)
    print(
        f"\n{family} rollout_func: 1 step x 8 episodes in {elapsed:.1f} s; "
        f"{sum(len(e.images) for e in episodes)} images in the loss pass ({len(with_crops)} episodes with crops)"
    )

"""TRL integration (tested with TRL 1.16.x, transformers >= 5.2): GRPO on the environment, two ways.

1. **Single-turn tasks through TRL's own tool loop** (``environment_factory``)::

       factory = VTBEnvironmentFactory(tasks)               # single-turn tasks only
       GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=factory.dataset(),
                   reward_funcs=[vtb_env_reward], environment_factory=factory)

   Defined in ``vtb_app.integrations.trl_environment`` (re-exported here). TRL parses calls with
   the tokenizer's response template, so only formats TRL knows for that template are read.
   ``train_environment_factory(parse_args([...]))`` builds it from the same flags as ``train`` (those only the
   rollout path has exit with the reason).

2. **Multi-turn tasks** (``rollout_func``; TRL's loop cannot add a task's later user turns with
   their images): ``train(parse_args([...]))`` or ``scripts/train_grpo.py``. ``EnvRollout`` plays
   whole episodes with ``vtb_agents.rollout.run_episodes`` (env-owned parsing, tools, caps, turns,
   reward). Public TRL hooks used: ``rollout_func``, reward-function kwargs (``log_metric``,
   ``log_extra``), ``unwrap_model_for_generation``, ``vllm_generation.generate``. Private ones,
   only for VLM policies (``EpisodeImagesGRPOTrainer``): ``_generate``,
   ``_generate_and_score_completions``, ``_compute_loss``, ``_get_per_token_logps_and_entropies``
   -- hence the ``SUPPORTED_TRL`` range, checked at start.

   Mode labels measured online (``args.label_probes = k``, ``--label-probes K``): the last ``k`` rollouts of
   every group run with the tools withdrawn, and the group's label is Tool-Redundant when a rollout that used
   no tool passed (``vtb_agents.mode_probes``); the task's static label is the default (``k = 0``) and the
   fallback. TRL logs ``vtb/mode/online_label_disagreement`` (online vs static), ``vtb/mode/online_redundant``
   and ``vtb/mode/probe_pass_rate``.

   Real checkpoints (``vtb_app.integrations.trl_model``): ``--chat-template`` (a file, or the shipped
   ``chatml-text`` for ChatML text models), ``--image-view ocr`` and ``--ocr-cache``, ``--tools none``,
   ``--task-filter``, ``--lora-rank`` or ``--train-layers``, ``--bf16-autocast`` and ``--kv-reuse``.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Callable, Sequence

from vtb_agents.mode_probes import ModeProbes, label_metrics, probe_config
from vtb_agents.rollout import (
    ChatRenderer,
    Episode,
    HFGenerator,
    VLLMGenerator,
    run_episodes,
    summarize_rollouts,
    vision_inputs,
)
from vtb_app.integrations.trl_args import (
    LABEL_PROBES_HELP,
    VTBTrainArguments,
    parse_args,
    run_env_config,
    run_tasks,
    run_tools,
)
from vtb_app.integrations.trl_environment import (
    VTBEnvironment,
    VTBEnvironmentFactory,
    train_environment_factory,
    vtb_env_reward,
)
from vtb_app.integrations.trl_model import (
    load_run_policy,
    ocr_cache_file,
    prepare_trainable,
    save_trained,
    trainable_parts,
)
from vtb_env.batch import EnvPool
from vtb_env.config import EnvConfig
from vtb_env.env import VisualToolBenchEnv
from vtb_env.tasks import Task
from vtb_env.tools.base import ToolRegistry
from vtb_rewards.compose import EpisodeReward

SUPPORTED_TRL = (">=1.16.0", "<1.17")  # the private GRPOTrainer methods EpisodeImagesGRPOTrainer overrides


def check_trl_version() -> str:
    """TRL's version, or a clear error outside ``SUPPORTED_TRL``."""
    import trl
    from packaging.specifiers import SpecifierSet

    if trl.__version__ not in SpecifierSet(",".join(SUPPORTED_TRL)):
        raise RuntimeError(
            f"TRL {trl.__version__} is installed; vtb_app.integrations.trl is tested with TRL {','.join(SUPPORTED_TRL)}"
        )
    return trl.__version__


# ---- 2. rollout_func: multi-turn episodes --------------------------------------------------------


def label_probes(args: argparse.Namespace) -> ModeProbes:
    """The run's text-only probes (``args.label_probes``, 0 when the namespace has none); exits on a bad count."""
    try:
        return ModeProbes(int(getattr(args, "label_probes", 0) or 0), args.num_generations)
    except ValueError as exc:
        raise SystemExit(f"--label-probes: {exc}") from None


def task_dataset(tasks: Sequence[Task]) -> Any:
    """One row per task. The env builds the real prompt; the row carries the task id to the rollout."""
    from datasets import Dataset

    return Dataset.from_list(
        [{"prompt": [{"role": "user", "content": t.turns[0].prompt, "task_id": t.id}]} for t in tasks]
    )


def accelerator_round_sync(accelerator: Any) -> Callable[[int], int] | None:
    """The most live episodes any process has this round (None on one process: nothing to agree on)."""
    if accelerator.num_processes == 1:
        return None
    import torch

    def sync(active: int) -> int:
        return int(accelerator.gather(torch.tensor([active], device=accelerator.device)).max().item())

    return sync


class EnvRollout:
    """TRL ``rollout_func``: ``(prompts, trainer) -> {prompt_ids, completion_ids, logprobs, env_mask, vtb_episode}``.

    With several processes every rank calls generation the same number of times with the same
    batch width (``run_episodes(round_sync=...)``): vLLM server mode slices its results by
    ``process_index * len(prompts)`` and ZeRO-3 generation gathers parameters in every forward.
    With text-only probes (``label_probes``), the probe positions of each group play in envs without
    tools, and every group's rewards are rescored with its online label after the rollouts.
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        tools: ToolRegistry | None,
        config: EnvConfig,
        processing_class: Any,
        args: argparse.Namespace,
    ):
        self.tasks, self.tools, self.config, self.args = list(tasks), tools, config, args
        self.renderer = ChatRenderer(processing_class)
        self.processing_class = processing_class
        self.pool: EnvPool | None = None
        self.calls = 0
        self.probes = label_probes(args)

    def _pool(self, size: int) -> EnvPool:
        if self.pool is None or len(self.pool) < size:
            if self.pool is not None:
                self.pool.close()
            configs = [probe_config(self.config) if self.probes.is_probe(i) else self.config for i in range(size)]
            self.pool = EnvPool([VisualToolBenchEnv(tasks=self.tasks, tools=self.tools, config=c) for c in configs])
        return self.pool

    def _relabel(self, episodes: list[Episode]) -> None:
        """The groups' online labels (``vtb_agents.mode_probes``), through the env's own reward."""
        if self.probes.probes:
            reward = self.pool.envs[0].reward_fn
            if not isinstance(reward, EpisodeReward):
                raise TypeError(f"online mode labels rescore the env's EpisodeReward; the env has {type(reward)}")
            self.probes.relabel(episodes, reward)

    def __call__(self, prompts: list[list[dict[str, Any]]], trainer: Any) -> dict[str, Any]:
        task_ids = [prompt[-1]["task_id"] for prompt in prompts]
        self.calls += 1
        play = lambda generate: run_episodes(  # noqa: E731
            self._pool(len(task_ids)),
            task_ids,
            generate,
            self.renderer,
            max_completion_tokens=self.args.max_episode_tokens,
            seed=self.args.seed * 1_000_003 + self.calls,
            round_sync=accelerator_round_sync(trainer.accelerator),
        )
        if self.args.use_vllm:
            episodes = play(VLLMGenerator(trainer))
        else:
            from trl.models import unwrap_model_for_generation

            with unwrap_model_for_generation(
                trainer.model_wrapped,
                trainer.accelerator,
                gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
            ) as model:
                episodes = play(
                    HFGenerator(
                        model,
                        self.processing_class,
                        max_new_tokens=self.args.max_new_tokens,
                        temperature=self.args.temperature,
                        top_p=self.args.top_p,
                        kv_reuse=getattr(self.args, "kv_reuse", False),
                    )
                )
        self._relabel(episodes)
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            "logprobs": [e.logprobs for e in episodes],
            "env_mask": [e.env_mask for e in episodes],
            "vtb_episode": episodes,
        }

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


def episode_images_trainer_class() -> type:
    """``GRPOTrainer`` whose log-prob passes see every image of each episode (TRL imported lazily)."""
    from trl import GRPOTrainer

    class EpisodeImagesGRPOTrainer(GRPOTrainer):
        """Scores each episode's tokens with the images the policy saw while generating them.

        TRL 1.16's ``rollout_func`` path gives the scoring passes only the dataset's prompt images.
        Here ``_row_images`` holds the images of the rows being scored (``Episode.images``, in
        placeholder order): the whole batch right after the rollout (old and reference
        log-probs), then each shuffled training slice, carried as the ``episode_images`` column.
        Text-only policies have no images and take TRL's path unchanged.
        """

        _row_images: list[list[Any]] | None = None

        def _generate(self, prompts: list) -> tuple:
            result = super()._generate(prompts)
            extra_fields = result[5]
            self._row_images = [episode.images for episode in extra_fields["vtb_episode"]] if self._is_vlm else None
            return result

        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
            output = super()._generate_and_score_completions(inputs)
            if self._row_images is not None:
                output["episode_images"] = self._row_images
            return output

        def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> Any:
            self._row_images = inputs.get("episode_images")
            return super()._compute_loss(model, inputs)

        def _get_per_token_logps_and_entropies(
            self,
            model,
            input_ids,
            attention_mask,
            logits_to_keep,
            batch_size=None,
            compute_entropy=False,
            compute_aux_loss=False,
            **image_kwargs,
        ):
            rows = self._row_images
            if rows is None or not any(rows):
                return super()._get_per_token_logps_and_entropies(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    batch_size,
                    compute_entropy,
                    compute_aux_loss,
                    **image_kwargs,
                )
            if len(rows) != input_ids.size(0):
                raise RuntimeError(f"{input_ids.size(0)} rows to score but images for {len(rows)} episodes")
            import torch

            batch_size = batch_size or input_ids.size(0)
            logps, entropies, aux = [], [], []
            for start in range(0, input_ids.size(0), batch_size):
                chunk = slice(start, start + batch_size)
                pixels = vision_inputs(self.processing_class, input_ids[chunk], rows[chunk])
                num_images = [len(images) for images in rows[chunk]]
                # One call per chunk, so TRL's own per-chunk slicing of the image tensors is the identity.
                chunk_logps, chunk_entropies, chunk_aux = super()._get_per_token_logps_and_entropies(
                    model,
                    input_ids[chunk],
                    attention_mask[chunk],
                    logits_to_keep,
                    input_ids[chunk].size(0),
                    compute_entropy,
                    compute_aux_loss,
                    num_images=num_images if pixels else None,
                    **pixels,
                )
                logps.append(chunk_logps)
                entropies.append(chunk_entropies)
                aux.append(chunk_aux)
            return (
                torch.cat(logps),
                torch.cat(entropies) if compute_entropy else None,
                torch.stack(aux).mean() if compute_aux_loss else None,
            )

    return EpisodeImagesGRPOTrainer


def make_reward_func(group_size: int) -> Callable[..., list[float]]:
    """The env's composed episode reward, as a TRL reward function that also logs components, MCC and image names."""

    def vtb_reward(
        prompts: list, completions: list, vtb_episode: list[Episode], log_metric=None, log_extra=None, **_: Any
    ) -> list[float]:
        if log_metric is not None:
            metrics = {**summarize_rollouts(vtb_episode, group_size), **label_metrics(vtb_episode, group_size)}
            for name, value in metrics.items():
                log_metric(f"vtb/{name}", value)
        if log_extra is not None:  # the completions table (--log-completions): which images each episode showed
            log_extra("vtb_images", [", ".join(episode.image_names) for episode in vtb_episode])
        return [episode.reward for episode in vtb_episode]

    return vtb_reward


def train(
    args: argparse.Namespace,
    *,
    tasks: Sequence[Task] | None = None,
    tools: ToolRegistry | None = None,
    rollout_class: type = EnvRollout,
):
    """Build everything and run ``trainer.train()``; returns the trainer (tests read its state and model).

    The checkpoint is loaded by ``trl_model.load_policy`` (``--chat-template``, ``--image-view``, bf16 weights
    only with ``--bf16 true`` without ``--bf16-autocast``); ``--lora-rank`` / ``--train-layers`` pick what trains;
    the output directory gets a plain checkpoint (LoRA merged)."""
    check_trl_version()
    label_probes(args)  # a bad count exits before anything loads
    parts = trainable_parts(args)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental in TRL
    tasks = run_tasks(args, tasks)
    tools = run_tools(args, tools)
    config = run_env_config(args)
    policy = load_run_policy(args)
    if getattr(args, "kv_reuse", False) and (args.use_vllm or policy.is_vlm):
        raise SystemExit("--kv-reuse is for a text policy that generates with transformers (not a VLM, not vLLM)")
    with ocr_cache_file(getattr(args, "ocr_cache", None)):
        rollout = rollout_class(tasks, tools, config, policy.processing_class, args)
        trainer = episode_images_trainer_class()(
            model=prepare_trainable(policy.model, parts),
            reward_funcs=[make_reward_func(args.grpo.num_generations)],
            args=args.grpo,
            train_dataset=task_dataset(tasks),
            processing_class=policy.processing_class,
            rollout_func=rollout,
            peft_config=parts.peft_config(),
        )
        try:
            trainer.train()
        finally:
            rollout.close()
    save_trained(trainer, policy.processing_class, parts, args.output_dir)
    return trainer


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    (train_environment_factory if args.loop == "environment_factory" else train)(args)


__all__ = [
    "SUPPORTED_TRL",
    "VTBEnvironment",
    "VTBEnvironmentFactory",
    "EnvRollout",
    "LABEL_PROBES_HELP",
    "VTBTrainArguments",
    "check_trl_version",
    "episode_images_trainer_class",
    "label_probes",
    "make_reward_func",
    "parse_args",
    "task_dataset",
    "train",
    "train_environment_factory",
    "vtb_env_reward",
]

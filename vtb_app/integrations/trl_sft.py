"""A cold start with TRL's own ``SFTTrainer`` on the reference conversations of ``vtb synth --sft``.

``sft_cold_start`` trains a vision-language checkpoint for a few steps on ``sft.parquet``
(``vtb_env.sft``: each task's reference trajectory replayed in the env, then the golden answer)
and saves the result where GRPO (``vtb_app.integrations.trl.train``) can start from it. The loss
is on the assistant tokens only (``assistant_only_loss``: the template must mark them with
``{% generation %}``), so the model learns the calls and answers, not the prompts, tool outputs
or images.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtb_app.integrations.trl_model import TrainableParts, autocast_bf16, load_policy, prepare_trainable, save_policy


@dataclass
class ColdStart:
    """Where the SFT model was saved, and TRL's per-step log (``loss``, ``mean_token_accuracy``, ...)."""

    path: Path
    log_history: list[dict[str, Any]]
    seconds: float


def sft_cold_start(
    model_path: str | Path,
    data: str | Path,
    output_dir: str | Path,
    *,
    max_steps: int,
    learning_rate: float = 1e-3,
    batch_size: int = 8,
    seed: int = 0,
    chat_template: str | None = None,
    image_view: str | None = None,
    parts: TrainableParts = TrainableParts(),
    bf16_autocast: bool = False,
) -> ColdStart:
    """``max_steps`` steps of TRL's ``SFTTrainer`` on the parquet ``data``; the model and processor saved to
    ``output_dir`` (its generation config too: a constrained policy keeps its ``suppress_tokens``).

    A vision-language checkpoint (its config has a ``vision_config``) loads with ``AutoModelForImageTextToText``
    and ``AutoProcessor``, any other with ``AutoModelForCausalLM`` and ``AutoTokenizer`` (text rows, e.g. exported
    through an OCR view). As in GRPO (``vtb_app.integrations.trl_model``): ``chat_template`` (a file or
    ``chatml-text``) and ``image_view`` are attached and saved, ``parts`` picks LoRA or the top layers, and
    ``bf16_autocast`` runs the forward in bfloat16 over fp32 weights; a LoRA model is saved merged."""
    import time

    import torch
    from datasets import load_dataset
    from trl import SFTConfig, SFTTrainer

    from vtb_app.integrations.trl_args import checkpointing

    start = time.perf_counter()
    policy = load_policy(model_path, chat_template=chat_template, image_view=image_view)
    if bf16_autocast:
        autocast_bf16(policy.model)
    dataset = load_dataset("parquet", data_files=str(data), split="train")
    trainer = SFTTrainer(
        model=prepare_trainable(policy.model, parts),
        processing_class=policy.processing_class,
        train_dataset=dataset,
        peft_config=parts.peft_config(),
        args=SFTConfig(
            output_dir=str(output_dir),
            max_steps=max_steps,
            per_device_train_batch_size=batch_size,
            learning_rate=learning_rate,
            lr_scheduler_type="constant",
            assistant_only_loss=True,
            max_length=None,  # images must never be cut from a sequence
            bf16=False,
            use_cpu=not torch.cuda.is_available(),
            **checkpointing(SFTConfig, False),
            report_to=[],
            logging_steps=1,
            save_strategy="no",
            dataloader_num_workers=0,
            seed=seed,
        ),
    )
    trainer.train()
    path = save_policy(trainer.model, policy.processing_class, output_dir)
    return ColdStart(path, list(trainer.state.log_history), time.perf_counter() - start)

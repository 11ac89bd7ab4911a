"""What the GRPO trainer tests share: one CPU step's configuration, and the coin-flip policy (a group of its episodes
mixes tool calls and direct answers, so GRPO has a reward spread)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.tiny_models import TOOL_CALL_OPEN, build_scripted_model

CROP = "from PIL import Image\nImage.open('image_1.png').crop((0, 0, 64, 64)).save('transformed_image_0.png')"
ANSWER = "The answer is 42."


def one_step_grpo_config(output_dir: Path, **overrides: Any):
    """One GRPO step of a tiny policy on CPU: 2 prompts x 4 generations, a large learning rate so one step
    visibly moves the weights; ``overrides`` replace or add ``GRPOConfig`` fields."""
    from trl import GRPOConfig

    fields: dict[str, Any] = {
        "output_dir": str(output_dir),
        "max_steps": 1,
        "per_device_train_batch_size": 8,
        "num_generations": 4,
        "max_completion_length": 512,
        "learning_rate": 0.05,
        "use_cpu": True,
        "report_to": "none",
        "logging_steps": 1,
        "save_strategy": "no",
        "seed": 1,
        "loss_type": "grpo",
        "beta": 0.0,
    }
    return GRPOConfig(**{**fields, **overrides})


def coin_flip_policy(path: Path, family: str, *, pass_through_blocks: int = 0) -> Path:
    """The scripted model with the call/answer choice at the start of a reply made a coin flip.

    ``pass_through_blocks`` (Llama): decoder blocks added on top whose residual writes are zero, so the policy is
    the same but has blocks to freeze or train (``--train-layers``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer

    path = build_scripted_model(
        path, family, tool_call={"name": "python_image_processing", "arguments": {"code": CROP}}, final_answer=ANSWER
    )
    model = (AutoModelForCausalLM if family == "llama" else AutoModelForImageTextToText).from_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    prompt_end = tokenizer.encode("<|start_header_id|>assistant<|end_header_id|>\n\n", add_special_tokens=False)[-1]
    call_open, answer = (
        tokenizer.convert_tokens_to_ids(TOOL_CALL_OPEN),
        tokenizer.encode(ANSWER, add_special_tokens=False)[0],
    )
    with torch.no_grad():
        head = model.get_output_embeddings().weight
        head[call_open] = 0.0  # no dependence on the conversation...
        head[call_open, prompt_end] = head[answer, prompt_end]  # ...and the same logit as the answer
    if pass_through_blocks:
        model = _with_pass_through_blocks(model, pass_through_blocks)
    model.save_pretrained(path)
    return path


def _with_pass_through_blocks(model: Any, blocks: int) -> Any:
    import torch

    config = model.config
    kept = config.num_hidden_layers
    config.num_hidden_layers = kept + blocks
    if getattr(config, "layer_types", None):
        config.layer_types = list(config.layer_types) + [config.layer_types[-1]] * blocks
    grown = type(model)(config)
    grown.load_state_dict(model.state_dict(), strict=False)
    grown.generation_config = model.generation_config
    with torch.no_grad():
        for block in grown.model.layers[kept:]:
            block.self_attn.o_proj.weight.zero_()
            block.mlp.down_proj.weight.zero_()
    return grown.eval()

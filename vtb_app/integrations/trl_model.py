"""A real checkpoint made ready for training: its template and view, which parameters train, in which precision.

Shared by GRPO (``vtb_app.integrations.trl.train``) and SFT (``vtb_app.integrations.trl_sft``):

- ``load_policy``: the model and its tokenizer or processor, with a chat template attached for the run
  (``--chat-template``: a file or a shipped name, ``vtb_agents.chat_render.SHIPPED_TEMPLATES``) and the
  observation view it reads images through (``--image-view``); both are saved with the output checkpoint.
- ``TrainableParts`` / ``prepare_trainable``: all parameters, LoRA adapters through ``peft``
  (``--lora-rank``; TRL's trainers take the ``peft_config``), or the top K transformer blocks with the final
  norm and the output head (``--train-layers K``).
- ``bf16_autocast`` (``--bf16-autocast``): fp32 master weights with every forward (training passes and
  sampling) under ``torch.autocast(bfloat16)`` and the logits returned in fp32, where ``--bf16 true`` loads bf16
  weights, whose small AdamW updates round away. (TRL's ``bf16=True`` over fp32 weights does not autocast on
  CPU: accelerate's mixed precision leaves a CPU model's forward as it is.)
- ``save_policy``: the trained model as a plain checkpoint (LoRA merged), loadable with ``--model``.
- ``ocr_cache_file``: the OCR reads of a run kept in a file (``--ocr-cache``), so the next run reads no
  picture twice.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator


@dataclass
class Policy:
    """A loaded checkpoint: the model, its tokenizer (text) or processor (VLM), and which one it is."""

    model: Any
    processing_class: Any
    is_vlm: bool


def load_policy(
    path: str | Path,
    *,
    chat_template: str | None = None,
    image_view: str | None = None,
    bf16_weights: bool = False,
) -> Policy:
    """The checkpoint at ``path`` with ``chat_template`` (name or file) and ``image_view`` (``pixels``, ``ocr``,
    ``ocr-pages``) attached when given, a pad token and left padding; weights in bfloat16 with ``bf16_weights``.

    Mllama (cross-attention to images, no image tokens in the sequence) is refused."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

    from vtb_agents.chat_render import set_chat_template, set_image_view
    from vtb_agents.generation import is_processor

    config = AutoConfig.from_pretrained(path)
    if config.model_type == "mllama":
        raise SystemExit(
            "Mllama (Llama 3.2 Vision) attends to images through cross-attention, "
            "not image tokens in the sequence: not supported"
        )
    is_vlm = getattr(config, "vision_config", None) is not None
    processing_class = AutoProcessor.from_pretrained(path) if is_vlm else AutoTokenizer.from_pretrained(path)
    if is_vlm and not is_processor(processing_class):
        raise SystemExit(f"{path} is a vision-language model but AutoProcessor gave no image processor")
    try:
        if chat_template is not None:
            set_chat_template(processing_class, chat_template)
        if image_view is not None:
            set_image_view(processing_class, image_view)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    tokenizer = getattr(processing_class, "tokenizer", processing_class)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model_class = AutoModelForImageTextToText if is_vlm else AutoModelForCausalLM
    model = model_class.from_pretrained(path, dtype="bfloat16" if bf16_weights else "float32")
    return Policy(model, processing_class, is_vlm)


@dataclass(frozen=True)
class TrainableParts:
    """Which parameters train: all (default), LoRA adapters (``lora_rank > 0``) or the top ``train_layers`` blocks."""

    lora_rank: int = 0
    lora_alpha: float | None = None  # default: 2 x rank
    lora_dropout: float = 0.0
    lora_target_modules: str = "all-linear"  # or a comma list of module names (q_proj,v_proj)
    train_layers: int = -1  # -1: every layer

    def __post_init__(self) -> None:
        if self.lora_rank < 0:
            raise ValueError(f"--lora-rank must be 0 (off) or positive, got {self.lora_rank}")
        if self.train_layers < -1:
            raise ValueError(f"--train-layers must be -1 (all) or K >= 0, got {self.train_layers}")
        if self.lora_rank and self.train_layers != -1:
            raise ValueError("--lora-rank and --train-layers are two ways to train part of a model: pick one")

    def peft_config(self) -> Any:
        """A ``peft.LoraConfig`` for TRL's ``peft_config``, or None without LoRA."""
        if not self.lora_rank:
            return None
        try:
            from peft import LoraConfig
        except ImportError as exc:
            raise SystemExit(f"--lora-rank needs peft (pip install 'vtb-gym[train]'): {exc}") from None
        targets = self.lora_target_modules
        return LoraConfig(
            r=self.lora_rank,
            lora_alpha=self.lora_alpha if self.lora_alpha is not None else 2 * self.lora_rank,
            lora_dropout=self.lora_dropout,
            target_modules=targets if targets == "all-linear" else [t.strip() for t in targets.split(",")],
            task_type="CAUSAL_LM",
        )


def trainable_parts(args: Any) -> TrainableParts:
    """``TrainableParts`` from a run's flags (exits with the reason on a bad combination)."""
    try:
        return TrainableParts(
            lora_rank=args.lora_rank,
            lora_alpha=args.lora_alpha,
            lora_dropout=args.lora_dropout,
            lora_target_modules=args.lora_target_modules,
            train_layers=args.train_layers,
        )
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def freeze_below_top_layers(model: Any, layers: int) -> list[str]:
    """Only the top ``layers`` transformer blocks, the final norm and the output head keep ``requires_grad``;
    returns the names of the parameters that train. The embeddings' output is made to require grad so that
    activation checkpointing still back-propagates into the trained blocks."""
    blocks = _decoder_blocks(model)
    if layers > len(blocks):
        raise SystemExit(f"--train-layers {layers}: the model has {len(blocks)} transformer blocks")
    trained = {id(p) for block in list(blocks)[len(blocks) - layers :] for p in block.parameters()}
    trained |= {id(p) for p in model.get_output_embeddings().parameters()}
    decoder = model.get_decoder()
    norm = getattr(decoder, "norm", None) or getattr(decoder, "final_layernorm", None)
    if norm is not None:
        trained |= {id(p) for p in norm.parameters()}
    for parameter in model.parameters():
        parameter.requires_grad_(id(parameter) in trained)
    model.enable_input_require_grads()
    return [name for name, p in model.named_parameters() if p.requires_grad]


def _decoder_blocks(model: Any) -> Any:
    decoder = model.get_decoder()
    for name in ("layers", "h", "blocks"):
        blocks = getattr(decoder, name, None)
        if blocks is not None:
            return blocks
    raise SystemExit(f"--train-layers: found no transformer blocks in {type(decoder).__name__}")


def prepare_trainable(model: Any, parts: TrainableParts) -> Any:
    """Freeze what ``parts`` leaves out (``--train-layers``); LoRA is applied by the trainer (``peft_config``)."""
    if parts.train_layers >= 0:
        freeze_below_top_layers(model, parts.train_layers)
    return model


def autocast_bf16(model: Any) -> Any:
    """``model`` with its forward, and its backbone's (``model.base_model``, which TRL's fused log-prob head calls
    directly), run under ``torch.autocast(<device>, bfloat16)``, their logits and last hidden states returned in
    fp32; the weights stay as they are (fp32 master weights for the optimizer)."""
    for module in {id(m): m for m in (model, getattr(model, "base_model", model))}.values():
        _autocast_forward(module)
    return model


def _autocast_forward(module: Any) -> None:
    import functools

    import torch

    forward = module.forward

    @functools.wraps(forward)
    def autocast_forward(*args: Any, **kwargs: Any) -> Any:
        with torch.autocast(next(module.parameters()).device.type, dtype=torch.bfloat16):
            output = forward(*args, **kwargs)
        for name in ("logits", "last_hidden_state"):
            value = getattr(output, name, None)
            if value is not None and value.dtype != torch.float32:
                setattr(output, name, value.float())
        return output

    module.forward = autocast_forward  # an instance attribute: nn.Module.__call__ and generate call it


def load_run_policy(args: Any) -> Any:
    """The run's checkpoint (``load_policy``) as its flags say: ``--chat-template``, ``--image-view``, bf16 weights
    with ``--bf16 true`` alone, fp32 weights under bf16 autocast with ``--bf16-autocast``."""
    autocast = getattr(args, "bf16_autocast", False)
    policy = load_policy(
        args.model,
        chat_template=getattr(args, "chat_template", None),
        image_view=getattr(args, "image_view", None),
        bf16_weights=args.bf16 and not autocast,
    )
    if autocast:
        autocast_bf16(policy.model)
    return policy


def save_trained(trainer: Any, processing_class: Any, parts: TrainableParts, output_dir: str | Path) -> None:
    """A run's output as a plain checkpoint: LoRA adapters merged (``save_policy``), else the trainer's own save."""
    if parts.lora_rank:
        save_policy(trainer.model, processing_class, output_dir)
    else:
        trainer.save_model(output_dir)


def save_policy(model: Any, processing_class: Any, output_dir: str | Path) -> Path:
    """Save a plain checkpoint (LoRA adapters merged into the weights) with its tokenizer or processor."""
    path = Path(output_dir)
    if hasattr(model, "merge_and_unload"):  # a peft model
        model = model.merge_and_unload()
    model.save_pretrained(path)
    processing_class.save_pretrained(path)
    return path


@contextmanager
def ocr_cache_file(path: str | Path | None) -> Iterator[None]:
    """Within the block the shared OCR cache (``vtb_env.ocr_view.default_cache``) holds the reads saved in ``path``
    (when the file exists); on leaving, everything read is written back to ``path``. None: nothing kept."""
    if path is None:
        yield
        return
    from vtb_env.ocr_view import default_cache

    cache = default_cache()
    if Path(path).exists():
        try:
            cache.load(path)
        except ValueError as exc:
            raise SystemExit(f"--ocr-cache: {exc}") from None
    try:
        yield
    finally:
        if cache.words:
            cache.save(path)

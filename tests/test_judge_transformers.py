"""The transformers judge backend with real LlamaForCausalLM checkpoints built offline in the test.

A "verdict" model is scripted so that greedy decoding always emits one added token holding a
whole judge reply, then EOS: every layer's output projections are zero (blocks are identity),
every token embeds to direction 0 except the reply token (direction 1), and ``lm_head`` maps
direction 0 to the reply token and direction 1 to EOS. A random-weight model emits garbage.
"""

import json

import pytest
import torch
from transformers import LlamaForCausalLM

from tests.support.tiny_models import _llama_config, build_tiny_llama, build_tokenizer
from vtb_rewards.judge import JUDGE_ERROR, MET, NOT_MET, Judge, JudgeItem, TransformersBackend, VerdictCache


def build_verdict_model(path, reply: str):
    tokenizer = build_tokenizer()
    tokenizer.add_tokens([reply])
    model = LlamaForCausalLM(_llama_config(tokenizer, hidden_size=64, layers=1, heads=1))
    reply_id = tokenizer.convert_tokens_to_ids(reply)
    with torch.no_grad():
        for _name, param in model.named_parameters():
            if param.dim() > 1:
                param.zero_()
        model.model.embed_tokens.weight[:, 0] = 1.0
        model.model.embed_tokens.weight[reply_id] = 0.0
        model.model.embed_tokens.weight[reply_id, 1] = 1.0
        model.lm_head.weight[reply_id, 0] = 10.0
        model.lm_head.weight[tokenizer.eos_token_id, 1] = 10.0
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


ITEM = JudgeItem("What is 6 x 7?", "42", "The model reports 42.", "It is 42.")


@pytest.mark.parametrize("status", [MET, NOT_MET])
def test_scripted_model_verdicts_are_read(tmp_path, status):
    reply = json.dumps({"explanation": "scripted", "judge_result": status})
    backend = TransformersBackend.from_pretrained(build_verdict_model(tmp_path / "m", reply), max_new_tokens=8)
    cache = VerdictCache(tmp_path / "cache.sqlite")
    verdicts = Judge(backend, cache=cache).judge([ITEM, JudgeItem("q", "g", "other rubric", "a")])
    assert [v.status for v in verdicts] == [status, status]
    assert verdicts[0].explanation == "scripted" and verdicts[0].source == "llm"
    assert len(cache) == 2
    assert Judge(backend, cache=cache).judge([ITEM])[0].source == "cache"


def test_random_weight_model_gives_judge_error_not_not_met(tmp_path):
    backend = TransformersBackend.from_pretrained(build_tiny_llama(tmp_path / "r"), max_new_tokens=12)
    judge = Judge(backend, cache=VerdictCache())
    verdict = judge.judge([ITEM])[0]
    assert verdict.status == JUDGE_ERROR and verdict.error
    assert len(judge.cache) == 0  # errors are not cached: they are retried next time


def test_model_failure_is_a_judge_error(tmp_path):
    backend = TransformersBackend.from_pretrained(build_tiny_llama(tmp_path / "r"), max_new_tokens=4)
    backend.tokenizer.chat_template = "{{ messages[0]['content'] | no_such_filter }}"  # a broken template
    verdict = Judge(backend).judge([ITEM])[0]
    assert verdict.status == JUDGE_ERROR and "no_such_filter" in verdict.error

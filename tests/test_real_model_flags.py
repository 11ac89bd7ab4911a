"""Training a real text checkpoint: the shipped ChatML template, the OCR view and its cache, tools none, task filters.

The checkpoint is ``tests.support.chatml_model``'s: a tiny Llama with SmolLM2's own chat template,
which breaks on the env's list content, so every run here needs ``--chat-template chatml-text``.
Pictures read as known words from an OCR cache file: no Tesseract call.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

from tests.support.chatml_model import OCR_WORDS, write_ocr_cache  # noqa: E402
from vtb_agents.chat_render import SHIPPED_TEMPLATES, chat_template_text, set_chat_template  # noqa: E402
from vtb_agents.rollout import ChatRenderer  # noqa: E402
from vtb_app.integrations import trl as vtb_trl  # noqa: E402
from vtb_app.integrations.task_filter import filter_tasks  # noqa: E402
from vtb_env.config import EnvConfig  # noqa: E402
from vtb_env.env import VisualToolBenchEnv  # noqa: E402
from vtb_env.ocr_view import OcrCache, OcrView, default_cache  # noqa: E402
from vtb_env.synth import generate  # noqa: E402
from vtb_env.tools.base import ToolRegistry  # noqa: E402
from vtb_env.tools.calculator import Calculator  # noqa: E402


@pytest.fixture(scope="module")
def tasks():
    return generate(12, seed=0)


@pytest.fixture
def fresh_ocr_cache():
    """The process-wide OCR cache emptied before and after (a run's --ocr-cache loads into it)."""
    default_cache.cache_clear()
    yield
    default_cache.cache_clear()


def _tokenizer(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def _ocr_observation(tasks, tools: ToolRegistry, cache_path: Path) -> dict:
    env = VisualToolBenchEnv(tasks=tasks, tools=tools, config=EnvConfig.preset("default", image_parts="name"))
    observation, _ = env.reset(options={"task_id": tasks[0].id})
    cache = OcrCache(engine=None)
    cache.load(write_ocr_cache(cache_path, observation["images"]))
    return OcrView(cache)(observation)


def test_smollm2s_template_breaks_on_list_content_and_the_shipped_one_renders_it(chatml_path, tasks, tmp_path):
    tokenizer = _tokenizer(chatml_path)
    observation = _ocr_observation(tasks, ToolRegistry([Calculator()]), tmp_path / "ocr.json")
    with pytest.raises(TypeError):
        ChatRenderer(tokenizer).text(observation["messages"], observation["tools"], add_generation_prompt=True)

    set_chat_template(tokenizer, "chatml-text")
    assert tokenizer.chat_template == chat_template_text("chatml-text") and set(SHIPPED_TEMPLATES) == {"chatml-text"}
    text = ChatRenderer(tokenizer).text(observation["messages"], observation["tools"], add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
    assert '"name": "calculator"' in text.split("\n</tools>")[0]  # the offered tool's schema
    assert f"<ocr>{' '.join(OCR_WORDS)}</ocr>" in text and tasks[0].turns[0].prompt in text  # pages and question
    with pytest.raises(ValueError, match="no such file"):
        set_chat_template(tokenizer, "chatml")


def test_the_shipped_template_writes_calls_and_tool_results_and_marks_only_assistant_tokens(chatml_path):
    tokenizer = _tokenizer(chatml_path)
    set_chat_template(tokenizer, "chatml-text")
    call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "6*7"}}}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "What is 6*7?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me compute."}], "tool_calls": [call]},
        {"role": "tool", "content": [{"type": "text", "text": '{"result": 42}'}], "name": "calculator"},
        {"role": "assistant", "content": "The answer is 42."},
    ]
    out = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert trained == (
        'Let me compute.<tool_call>\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n</tool_call>'
        "<|im_end|>The answer is 42.<|im_end|>"
    )
    assert "<|im_start|>tool\n" in tokenizer.decode(ids) and "What is" not in trained


def test_task_filter_keeps_by_turns_label_and_variant_and_explains_bad_specs(tasks):
    single = filter_tasks(tasks, "turns=1")
    assert single and all(len(t.turns) == 1 for t in single) and len(single) < len(tasks)
    redundant = filter_tasks(tasks, "label=redundant,turns=1|3")
    assert redundant and {t.mode_label for t in redundant} == {"tool_redundant"}
    variant = tasks[0].metadata["variant"]
    assert {t.metadata["variant"] for t in filter_tasks(tasks, f"variant={variant}")} == {variant}
    assert filter_tasks(tasks, None) == list(tasks)
    for spec, error in [
        ("turns=one", "whole numbers"),
        ("label=tool-free", "not one of"),
        ("colour=red", "unknown key 'colour'"),
        ("variant=nope", "the tasks' variants"),
        ("turns", "not key=value"),
        ("turns=5", "keeps none"),
    ]:
        with pytest.raises(ValueError, match=error):
            filter_tasks(tasks, spec)


def _grpo_args(policy: Path, output_dir: Path, *extra: str):
    return vtb_trl.parse_args(
        ["--model", str(policy), "--output-dir", str(output_dir), "--num-generations", "4", "--tasks-per-step", "2"]
        + ["--max-steps", "1", "--learning-rate", "0.05", "--max-new-tokens", "6", "--loss-type", "grpo"]
        + ["--process-credit", "always", "--seed", "1", *extra]
    )


class RecordingRollout(vtb_trl.EnvRollout):
    """Keeps every rollout's episodes and the renderer's view (what the policy was shown)."""

    played: list = []

    def __call__(self, prompts, trainer):
        output = super().__call__(prompts, trainer)
        RecordingRollout.played.append((output["vtb_episode"], self.renderer))
        return output


@pytest.mark.slow
def test_grpo_trains_a_chatml_text_model_through_the_ocr_view_with_no_tools(
    chatml_path, tasks, tmp_path, fresh_ocr_cache
):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    picked = filter_tasks(tasks, "turns=3")  # later turns' prompts and pages come in as env tokens
    cache = write_ocr_cache(tmp_path / "ocr.json", [ref.open() for t in picked for ref in t.images])
    RecordingRollout.played = []
    args = _grpo_args(
        chatml_path,
        tmp_path / "run",
        *("--chat-template", "chatml-text", "--image-view", "ocr", "--ocr-cache", str(cache)),
        *("--tools", "none", "--task-filter", "turns=3", "--kv-reuse"),
    )
    trainer = vtb_trl.train(args, tasks=tasks, tools=ToolRegistry([Calculator()]), rollout_class=RecordingRollout)

    assert trainer.state.global_step == 1
    ((episodes, renderer),) = RecordingRollout.played
    assert {e.task_id for e in episodes} <= {t.id for t in picked}
    shown = renderer.tokenizer.decode(episodes[0].prompt_ids)
    assert f"<ocr>{' '.join(OCR_WORDS)}</ocr>" in shown and "<tools>" not in shown  # pages read, no tool offered
    assert all(e.record is not None and not e.record.tool_calls and e.policy_steps == 3 for e in episodes)
    episode = episodes[0]
    later_turn = renderer.tokenizer.decode(
        [t for t, m in zip(episode.completion_ids, episode.env_mask, strict=True) if not m]
    )
    assert later_turn.count("<|im_start|>user\n") == 2 and "<ocr>" in later_turn
    assert default_cache().misses == 0  # every picture was in the cache file: no OCR engine ran
    # the output is a plain checkpoint that keeps the template and the view for the next stage
    saved = AutoTokenizer.from_pretrained(tmp_path / "run")
    assert saved.chat_template == chat_template_text("chatml-text") and saved.init_kwargs["image_view"] == "ocr"
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "run").config.architectures == ["LlamaForCausalLM"]


def test_bad_real_model_flags_exit_with_the_reason(chatml_path, tasks, tmp_path):
    for extra, reason in [
        (["--image-view", "x-ray"], "unknown image view 'x-ray'"),
        (["--chat-template", str(tmp_path / "missing.jinja")], "no such file"),
        (["--task-filter", "label=maybe"], "--task-filter: label 'maybe'"),
        (["--tools", "teleport"], "--tools: unknown tools"),
        (["--lora-rank", "4", "--train-layers", "1"], "pick one"),
        (["--train-layers", "9"], "has 2 transformer blocks"),
        (["--kv-reuse", "--use-vllm"], "--kv-reuse is for a text policy"),
    ]:
        with pytest.raises(SystemExit, match=reason):
            vtb_trl.train(_grpo_args(chatml_path, tmp_path / "run", *extra), tasks=tasks, tools=ToolRegistry([]))


def test_the_ocr_cache_flag_loads_a_file_and_writes_back_what_the_run_read(tmp_path, fresh_ocr_cache, monkeypatch):
    import vtb_env.ocr_view
    from tests.support.chatml_model import FixedWordsEngine
    from vtb_app.integrations.trl_model import ocr_cache_file

    monkeypatch.setattr(vtb_env.ocr_view, "default_engine", FixedWordsEngine)  # the run's engine for misses
    known, new = [ref.open() for ref in generate(2, seed=3)[0].images[:1] + generate(2, seed=4)[0].images[:1]]
    path = write_ocr_cache(tmp_path / "ocr.json", [known])
    with ocr_cache_file(path):
        default_cache().read(known), default_cache().read(new)  # what a run's OCR view reads
        assert default_cache().misses == 1  # the file's picture is not read again
    assert len(json.loads(path.read_text())["words"]) == 2


def test_a_checkpoint_saved_with_a_view_is_evaluated_through_it(
    chatml_path, tasks, tmp_path, fresh_ocr_cache, monkeypatch
):
    """``vtb eval hf:PATH`` (TransformersAgent) prompts a checkpoint saved by a run with --chat-template and
    --image-view as the run's rollouts did."""
    import vtb_env.ocr_view
    from tests.support.chatml_model import FixedWordsEngine
    from vtb_agents.transformers_agent import TransformersAgent
    from vtb_app.integrations.trl_model import load_policy, save_policy

    monkeypatch.setattr(vtb_env.ocr_view, "default_engine", FixedWordsEngine)
    policy = load_policy(chatml_path, chat_template="chatml-text", image_view="ocr")
    saved = save_policy(policy.model, policy.processing_class, tmp_path / "trained")
    env = VisualToolBenchEnv(tasks=tasks, tools=ToolRegistry([Calculator()]), config=EnvConfig.preset("default"))
    observation, _ = env.reset(options={"task_id": tasks[0].id})

    prompt, images = TransformersAgent(saved, max_new_tokens=2).render(observation)
    renderer = ChatRenderer(policy.processing_class)
    shown = renderer.shown(observation)
    assert images == [] and prompt == renderer.text(shown["messages"], observation["tools"], add_generation_prompt=True)
    assert f"<ocr>{' '.join(OCR_WORDS)}</ocr>" in prompt and '"name": "calculator"' in prompt

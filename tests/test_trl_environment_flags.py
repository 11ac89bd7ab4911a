"""The real-checkpoint flags on TRL's own tool loop (``train_environment_factory``), through the real GRPOTrainer.

The checkpoint is ``tests.support.chatml_model``'s tiny Llama with SmolLM2's template (so every run needs
``--chat-template chatml-text``); pictures read as known words from an OCR cache file: no Tesseract call.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("trl")

from tests.support.chatml_model import OCR_WORDS, write_ocr_cache  # noqa: E402
from vtb_agents.chat_render import chat_template_text  # noqa: E402
from vtb_app.integrations import trl as vtb_trl  # noqa: E402
from vtb_app.integrations.task_filter import filter_tasks  # noqa: E402
from vtb_app.integrations.trl_environment import CHATML_TEXT_RESPONSE_TEMPLATE  # noqa: E402
from vtb_env.ocr_view import default_cache  # noqa: E402
from vtb_env.synth import generate  # noqa: E402
from vtb_env.tools.base import ToolRegistry  # noqa: E402
from vtb_env.tools.calculator import Calculator  # noqa: E402

PAGE = f"<ocr>{' '.join(OCR_WORDS)}</ocr>"


@pytest.fixture(scope="module")
def tasks():
    return generate(12, seed=0)


@pytest.fixture
def ocr_cache(tasks, tmp_path):
    """A cache file reading every single-turn task's pictures as ``OCR_WORDS``; the process cache emptied around."""
    default_cache.cache_clear()
    pictures = [ref.open() for t in filter_tasks(tasks, "turns=1") for ref in t.images]
    yield write_ocr_cache(tmp_path / "ocr.json", pictures)
    default_cache.cache_clear()


def _args(policy: Path, output_dir: Path, *extra: str):
    return vtb_trl.parse_args(
        ["--model", str(policy), "--output-dir", str(output_dir), "--num-generations", "4", "--tasks-per-step", "1"]
        + ["--max-steps", "1", "--learning-rate", "0.05", "--max-new-tokens", "6", "--loss-type", "grpo"]
        + ["--process-credit", "always", "--seed", "1", "--chat-template", "chatml-text", *extra]
    )


class TrainableNames:
    """A trainer callback keeping the names of the parameters that require grad when training begins."""

    def __init__(self):
        from transformers import TrainerCallback

        names: set[str] = set()
        self.names = names

        class Callback(TrainerCallback):
            def on_train_begin(self, args, state, control, model=None, **kwargs):
                names.update(n for n, p in model.named_parameters() if p.requires_grad)

        self.callback = Callback()


def _shown_prompt(trainer) -> str:
    """The first row's prompt as the policy is shown it (its chat template, the tools TRL offers)."""
    tokenizer = trainer.processing_class
    return tokenizer.apply_chat_template(
        trainer.train_dataset[0]["prompt"], tools=trainer.tools or None, tokenize=False, add_generation_prompt=True
    )


@pytest.mark.slow
def test_the_policy_reads_ocr_pages_with_no_tools_and_the_run_keeps_template_and_view(
    chatml_path, tasks, tmp_path, ocr_cache
):
    from transformers import AutoTokenizer

    args = _args(
        chatml_path,
        tmp_path / "run",
        *("--image-view", "ocr", "--ocr-cache", str(ocr_cache), "--tools", "none", "--task-filter", "turns=1"),
    )
    trainer = vtb_trl.train_environment_factory(args, tasks=tasks, tools=ToolRegistry([Calculator()]))

    assert trainer.state.global_step == 1 and trainer.tools == []  # --tools none: no tool method for TRL
    single = {t.id for t in filter_tasks(tasks, "turns=1")}
    assert set(trainer.train_dataset["task_id"]) == single  # --task-filter
    shown = _shown_prompt(trainer)
    assert shown.startswith("<|im_start|>system\n") and PAGE in shown and "<tools>" not in shown
    assert "[image_1.png]" in shown and "<image>" not in shown  # the picture is named and read, not left as pixels
    assert default_cache().misses == 0  # every picture came from the --ocr-cache file
    saved = AutoTokenizer.from_pretrained(tmp_path / "run")
    assert saved.chat_template == chat_template_text("chatml-text") and saved.init_kwargs["image_view"] == "ocr"


@pytest.mark.slow
def test_lora_trains_only_adapters_and_tools_are_offered_with_a_parsable_template(chatml_path, tasks, tmp_path):
    pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    args = _args(chatml_path, tmp_path / "run", "--lora-rank", "2", "--task-filter", "turns=1")
    recorded = TrainableNames()
    trainer = vtb_trl.train_environment_factory(
        args, tasks=tasks, tools=ToolRegistry([Calculator()]), callbacks=[recorded.callback]
    )

    assert recorded.names and all("lora_" in n for n in recorded.names)
    base = {n for n, _ in AutoModelForCausalLM.from_pretrained(chatml_path).named_parameters()}
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "run")
    assert {n for n, _ in saved.named_parameters()} == base  # a plain checkpoint, the adapters merged
    assert [tool.__name__ for tool in trainer.tools] == ["calculator"]
    assert trainer.processing_class.response_template == CHATML_TEXT_RESPONSE_TEMPLATE
    assert '"name": "calculator"' in _shown_prompt(trainer)
    from trl.chat_template_utils import parse_response

    tokenizer = trainer.processing_class
    prompt_ids = tokenizer(_shown_prompt(trainer), add_special_tokens=False)["input_ids"]
    reply = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n</tool_call><|im_end|>'
    parsed = parse_response(tokenizer, tokenizer(reply, add_special_tokens=False)["input_ids"], prefix=prompt_ids)
    assert parsed["tool_calls"][0]["function"] == {"name": "calculator", "arguments": {"expression": "6*7"}}


@pytest.mark.slow
def test_train_layers_leaves_only_the_top_block_norm_and_head_to_the_optimizer(chatml_path, tasks, tmp_path):
    args = _args(chatml_path, tmp_path / "run", "--train-layers", "1", "--tools", "none", "--task-filter", "turns=1")
    recorded = TrainableNames()
    trainer = vtb_trl.train_environment_factory(
        args, tasks=tasks, tools=ToolRegistry([]), callbacks=[recorded.callback]
    )

    top = ("model.layers.1.", "model.norm.", "lm_head.")
    assert recorded.names and all(n.startswith(top) for n in recorded.names)
    assert any(n.startswith("model.layers.1.") for n in recorded.names)
    names = {id(p): n for n, p in trainer.model.named_parameters()}
    optimized = {names[id(p)] for group in trainer.optimizer.param_groups for p in group["params"]}
    assert optimized == recorded.names  # the optimizer holds the top block, the final norm and the head only


def test_flags_only_the_rollout_path_has_exit_with_the_reason(chatml_path, tasks, tmp_path):
    for extra, reason in [
        (["--kv-reuse"], "--kv-reuse keeps the KV cache of the project's own generator"),
        (["--label-probes", "1"], "--label-probes rescores groups in the rollout_func path"),
        (["--max-episode-tokens", "512"], "caps the whole completion with --max-new-tokens"),
        (["--task-filter", "turns=3"], "single-turn tasks only.*--task-filter turns=1"),
        (["--lora-rank", "2", "--train-layers", "1"], "pick one"),
        (["--image-view", "x-ray"], "unknown image view 'x-ray'"),
    ]:
        with pytest.raises(SystemExit, match=reason):
            vtb_trl.train_environment_factory(
                _args(chatml_path, tmp_path / "run", *extra), tasks=tasks, tools=ToolRegistry([])
            )


def test_a_tool_result_reaches_a_text_policy_through_the_view_as_text_parts():
    from tests.support.chatml_model import FixedWordsEngine
    from tests.support.env_tools import ImageMakerTool, make_task
    from vtb_env.config import EnvConfig
    from vtb_env.ocr_view import OcrCache, OcrView

    factory = vtb_trl.VTBEnvironmentFactory(
        [make_task()],
        ToolRegistry([ImageMakerTool()]),
        EnvConfig.preset("default", image_parts="name"),
        view=OcrView(OcrCache(FixedWordsEngine())),
    )
    (row,) = factory.dataset().to_list()
    assert [part["ocr"] for part in row["prompt"][-1]["content"]] == [None, None, "image_1.png"]
    environment = factory()
    environment.reset(**row)
    result = environment.python_image_processing(code="save()")
    assert isinstance(result, list) and all(part["type"] == "text" for part in result)  # no pixels for TRL
    assert {"type": "text", "text": " ".join(OCR_WORDS), "ocr": "transformed_image_0.png"} in result
    assert '"saved": ["transformed_image_0.png"]' in result[0]["text"]
    with pytest.raises(ValueError, match="pick one"):
        vtb_trl.VTBEnvironmentFactory([make_task()], ToolRegistry([]), view=factory.view, show_images=True)


def test_the_command_line_picks_the_loop(chatml_path, tmp_path, monkeypatch):
    """``--loop environment_factory`` reaches TRL's tool loop from ``scripts/train_grpo.py``'s ``main`` (its
    refusal of a rollout-only flag shows which path ran); the default loop is the project's rollout."""
    called = []
    monkeypatch.setattr(vtb_trl, "train", lambda args: called.append(args.loop))
    argv = ["--model", str(chatml_path), "--output-dir", str(tmp_path / "run"), "--tasks", "synth:2:5"]
    vtb_trl.main([*argv, "--kv-reuse", "true"])
    assert called == ["rollout"]
    with pytest.raises(SystemExit, match="TRL's tool loop"):
        vtb_trl.main([*argv, "--kv-reuse", "true", "--loop", "environment_factory"])

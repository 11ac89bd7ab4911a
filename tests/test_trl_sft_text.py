"""SFT for a real text checkpoint: ``vtb synth --sft --view ocr --tools ...`` and TRL's SFTTrainer with the flags.

The checkpoint has SmolLM2's own template (``tests.support.chatml_model``), so training on the export's
list content needs ``chat_template="chatml-text"``; pictures read as known words from an OCR cache file.
"""

from __future__ import annotations

import json

import pytest
import torch

datasets = pytest.importorskip("datasets")
pytest.importorskip("trl")
pytest.importorskip("peft")

from tests.support.chatml_model import OCR_WORDS, build_chatml_model, write_ocr_cache  # noqa: E402
from vtb_agents.chat_render import chat_template_text  # noqa: E402
from vtb_app.cli import main as vtb  # noqa: E402
from vtb_app.integrations.trl_model import TrainableParts  # noqa: E402
from vtb_app.integrations.trl_sft import sft_cold_start  # noqa: E402
from vtb_env.ocr_view import default_cache  # noqa: E402
from vtb_env.prompts import resolve_system_prompt  # noqa: E402
from vtb_env.sft import SFT_FILE  # noqa: E402
from vtb_env.synth import generate  # noqa: E402

N, SEED = 4, 1


@pytest.fixture(scope="module")
def text_export(tmp_path_factory):
    """``vtb synth --sft --view ocr --tools none`` with every picture in the OCR cache file."""
    default_cache.cache_clear()
    out = tmp_path_factory.mktemp("sft")
    cache = write_ocr_cache(out / "ocr.json", [ref.open() for t in generate(N, SEED) for ref in t.images])
    argv = ["synth", "--n", str(N), "--seed", str(SEED), "--out", str(out), "--sft", "--view", "ocr"]
    assert vtb([*argv, "--tools", "none", "--ocr-cache", str(cache)]) == 0
    yield out
    default_cache.cache_clear()


def _texts(message) -> list[str]:
    return [part["text"] for part in message["content"] if part["type"] == "text"]


def test_the_text_export_shows_the_pages_words_and_answers_without_tools(text_export):
    rows = datasets.load_dataset("parquet", data_files=str(text_export / SFT_FILE), split="train")
    tasks = {t.id: t for t in generate(N, SEED)}
    assert sorted(rows["task_id"]) == sorted(tasks) and "images" not in rows.column_names
    assert default_cache().misses == 0  # every picture came from the cache file
    for row in rows:
        messages, task = row["messages"], tasks[row["task_id"]]
        assert json.loads(row["tools"]) == [] and row["tool_calls"] == 0
        assert messages[0]["role"] == "system" and _texts(messages[0]) == [resolve_system_prompt("no_tools")]
        pages = [part for m in messages for part in m["content"] if part.get("ocr")]
        assert len(pages) == len(task.images) and all(p["text"] == " ".join(OCR_WORDS) for p in pages)
        assert not any(part["type"] == "image" for m in messages for part in m["content"])
        answers = [m for m in messages if m["role"] == "assistant"]
        assert [_texts(m) for m in answers] == [[turn.golden_answer] for turn in task.turns]


def test_a_tool_subset_skips_the_tasks_whose_reference_needs_another_tool(tmp_path, capsys):
    cache = write_ocr_cache(tmp_path / "ocr.json", [])
    argv = ["synth", "--n", str(N), "--seed", str(SEED), "--out", str(tmp_path), "--sft", "--view", "ocr"]
    assert vtb([*argv, "--tools", "teleport", "--ocr-cache", str(cache)]) == 2  # a usage error, one line
    assert "vtb synth --tools: unknown tools ['teleport']" in capsys.readouterr().err
    assert vtb([*argv, "--tools", "calculator", "--ocr-cache", str(cache), "--view", "pixels"]) == 0
    rows = datasets.load_dataset("parquet", data_files=str(tmp_path / SFT_FILE), split="train")
    skipped = [line for line in capsys.readouterr().out.splitlines() if line.startswith("skipped")]
    assert skipped and all("python_image_processing" in line and "not offered" in line for line in skipped)
    assert all({t["function"]["name"] for t in json.loads(tools)} == {"calculator"} for tools in rows["tools"])
    assert len(rows) + len(skipped) == N


@pytest.mark.slow
@pytest.mark.parametrize(
    "parts, trained",
    [
        (TrainableParts(train_layers=1), ("model.layers.1.", "model.norm.", "lm_head.")),
        (TrainableParts(lora_rank=4), ("model.layers.",)),  # merged adapters: the blocks' linear layers
    ],
    ids=["top-layer", "lora"],
)
def test_sft_trains_a_chatml_text_model_on_the_text_export(text_export, tmp_path, parts, trained):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = build_chatml_model(tmp_path / "base")
    before = {n: p.detach().clone() for n, p in AutoModelForCausalLM.from_pretrained(path).named_parameters()}
    cold = sft_cold_start(
        path,
        text_export / SFT_FILE,
        tmp_path / "sft",
        max_steps=2,
        batch_size=2,
        chat_template="chatml-text",
        image_view="ocr",
        parts=parts,
        bf16_autocast=True,
    )
    losses = [entry["loss"] for entry in cold.log_history if "loss" in entry]
    assert len(losses) == 2 and all(loss > 0 for loss in losses)
    after = dict(AutoModelForCausalLM.from_pretrained(cold.path).named_parameters())
    assert set(after) == set(before) and all(p.dtype == torch.float32 for p in after.values())
    moved = {n for n, p in before.items() if not torch.equal(p, after[n].detach())}
    assert moved and all(n.startswith(trained) for n in moved), sorted(moved)
    saved = AutoTokenizer.from_pretrained(cold.path)  # what GRPO and evaluation load next
    assert saved.chat_template == chat_template_text("chatml-text") and saved.init_kwargs["image_view"] == "ocr"

"""The held-out answer evaluation (``vtb_app.answer_eval``) and the base -> SFT -> GRPO check
(``scripts/answer_check.py``) on a tiny ChatML model built here with ``save_pretrained``."""

from __future__ import annotations

import json
import statistics

import pytest

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args, run_cli
from vtb_app.answer_eval import AnswerRow, rows_from_run, summarize
from vtb_env import loaders


def _row(task: str, sample: int, variant: str, label: str, rubric: float, passed: float = 0.0) -> AnswerRow:
    return AnswerRow(task, "sampled", sample, variant, label, reward=rubric / 2, rubric=rubric, passed=passed)


def test_summary_is_the_mean_and_spread_of_per_sample_means_overall_per_variant_and_per_label():
    rows = [
        _row("a", 0, "v1", "tool_required", 1.0, 1.0),
        _row("b", 0, "v2", "tool_redundant", 0.0),
        _row("a", 1, "v1", "tool_required", 0.5),
        _row("b", 1, "v2", "tool_redundant", 0.0),
    ]
    summary = summarize(rows)["sampled"]
    per_sample = [statistics.fmean([1.0, 0.0]), statistics.fmean([0.5, 0.0])]
    assert summary["rubric"] == pytest.approx(statistics.fmean(per_sample))
    assert summary["rubric_std"] == pytest.approx(statistics.pstdev(per_sample))
    assert summary["reward"] == pytest.approx(statistics.fmean(per_sample) / 2)
    assert summary["passed"] == pytest.approx(0.25) and summary["tasks_rubric_pos"] == 1
    assert (summary["n_tasks"], summary["n_samples"]) == (2, 2)
    assert summary["by_variant"]["v1"]["rubric"] == pytest.approx(0.75)
    assert summary["by_label"]["tool_redundant"]["rubric"] == 0.0
    assert summary["by_label"]["tool_required"]["rubric_std"] == pytest.approx(0.25)


def _golden_responder(tasks):
    """A served model that gives each turn's golden answer, except on the pair of ``tasks[0]`` (twins share their
    prompts), where it answers nonsense."""
    wrong = tasks[0].metadata["pair_id"]
    answers = {t.prompt: t.golden_answer for task in tasks if task.metadata["pair_id"] != wrong for t in task.turns}

    def respond(request):
        user = [m for m in request["messages"] if m["role"] == "user"][-1]
        content = user["content"]
        text = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
        return {"content": next((a for prompt, a in answers.items() if prompt in text), "I do not know.")}

    return respond


def test_a_served_models_vtb_eval_run_gives_rows_with_variants_labels_and_every_sample(tmp_path, capsys):
    spec = "synth:4:4242"
    tasks = loaders.load_tasks(spec)
    with ChatServer(_golden_responder(tasks)) as server:
        argv = eval_args(spec, f"openai-text:m@{server.base_url}", tmp_path / "run", "--samples", "2")
        code, _, err = run_cli(capsys, *argv)
    assert code == 0, err
    rows = rows_from_run(tmp_path / "run", tasks)
    assert sorted((r.task_id, r.sample) for r in rows) == sorted((t.id, s) for t in tasks for s in (0, 1))
    wrong = tasks[0].metadata["pair_id"]
    pair_of = {task.id: task.metadata["pair_id"] for task in tasks}
    assert max(r.rubric for r in rows if pair_of[r.task_id] == wrong) < min(
        r.rubric for r in rows if pair_of[r.task_id] != wrong
    )
    assert {r.variant for r in rows} == {t.metadata["variant"] for t in tasks}
    assert {r.label for r in rows} == {t.mode_label for t in tasks}


@pytest.mark.slow
def test_answer_check_runs_every_stage_on_a_tiny_chatml_model_and_writes_json_and_figure(tmp_path, monkeypatch):
    from scripts import answer_check
    from tests.support.chatml_model import FixedWordsEngine, build_chatml_model
    from vtb_env import ocr_view

    cache = ocr_view.OcrCache(FixedWordsEngine())
    monkeypatch.setattr(ocr_view, "default_cache", lambda: cache)  # no Tesseract: every page reads the same words
    train, held_out = "synth:4:8800", "synth:2:8801"
    model = build_chatml_model(tmp_path / "model")
    out = tmp_path / "out"
    argv = [
        *("--model", model, "--chat-template", "chatml-text", "--image-view", "ocr"),
        *("--out", out, "--tasks", train, "--eval-tasks", held_out, "--seeds", "0"),
        *("--eval-samples", "2", "--max-new-tokens", "4", "--sft-steps", "2", "--sft-batch-size", "2"),
        *("--grpo-steps", "1", "--num-generations", "2", "--tasks-per-step", "1"),
        *("--json", tmp_path / "check.json", "--plot", tmp_path / "check.png"),
    ]
    answer_check.main([str(arg) for arg in argv])
    result = json.loads((tmp_path / "check.json").read_text())
    assert (tmp_path / "check.png").stat().st_size > 0
    stages = answer_check.stage_figures(result)["0"]
    assert list(stages) == list(answer_check.STAGES)
    for name, figures in stages.items():
        assert figures["n_tasks"] == 2 and 0.0 <= figures["reward"] <= 1.0, name
    seed = result["seeds"]["0"]
    assert [entry["step"] for entry in seed["sft"]["train"]["log"]] == [1, 2]
    assert len(seed["grpo"]["train"]["log"]) == len(seed["control"]["train"]["log"]) == 1
    sampled = seed["grpo"]["held_out"]["summary"]["sampled"]
    assert sampled["n_samples"] == 2 and len(seed["grpo"]["held_out"]["rows"]) == 2 * (1 + 2)
    assert result["sft_rows"] >= 1


def test_the_grpo_stages_take_lora_or_top_layers_from_the_command_line(tmp_path):
    from scripts import answer_check
    from vtb_app.answer_check import grpo_args
    from vtb_app.integrations.trl_model import trainable_parts

    parse = answer_check.build_parser().parse_args
    lora = grpo_args(tmp_path, tmp_path / "out", 0, parse(["--grpo-lora-rank", "16"]))
    top = grpo_args(tmp_path, tmp_path / "out", 0, parse(["--grpo-train-layers", "4"]))
    default = grpo_args(tmp_path, tmp_path / "out", 0, parse([]))
    assert (trainable_parts(lora).lora_rank, trainable_parts(lora).train_layers) == (16, -1)
    assert (trainable_parts(top).lora_rank, trainable_parts(top).train_layers) == (0, 4)
    assert (trainable_parts(default).lora_rank, trainable_parts(default).train_layers) == (0, -1)
    with pytest.raises(SystemExit, match="pick one"):
        trainable_parts(grpo_args(tmp_path, tmp_path, 0, parse(["--grpo-lora-rank", "2", "--grpo-train-layers", "1"])))

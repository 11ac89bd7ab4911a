"""The reading policy (``vtb_agents.two_action_text``): a real transformers model class over the question and the
OCR words of the pictures, with the two action tokens of the pixel policy."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from vtb_agents.rollout import ChatRenderer, policy_view  # noqa: E402
from vtb_agents.two_action_text import (  # noqa: E402
    NO_ACTION_LOGIT,
    TwoActionTextForCausalLM,
    action_token_ids,
    build_tokenizer,
    build_two_action_text,
)
from vtb_agents.two_action_vlm import ANSWER_TEXT, CALL_TEXT  # noqa: E402
from vtb_agents.word_features import NOT_SHARED, PAGE, SHARED_NAME, SHARED_WORD, TEXT  # noqa: E402
from vtb_env.ocr_view import OcrView  # noqa: E402

QUESTION = "In this lab report, what is the Calcium result for S-2?"
PAGE_WORDS = "Clinical chemistry report. Test Result CALCIUM 8.4 mg/dL S-2 Focaccia"
DIALOGUE = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": QUESTION},
            {"type": "text", "text": "[image_1.png]"},
            {"type": "text", "text": PAGE_WORDS, "ocr": "image_1.png"},
        ],
    },
    {"role": "assistant", "content": "", "tool_calls": [{"function": {}}]},
    {"role": "tool", "content": '{"exit_code": 0}'},
    {"role": "assistant", "content": "The Calcium result is 8.4."},
    {"role": "user", "content": "How has the Glucose changed since the chemistry report?"},
]


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    path = build_two_action_text(tmp_path_factory.mktemp("reader"), seed=3)
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def _ids(tokenizer, messages, **kwargs):
    return tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, **kwargs)


def _randomised(model: TwoActionTextForCausalLM) -> TwoActionTextForCausalLM:
    """The same architecture with every weight random (the built one is uniform: nothing to compare)."""
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3)
    return model.eval()


def test_loads_with_auto_classes_and_starts_uniform_over_the_two_actions(policy):
    model, tokenizer = policy
    assert type(model) is TwoActionTextForCausalLM and tokenizer.init_kwargs["image_view"] == "ocr"
    actions = action_token_ids(tokenizer)
    assert tokenizer.decode([actions["call"]]) == CALL_TEXT and tokenizer.decode([actions["answer"]]) == ANSWER_TEXT
    assert set(model.generation_config.suppress_tokens) == set(range(len(tokenizer))) - set(actions.values())
    ids = torch.tensor([_ids(tokenizer, DIALOGUE, add_generation_prompt=True)["input_ids"]])
    logits = model(ids).logits[0]
    assert torch.equal(logits[:, actions["call"]], logits[:, actions["answer"]])  # 1/2 each, everywhere
    others = [i for i in range(len(tokenizer)) if i not in actions.values()]
    assert torch.all(logits[:, others] == NO_ACTION_LOGIT)
    assert 100_000 < sum(p.numel() for p in model.parameters()) < 400_000


def test_template_marks_the_action_tokens_and_wraps_pages():
    tokenizer = build_tokenizer()
    actions = action_token_ids(tokenizer)
    out = _ids(tokenizer, DIALOGUE, return_assistant_tokens_mask=True)
    trained = [token for token, mask in zip(out["input_ids"], out["assistant_masks"], strict=True) if mask]
    assert trained == [actions["call"], actions["answer"]]
    text = tokenizer.apply_chat_template(DIALOGUE, tokenize=False)
    assert f"<|user|> {QUESTION} [image_1.png]<|page|>{PAGE_WORDS}<|/page|><|eot_id|>" in text
    assert tokenizer.decode(tokenizer(QUESTION)["input_ids"]) == QUESTION  # one token per character
    head = tokenizer.apply_chat_template(DIALOGUE[:1], tokenize=False, add_generation_prompt=True)
    assert text.startswith(head)  # prefix-preserving, as the rollout needs


def test_words_are_marked_where_question_and_page_share_them(policy):
    model, tokenizer = policy
    ids = torch.tensor([_ids(tokenizer, DIALOGUE, add_generation_prompt=True)["input_ids"]])
    words = model.reader.features.words(ids, torch.ones_like(ids, dtype=torch.bool))
    tokens = tokenizer.convert_ids_to_tokens(ids[0])
    seen = {}
    for i in torch.nonzero(words.ends[0]).flatten().tolist():
        seen.setdefault("".join(tokens[words.start[0, i] : i]), []).append(
            (int(words.word_segment[0, i]), int(words.shared[0, i]))
        )
    assert seen["Calcium"] == [(TEXT, NOT_SHARED)]  # the question's word; the page comes after it
    assert seen["CALCIUM"] == [(PAGE, SHARED_NAME)]  # case-insensitive, neither side all-lowercase
    assert seen["S-2"] == [(TEXT, NOT_SHARED), (PAGE, SHARED_NAME)]  # codes are one word
    assert seen["Result"] == [(PAGE, SHARED_WORD)] and seen["report."] == [(PAGE, SHARED_WORD)]
    assert seen["Focaccia"] == [(PAGE, NOT_SHARED)] and seen["8.4"] == [(PAGE, NOT_SHARED)]
    assert seen["chemistry"] == [(PAGE, NOT_SHARED), (TEXT, SHARED_WORD)]  # a later question matches the page
    assert seen["Glucose"] == [(TEXT, NOT_SHARED)]
    assert "exit_code" in seen and all(segment == 0 for segment, _ in seen["exit_code"])  # tool output: neither


def test_causal_and_blind_to_left_padding(policy):
    """A prefix's logits do not depend on what follows (the rollout and the loss pass see the same decisions),
    and left padding (batched generation) changes nothing."""
    model, tokenizer = policy
    model = _randomised(TwoActionTextForCausalLM(model.config))
    ids = torch.tensor([_ids(tokenizer, DIALOGUE, add_generation_prompt=True)["input_ids"]])
    full = model(ids).logits
    for cut in (30, 90, ids.size(1) - 20):
        assert torch.allclose(model(ids[:, :cut]).logits, full[:, :cut], atol=1e-4)
    pad = tokenizer.pad_token_id
    padded = torch.cat([torch.full((1, 9), pad), ids], dim=1)
    mask = torch.cat([torch.zeros(1, 9, dtype=torch.long), torch.ones_like(ids)], dim=1)
    assert torch.allclose(model(padded, attention_mask=mask).logits[:, 9:], full, atol=1e-4)
    actions = list(action_token_ids(tokenizer).values())
    assert (full[0, -1, actions[0]] - full[0, -1, actions[1]]).abs() > 1e-3  # the random model does decide


def test_renderer_reads_the_view_the_tokenizer_names(tmp_path):
    blind = AutoTokenizer.from_pretrained(build_two_action_text(tmp_path, image_view="ocr-pages"))
    view = policy_view(blind)
    assert isinstance(view, OcrView) and not view.question and ChatRenderer(blind).view is not None
    with pytest.raises(ValueError, match="image_view"):
        build_two_action_text(tmp_path / "bad", image_view="pixels")


@pytest.mark.slow
@pytest.mark.timeout(2400)  # ~6 min alone on 2 cores (Tesseract reads every picture once); more on a loaded machine
def test_the_reading_policy_learns_mode_selection_on_v3_twins(tmp_path):
    """A shortened ``scripts/learning_check.py`` run at its defaults (the reading policy on the default v3 twins):
    the SFT warm-up on the reference conversations, then GRPO through TRL's loop in the real env, held-out greedy.

    The full check (288 tasks, 60 GRPO steps) is in docs/training.md; this run keeps the warm-up and takes 10
    GRPO steps on 128 tasks, on the pairs whose labels Tesseract confirms (``--labels reader``, v3's default).
    Measured: +0.072 -> 0.635 after SFT -> 0.917 (752 s of pytest beside two other runs on 2 cores). The policy
    shown the pages' words without the question stays near 0 with the full budget (docs/training.md)."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("learning_check", root / "scripts" / "learning_check.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    args = script.parse_args(
        ["--tasks", "synth:128:0", "--eval-tasks", "synth:48:1", "--max-steps", "10", "--eval-modes", "greedy"]
    )
    assert args.policy == "text" and args.generator == "v3" and args.labels == "reader"  # the defaults under test
    result = script.run(args)
    before, after_sft, after = (
        result["before"]["greedy"],
        result["sft"]["held_out"]["greedy"],
        result["after"]["greedy"],
    )
    print(
        f"\nheld-out greedy MCC {before['mcc']:+.3f} -> {after_sft['mcc']:+.3f} after SFT -> {after['mcc']:+.3f} "
        f"after {len(result['curve'])} GRPO steps; {result['total_seconds']:.0f} s "
        f"({result['total_cpu_seconds']:.0f} CPU s)"
    )
    assert result["sft"]["skipped"] == 0 and len(result["curve"]) == 10
    assert before["mcc"] <= 0.3, before  # uniform over the two actions (48 tasks: MCC noise ~0.15)
    assert after["mcc"] >= 0.6 and after["mcc"] - before["mcc"] >= 0.5, (before, after)
    assert after["tool_call_success"] == 1.0  # one call per turn, and it runs in the sandbox


def _learning_check_script():
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("learning_check", root / "scripts" / "learning_check.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_reader_labels_are_v3s_default_and_refused_for_the_designed_generators(capsys):
    script = _learning_check_script()
    assert script.parse_args([]).labels == "reader"
    assert script.parse_args(["--generator", "v1"]).labels == "generator"
    assert script.parse_args(["--tasks", "runs/tasks.jsonl"]).labels == "generator"  # a file's labels as they are
    with pytest.raises(SystemExit):
        script.parse_args(["--generator", "v2", "--labels", "reader"])
    assert "only v3's labels are defined by a reader" in capsys.readouterr().err
    from vtb_app.learning_tasks import load_learning_tasks, selection

    with pytest.raises(SystemExit, match="reader labels confirm synth:N:SEED pairs only"):
        load_learning_tasks("demo", "v3", reader=lambda image: "")
    demo = load_learning_tasks("demo", "v3")
    assert selection(demo[:4])["tasks"] == 4


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_saved_policy_is_scored_on_other_held_out_tasks_the_reader_confirms(tmp_path):
    """``--evaluate``: a saved policy on another held-out draw, per task, on the pairs whose labels Tesseract's
    own readings (the policy's view, through the OCR cache) confirm."""
    import json

    from vtb_app.learning_policies import cached_reader
    from vtb_app.learning_tasks import load_learning_tasks
    from vtb_env import ocr

    if not ocr.is_available():
        pytest.skip("tesseract is not installed (scripts/setup.sh installs it)")
    script = _learning_check_script()
    policy, out = build_two_action_text(tmp_path / "policy", seed=1), tmp_path / "held_out.json"
    cache = tmp_path / "ocr.json"
    script.main(
        ["--evaluate", str(policy), "--eval-tasks", "synth:6:2", "--eval-modes", "greedy"]
        + ["--ocr-cache", str(cache), "--json", str(out)]
    )
    result = json.loads(out.read_text())
    assert result["labels"]["labels"] == "reader" and result["n_eval_tasks"] == 6 and cache.exists()
    drawn = result["labels"]["eval"]
    assert drawn["tasks"] == 6 and drawn["indices_scanned"] > drawn["pairs"]  # a refused pair is counted
    outcomes = result["held_out"]["greedy"]["outcomes"]
    tasks = load_learning_tasks("synth:6:2", "v3", cached_reader)  # the same pairs again, from the cache
    assert sorted(outcomes) == sorted(t.id for t in tasks)
    assert all(
        o in (["TP"], ["FN"]) if t.mode_label == "tool_required" else o in (["TN"], ["FP"])
        for t in tasks
        for o in [outcomes[t.id]]
    )
    plain = [t.id for t in load_learning_tasks("synth:6:2", "v3")]
    assert plain != [t.id for t in tasks]  # the generator's first six include a pair Tesseract does not confirm


def test_the_seed_sweep_scores_held_out_draws_under_the_training_runs_labels_and_readings():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "learning_check_seeds.py"
    spec = importlib.util.spec_from_file_location("learning_check_seeds", path)
    seeds = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(seeds)
    extra = ["--ocr-cache", "c.json", "--max-steps", "5", "--labels=generator", "--seed", "3"]
    assert seeds._shared_options(extra) == ["--ocr-cache", "c.json", "--labels=generator"]
    with pytest.raises(SystemExit, match="drop --policy-dir"):
        seeds.main(["--out", "unused", "--held-out", "synth:8:2", "--", "--policy-dir", "x"])

"""Mode selection in reports (seed 000): which label an episode gets, and what counts as "used tools".

Labels come from the evaluated model's own text-only pass. With several samples of that pass,
``LABEL_RULES`` say how they combine into one label per task (the report states the rule):

- ``any`` (default, the seed's wording "if a task *can be solved* using text reasoning alone"):
  Tool-Redundant when any fully judged sample passes; Tool-Required when every sample was judged
  and none passes; otherwise (some sample unjudged or failed to run, none passing) no label.
- ``majority``: Tool-Redundant when more than half of the run's samples pass, Tool-Required when
  at least half fail (a tie is not a majority for "can be solved"); otherwise no label.

"Used tools" for the confusion matrix (``MCC_READINGS``) is the reward's rule,
``vtb_rewards.mode.counted_tools``: ``any`` (the paper's reading, default) counts a call of any tool;
``vision`` counts the decision the seed defines: the vision tool on a task with images when its sandbox saw
it do visual work (``image_work`` in the stored call: records written before that field was kept count no
vision call), or a lookup tool on a task that needs one (the record's ``task.needs_lookup``; records written
before it had that field: a lookup in ``task.reference_tools``). Table 7's proactivity counts every tool
under both readings.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from vtb_app.evaluation.records import episode_calls, judging_complete
from vtb_app.evaluation.runs import Run
from vtb_env.toolsets import LOOKUP_TOOLS
from vtb_rewards.mode import ModeLabelStore, call_counts, counted_tools, label_from_text_only

LABEL_RULES = ("any", "majority")
MCC_READINGS = ("any", "vision")


def used_tools(record: Mapping[str, Any], reading: str = "any") -> bool:
    """Did the stored episode take the tool-use decision that mode selection scores? The reward's
    reading (``vtb_rewards.mode.counted_tools``) over the record's task summary (``runner.task_summary``)."""
    if reading not in MCC_READINGS:
        raise ValueError(f"unknown MCC reading {reading!r}; choose one of {MCC_READINGS}")
    task = record.get("task") or {}
    has_images = any(turn.get("images") for turn in task.get("turns", []))
    lookup_needed = task.get("needs_lookup")
    if lookup_needed is None:  # a record written before the field
        lookup_needed = bool(set(task.get("reference_tools") or ()) & set(LOOKUP_TOOLS))
    names = counted_tools(reading, has_images, bool(lookup_needed))
    return any(
        call_counts(str(call.get("name")), call.get("error_kind"), call.get("image_work"), reading, names)
        for call in episode_calls(record)
    )


def text_only_results(run: Run, rule: str = "any") -> dict[str, bool]:
    """Task id -> "solved without tools" from a text-only run's samples, by ``rule`` (module doc);
    tasks whose outcome the rule cannot decide yet (episodes failed, never ran, or judged
    incompletely) are left out: rerun them with ``--resume``."""
    if rule not in LABEL_RULES:
        raise ValueError(f"unknown label rule {rule!r}; choose one of {LABEL_RULES}")
    samples = run.samples
    passes: dict[str, int] = {}
    fails: dict[str, int] = {}
    for record in run.records:
        task_id = record["task_id"]
        passes.setdefault(task_id, 0)
        fails.setdefault(task_id, 0)
        if judging_complete(record):
            if record["score"]["passed"]:
                passes[task_id] += 1
            else:
                fails[task_id] += 1
    decided = {}
    for task_id in passes:
        p, f = passes[task_id], fails[task_id]
        if rule == "any":
            if p:
                decided[task_id] = True
            elif f >= samples:
                decided[task_id] = False
        elif 2 * p > samples:
            decided[task_id] = True
        elif 2 * f >= samples:
            decided[task_id] = False
    return decided


def mode_labels_from_text_only(run: Run, rule: str = "any") -> dict[str, str]:
    """Per-task labels from a text-only run (seed 000): solved without tools -> tool_redundant."""
    return {task_id: label_from_text_only(passed) for task_id, passed in text_only_results(run, rule).items()}


def episode_mode_label(record: Mapping[str, Any], labels: Mapping[str, str] | None) -> tuple[str | None, str]:
    """(label, where it came from) for an episode's mode outcome.

    Seed 000: a label is the outcome of the evaluated model's own text-only pass. So ``labels``
    (a label store or a text-only run given to the report) come first, then the label the eval
    run used (``vtb eval --mode-labels``, stored in the record); a task's built-in label (the
    generator's, for synthetic tasks) is only the fallback.
    """
    for label, source in (
        ((labels or {}).get(record["task_id"]), "report labels"),
        (record.get("mode_label"), "eval labels"),
        (record["task"].get("mode_label"), "task"),
    ):
        if label:
            return label, source
    return None, "none"


def run_model(config: Mapping[str, Any]) -> str | None:
    """The model a run evaluated (the agent before any ablation wrapper): the key of its mode labels."""
    if config.get("model"):
        return str(config["model"])
    agent = config.get("agent")
    if isinstance(agent, Mapping):
        inner = agent.get("inner")
        return str(inner.get("name") if isinstance(inner, Mapping) else inner or agent.get("name"))
    return str(agent) if agent else None


def pick_labels(runs: Iterable[Run], store: ModeLabelStore | None = None, rule: str = "any") -> list[dict[str, str]]:
    """Mode labels for each run (in order): the store's labels of the run's model when a store is
    given, else those of a text-only (``no_tools``) run of the same model among ``runs`` by ``rule``."""
    runs = list(runs)
    text_only = {
        run_model(r.config): mode_labels_from_text_only(r, rule) for r in runs if r.config.get("ablation") == "no_tools"
    }
    chosen = []
    for run in runs:
        model = run_model(run.config)
        labels = store.labels(model) if store is not None and model else {}
        chosen.append(labels or text_only.get(model) or {})
    return chosen

"""The report's tables (for Markdown and HTML alike) from run summaries (``metrics.summarize_run``).

APR and ARS count tasks, each the mean of its samples, shown as mean ± standard deviation across
samples with n (tasks) per cell; the headline adds the 95% bootstrap interval over tasks, and a
table of pass@k / pass^k. When several runs are compared, the best cell of each metric column is
bold and the second best (3+ runs) italic, as the paper's red and blue; † marks a cell that counts
unjudged rubrics as not Met (a lower bound), with the APR over fully judged tasks beside it.
"""

from __future__ import annotations

from typing import Any, Sequence

from vtb_app.evaluation.cells import (
    PARTIAL,
    Cell,
    Table,
    ci_cell,
    fmt,
    mark_best,
    metric_cell,
    number_cell,
    pct,
)
from vtb_app.evaluation.metrics import PROCESS_METRICS, REWARD_COMPONENTS, TURNCASES
from vtb_app.evaluation.runs import DOMAIN_COLUMNS, OTHER_DOMAIN
from vtb_app.evaluation.stats import BOOTSTRAP_RESAMPLES
from vtb_rewards.process import ERROR_TYPES

SHORT_DOMAINS = {
    "STEM": "STEM",
    "Medical": "Med",
    "Finance": "Fin",
    "Sports": "Sprt",
    "Generalist": "Gen",
    OTHER_DOMAIN: "Other",
}
PREFIXES = {"single-turn": "ST", "multi-turn": "MT"}
JUDGED_COMPONENTS = ("rubric_score", "passed")  # reward components that read the rubric verdicts


def scoring_note(summaries: Sequence[dict[str, Any]]) -> str:
    """How the numbers were computed, for every table's title: the critical rule and multi-turn mode."""
    kinds = {(s["scoring"]["critical_rule"], s["scoring"]["multi_turn"]) for s in summaries}
    if len(kinds) == 1:
        rule, mode = kinds.pop()
        return f"critical rule {rule}, multi-turn {mode}"
    return "; ".join(
        f"{s['name']}: critical rule {s['scoring']['critical_rule']}, multi-turn {s['scoring']['multi_turn']}"
        for s in summaries
    )


def _samples_note(summaries: Sequence[dict[str, Any]]) -> str:
    counts = sorted({s["samples"] for s in summaries})
    samples = " / ".join(str(k) for k in counts)
    return (
        f"Tasks count as tasks, each the mean of its {samples} sample(s); ± is the standard deviation across "
        f"samples (none with one sample); 95% CI: percentile bootstrap over tasks ({BOOTSTRAP_RESAMPLES} resamples)."
    )


def partial_note(summaries: Sequence[dict[str, Any]]) -> str | None:
    partial = [f"{s['name']} {s['n_incomplete']}" for s in summaries if s["n_incomplete"]]
    if not partial:
        return None
    return (
        f"{PARTIAL} counts episodes with unjudged rubrics as not Met (a lower bound); episodes with unjudged "
        f"rubrics: {', '.join(partial)}. `vtb eval --resume` judges them again."
    )


def _ranking_note(summaries: Sequence[dict[str, Any]]) -> str | None:
    if len(summaries) < 2:
        return None
    second = "; the second best: italic in Markdown, blue in HTML" if len(summaries) >= 3 else ""
    return f"The best run in a column (higher is better): bold in Markdown, red in HTML{second}."


def _notes(summaries: Sequence[dict[str, Any]], *extra: str | None) -> tuple[str, ...]:
    return tuple(n for n in (*extra, partial_note(summaries), _ranking_note(summaries)) if n)


def _ranked(rows: list[list[Any]], main: Sequence[bool] | None = None) -> list[list[Any]]:
    return mark_best(rows, main if main is not None else [True] * len(rows))


def comparison_table(summaries: Sequence[dict[str, Any]], per_trial: bool = False) -> Table:
    """The headline: APR and ARS over ALL tasks (failed and never-run episodes count as not
    passed, score 0) with spread and CI, the APR over fully judged tasks, the same over completed
    episodes only, MCC, tool use, and every count; ``per_trial`` adds APR / ARS of each sample."""
    samples = max(s["samples"] for s in summaries)
    trials = range(samples) if per_trial else range(0)
    header = [
        "run",
        "tasks",
        "samples",
        "APR (%)",
        "APR 95% CI",
        "ARS",
        "ARS 95% CI",
        *(f"APR trial {t + 1}" for t in trials),
        *(f"ARS trial {t + 1}" for t in trials),
        "APR (%, fully judged tasks)",
        "fully judged tasks",
        "judging incomplete (episodes)",
        "completed episodes",
        "APR (%, over completed episodes)",
        "errors",
        "not run",
        f"MCC ({_mcc_reading(summaries)})",
        "proactivity",
        "call success",
        "calls/task",
        "reward",
    ]
    rows = []
    for s in summaries:
        tools = s["tool_use"]["overall"]
        mode = s["mode_selection"]
        rows.append(
            [
                s["name"],
                s["n"],
                s["samples"],
                metric_cell(s, "apr"),
                ci_cell(s, "apr"),
                metric_cell(s, "ars"),
                ci_cell(s, "ars"),
                *(_trial_cell(s, "apr", t) for t in trials),
                *(_trial_cell(s, "ars", t) for t in trials),
                Cell(pct(s["apr_fully_judged"]), s["apr_fully_judged"]),
                s["n_fully_judged"],
                s["n_judge_incomplete"],
                s["n_completed"],
                Cell(pct(s["apr_completed"]), s["apr_completed"]),
                s["n_errors"],
                s["n_missing"],
                number_cell(mode["mcc"]) if mode else "n/a",
                number_cell(tools["proactivity"]),
                number_cell(tools["success_rate"]),
                number_cell(tools["volume"], 2),
                reward_cell(s, s["reward"]),
            ]
        )
    return Table("Overall", header, _ranked(rows), _notes(summaries, _samples_note(summaries)))


def _trial_cell(summary: dict[str, Any], metric: str, trial: int) -> Cell:
    """One sample's APR / ARS of a group; † when that sample has episodes judged incompletely."""
    value = summary[f"{metric}_by_sample"].get(str(trial))
    partial = bool(summary["incomplete_by_sample"].get(str(trial)))
    return Cell(pct(value) if metric == "apr" else fmt(value), partial=partial)


def _mcc_reading(summaries: Sequence[dict[str, Any]]) -> str:
    readings = {s["mode_selection"]["reading"] for s in summaries if s["mode_selection"]}
    names = {"any": "any tool", "vision": "vision tool"}
    return " / ".join(names.get(r, r) for r in sorted(readings)) or "any tool"


def _domains(summaries: Sequence[dict[str, Any]]) -> list[str]:
    """The paper's domain columns, plus "Other" when some task's domain is none of them (never dropped)."""
    extra = any(OTHER_DOMAIN in groups for s in summaries for groups in s["by_turncase_domain"].values())
    return [*DOMAIN_COLUMNS, *([OTHER_DOMAIN] if extra else [])]


def turncase_domain_table(summaries: Sequence[dict[str, Any]], metric: str, per_trial: bool = False) -> Table:
    """Tables 3 (APR) and 6 (ARS) in the paper's column order: overall, then single-turn and
    multi-turn by domain (STEM, Med, Fin, Sprt, Gen); each turn case's total follows at the end.
    Every cell is mean ± std across samples (n = tasks); ``per_trial`` adds a row per sample."""
    domains = _domains(summaries)
    header = ["run", "Overall"]
    for case in TURNCASES:
        header += [f"{PREFIXES[case]} {SHORT_DOMAINS[d]}" for d in domains]
    header += [f"{PREFIXES[case]} all" for case in TURNCASES]
    rows, main = [], []
    for s in summaries:
        groups = [s, *(s["by_turncase_domain"].get(c, {}).get(d) for c in TURNCASES for d in domains)]
        groups += [s["by_turncase_domain"].get(case, {}).get("all") for case in TURNCASES]
        rows.append([s["name"], *(metric_cell(g, metric, n=True) for g in groups)])
        main.append(True)
        for trial in range(s["samples"]) if per_trial and s["samples"] > 1 else ():
            cells = [_trial_cell(g, metric, trial) if g else Cell("n/a") for g in groups]
            rows.append([f"{s['name']} · trial {trial + 1}", *cells])
            main.append(False)
    what = "APR (%) by turn case and domain (table 3)" if metric == "apr" else "ARS by turn case and domain (table 6)"
    note = "Cells: mean ± std across samples (n = tasks in the cell)."
    return Table(f"{what}, over all tasks", header, _ranked(rows, main), _notes(summaries, note))


def passk_table(summaries: Sequence[dict[str, Any]]) -> Table:
    """pass@k (at least one of k samples passes) and pass^k (all k pass) over tasks, k = 1..samples."""
    samples = max(s["samples"] for s in summaries)
    ks = range(1, samples + 1)
    header = ["run", "tasks", "samples", *(f"pass@{k} (%)" for k in ks), *(f"pass^{k} (%)" for k in ks)]
    rows = []
    for s in summaries:
        at = [s["pass_at_k"].get(str(k)) for k in ks]
        hat = [s["pass_hat_k"].get(str(k)) for k in ks]
        partial = bool(s["n_incomplete"])
        rows.append([s["name"], s["n"], s["samples"], *(Cell(pct(v), v, partial) for v in (*at, *hat))])
    note = (
        "pass@k: unbiased estimator 1 - C(n-c,k)/C(n,k) per task (n samples, c passed), averaged over tasks; "
        "pass^k: C(c,k)/C(n,k); pass@1 = pass^1 = APR."
    )
    return Table("Samples: pass@k and pass^k over tasks", header, _ranked(rows), _notes(summaries, note))


def tool_use_table(summaries: Sequence[dict[str, Any]]) -> Table:
    """Table 7: proactivity, success rate and volume, single-turn and multi-turn (every tool counts)."""
    header = ["run", "total calls"]
    for case in TURNCASES:
        prefix = PREFIXES[case]
        header += [f"{prefix} proactivity", f"{prefix} success", f"{prefix} volume"]
    rows = []
    for s in summaries:
        row: list[Any] = [s["name"], s["tool_use"]["overall"]["calls"]]
        for case in TURNCASES:
            t = s["tool_use"].get(case, {})
            row += [
                number_cell(t.get("proactivity")),
                number_cell(t.get("success_rate")),
                number_cell(t.get("volume"), 2),
            ]
        rows.append(row)
    note = "Over all episodes (every sample); every tool counts."
    return Table("Tool use (table 7)", header, _ranked(rows), _notes(summaries, note))


def mode_table(summaries: Sequence[dict[str, Any]]) -> Table:
    header = ["run", "episodes", "TP", "FN", "TN", "FP", "MCC", "used tools means", "labels from"]
    rows = []
    readings = {"any": "a call of any tool (the paper)", "vision": "the vision tool (image tasks) / a lookup tool"}
    for s in summaries:
        m = s["mode_selection"]
        if m:
            sources = ", ".join(f"{source} {n}" for source, n in sorted(m["label_sources"].items()))
            rows.append(
                [
                    s["name"],
                    m["n"],
                    *(m[k] for k in ("TP", "FN", "TN", "FP")),
                    number_cell(m["mcc"]),
                    readings.get(m["reading"], m["reading"]),
                    sources,
                ]
            )
        else:
            rows.append([s["name"], *["n/a"] * 8])
    rules = {s["mode_selection"]["label_rule"] for s in summaries if s["mode_selection"]}
    note = (
        "Labels from a multi-sample text-only run: "
        + (
            "a task is Tool-Redundant when any sample passes (the seed: it *can be solved* without tools)"
            if rules <= {"any"}
            else "a task is Tool-Redundant when most samples pass (majority)"
        )
        + "; `vtb report --label-rule` picks the rule, `--mcc-tools` the reading."
    )
    return Table("Mode selection (tool-required = positive)", header, _ranked(rows), _notes(summaries, note))


def reward_table(summaries: Sequence[dict[str, Any]]) -> Table:
    """Mean composed per-episode reward and mean of each component (over the episodes it applies to)."""
    names = [n for n in REWARD_COMPONENTS if any(n in s["reward_components"] for s in summaries)]
    rows = [
        [
            s["name"],
            s["reward_n"],
            reward_cell(s, s["reward"]),
            *(
                reward_cell(s, s["reward_components"].get(n))
                if n in JUDGED_COMPONENTS
                else number_cell(s["reward_components"].get(n))
                for n in names
            ),
        ]
        for s in summaries
    ]
    return Table(
        "Reward (the env's composed per-episode reward, vtb_rewards.compose)",
        ["run", "episodes", "reward", *names],
        _ranked(rows),
        _notes(summaries),
    )


def reward_cell(summary: dict[str, Any], value: float | None) -> Cell:
    """A reward mean; † when it counts episodes with unjudged rubrics (they score as not Met)."""
    return Cell(fmt(value), value, partial=value is not None and bool(summary["n_incomplete"]))


def focus_table(summaries: Sequence[dict[str, Any]]) -> Table:
    focuses = sorted({f for s in summaries for f in s["by_eval_focus"]})
    rows = [[s["name"], *(metric_cell(s["by_eval_focus"].get(f), "apr", n=True) for f in focuses)] for s in summaries]
    return Table("APR (%) by task category (figure 3)", ["run", *focuses], _ranked(rows), _notes(summaries))


def process_table(summaries: Sequence[dict[str, Any]]) -> Table:
    """KCoverage under both readings (vtb_rewards.process) and tool effectiveness, over the episodes
    judged without a judge error; n/a when none was, with the judge errors counted."""
    rows = [
        [s["name"], s["process_n"], s["process_judge_errors"], *(_process_cell(s, name) for name in PROCESS_METRICS)]
        for s in summaries
    ]
    header = [
        "run",
        "episodes judged",
        "judge errors (episodes left out)",
        "KCoverage (longest covered prefix: the formula)",
        "KCoverage (furthest key step reached: the text)",
        "tool effectiveness",
    ]
    return Table("Process metrics (seed 000; `--process-metrics`)", header, _ranked(rows), _notes(summaries))


def _process_cell(summary: dict[str, Any], name: str) -> Cell:
    value = summary[name]
    if value is None and summary["process_judge_errors"]:
        return Cell(f"n/a ({summary['process_judge_errors']} judge errors)")
    return number_cell(value)


def error_type_table(summaries: Sequence[dict[str, Any]]) -> Table:
    """Table 4: the judge's B.6 error type of each failed task, as counts and shares."""
    kinds = [*ERROR_TYPES, *sorted({k for s in summaries for k in s["error_types"]} - set(ERROR_TYPES))]
    rows = []
    for s in summaries:
        total = sum(s["error_types"].values())
        rows.append(
            [
                s["name"],
                total,
                *(_share(s["error_types"].get(k, 0), total) for k in kinds),
            ]
        )
    return Table(
        "Error types of failed tasks (table 4, appendix B.6; `--error-types`)", ["run", "classified", *kinds], rows
    )


def _share(count: int, total: int) -> str:
    return f"{count} ({pct(count / total) + '%' if total else 'n/a'})"


def failure_table(summaries: Sequence[dict[str, Any]]) -> Table:
    kinds = sorted({k for s in summaries for k in s["failures"]})
    rows = [[s["name"], *(s["failures"].get(k, 0) for k in kinds), s["n_errors"], s["n_missing"]] for s in summaries]
    return Table("Outcomes and failure kinds (from the trajectory)", ["run", *kinds, "episode error", "not run"], rows)


def all_tables(summaries: Sequence[dict[str, Any]], per_trial: bool = False) -> list[Table]:
    """Every table, each titled with how it was computed (critical rule, multi-turn mode)."""
    note = scoring_note(summaries)
    tables = [
        comparison_table(summaries, per_trial),
        turncase_domain_table(summaries, "apr", per_trial),
        turncase_domain_table(summaries, "ars", per_trial),
        passk_table(summaries),
        tool_use_table(summaries),
        mode_table(summaries),
        reward_table(summaries),
        focus_table(summaries),
        process_table(summaries),
        error_type_table(summaries),
        failure_table(summaries),
    ]
    return [table.with_note(note) for table in tables]

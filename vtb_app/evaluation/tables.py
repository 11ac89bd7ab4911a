"""The report's tables, as rows (for text and HTML alike) from run summaries (``metrics.summarize_run``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from tabulate import tabulate

from vtb_app.evaluation.metrics import (
    DOMAIN_COLUMNS,
    OTHER_DOMAIN,
    REWARD_COMPONENTS,
    TURNCASES,
    Run,
    pick_labels,
    summarize_run,
)
from vtb_rewards.process import ERROR_TYPES

Table = tuple[str, list[str], list[list[Any]]]  # title, header, rows


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


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


def comparison_table(summaries: Sequence[dict[str, Any]]) -> Table:
    """The headline: APR and ARS over ALL tasks (failed and never-run episodes count as not
    passed, score 0), the same over completed episodes only, MCC, tool use, and every count."""
    header = [
        "run",
        "tasks",
        "APR",
        "ARS",
        "completed",
        "APR (over completed episodes)",
        "errors",
        "not run",
        "judging incomplete",
        "MCC",
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
                pct(s["apr"]),
                fmt(s["ars"]),
                s["n_completed"],
                pct(s["apr_completed"]),
                s["n_errors"],
                s["n_missing"],
                s["n_judge_incomplete"],
                fmt(mode["mcc"]) if mode else "n/a",
                pct(tools["proactivity"]),
                pct(tools["success_rate"]),
                fmt(tools["volume"], 2),
                fmt(s["reward"]),
            ]
        )
    return "Overall", header, rows


def _domains(summaries: Sequence[dict[str, Any]]) -> list[str]:
    """The paper's domain columns, plus "Other" when some task's domain is none of them (never dropped)."""
    extra = any(OTHER_DOMAIN in groups for s in summaries for groups in s["by_turncase_domain"].values())
    return [*DOMAIN_COLUMNS, *([OTHER_DOMAIN] if extra else [])]


def turncase_domain_table(summaries: Sequence[dict[str, Any]], metric: str) -> Table:
    """Tables 3 (APR) and 6 (ARS) in the paper's column order: overall, then single-turn and
    multi-turn by domain (STEM, Med, Fin, Sprt, Gen); each turn case's total follows at the end."""
    short = {
        "STEM": "STEM",
        "Medical": "Med",
        "Finance": "Fin",
        "Sports": "Sprt",
        "Generalist": "Gen",
        OTHER_DOMAIN: "Other",
    }
    domains = _domains(summaries)
    prefixes = {"single-turn": "ST", "multi-turn": "MT"}
    header = ["run", "Overall"]
    for case in TURNCASES:
        header += [f"{prefixes[case]} {short[d]}" for d in domains]
    header += [f"{prefixes[case]} all" for case in TURNCASES]
    show = pct if metric == "apr" else fmt
    rows = []
    for s in summaries:
        row: list[Any] = [s["name"], show(s[metric])]
        for case in TURNCASES:
            groups = s["by_turncase_domain"].get(case, {})
            row += [show(groups.get(d, {}).get(metric)) for d in domains]
        row += [show(s["by_turncase_domain"].get(case, {}).get("all", {}).get(metric)) for case in TURNCASES]
        rows.append(row)
    what = "APR by turn case and domain (table 3)" if metric == "apr" else "ARS by turn case and domain (table 6)"
    return f"{what}, over all tasks", header, rows


def tool_use_table(summaries: Sequence[dict[str, Any]]) -> Table:
    """Table 7: proactivity, success rate and volume, single-turn and multi-turn."""
    header = ["run", "total calls"]
    for case in TURNCASES:
        prefix = "ST" if case == "single-turn" else "MT"
        header += [f"{prefix} proactivity", f"{prefix} success", f"{prefix} volume"]
    rows = []
    for s in summaries:
        row: list[Any] = [s["name"], s["tool_use"]["overall"]["calls"]]
        for case in TURNCASES:
            t = s["tool_use"].get(case, {})
            row += [fmt(t.get("proactivity")), fmt(t.get("success_rate")), fmt(t.get("volume"), 2)]
        rows.append(row)
    return "Tool use (table 7)", header, rows


def mode_table(summaries: Sequence[dict[str, Any]]) -> Table:
    header = ["run", "TP", "FN", "TN", "FP", "MCC", "labels from"]
    rows = []
    for s in summaries:
        m = s["mode_selection"]
        if m:
            sources = ", ".join(f"{source} {n}" for source, n in sorted(m["label_sources"].items()))
            rows.append([s["name"], *(m[k] for k in ("TP", "FN", "TN", "FP")), fmt(m["mcc"]), sources])
        else:
            rows.append([s["name"], *["n/a"] * 6])
    return "Mode selection (tool-required = positive)", header, rows


def reward_table(summaries: Sequence[dict[str, Any]]) -> Table:
    """Mean composed per-episode reward and mean of each component (over the episodes it applies to)."""
    names = [n for n in REWARD_COMPONENTS if any(n in s["reward_components"] for s in summaries)]
    rows = [
        [s["name"], s["reward_n"], fmt(s["reward"]), *(fmt(s["reward_components"].get(n)) for n in names)]
        for s in summaries
    ]
    return (
        "Reward (the env's composed per-episode reward, vtb_rewards.compose)",
        ["run", "episodes", "reward", *names],
        rows,
    )


def focus_table(summaries: Sequence[dict[str, Any]]) -> Table:
    focuses = sorted({f for s in summaries for f in s["by_eval_focus"]})
    rows = [[s["name"], *(pct(s["by_eval_focus"].get(f, {}).get("apr")) for f in focuses)] for s in summaries]
    return "APR by task category (figure 3)", ["run", *focuses], rows


def process_table(summaries: Sequence[dict[str, Any]]) -> Table:
    """KCoverage under both readings (vtb_rewards.process) and tool effectiveness, over the judged episodes."""
    rows = [
        [s["name"], s["process_n"], fmt(s["kcoverage"]), fmt(s["kcoverage_furthest"]), fmt(s["tool_effectiveness"])]
        for s in summaries
    ]
    header = [
        "run",
        "episodes judged",
        "KCoverage (longest covered prefix: the formula)",
        "KCoverage (furthest key step reached: the text)",
        "tool effectiveness",
    ]
    return "Process metrics (seed 000; `--process-metrics`)", header, rows


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
                *(
                    f"{s['error_types'].get(k, 0)} ({pct(s['error_types'].get(k, 0) / total) if total else 'n/a'})"
                    for k in kinds
                ),
            ]
        )
    return "Error types of failed tasks (table 4, appendix B.6; `--error-types`)", ["run", "classified", *kinds], rows


def failure_table(summaries: Sequence[dict[str, Any]]) -> Table:
    kinds = sorted({k for s in summaries for k in s["failures"]})
    rows = [[s["name"], *(s["failures"].get(k, 0) for k in kinds), s["n_errors"], s["n_missing"]] for s in summaries]
    return "Outcomes and failure kinds (from the trajectory)", ["run", *kinds, "episode error", "not run"], rows


def all_tables(summaries: Sequence[dict[str, Any]]) -> list[Table]:
    """Every table, each titled with how it was computed (critical rule, multi-turn mode)."""
    note = scoring_note(summaries)
    tables = [
        comparison_table(summaries),
        turncase_domain_table(summaries, "apr"),
        turncase_domain_table(summaries, "ars"),
        tool_use_table(summaries),
        mode_table(summaries),
        reward_table(summaries),
        focus_table(summaries),
        process_table(summaries),
        error_type_table(summaries),
        failure_table(summaries),
    ]
    return [with_note(table, note) for table in tables]


def with_note(table: Table, note: str) -> Table:
    title, header, rows = table
    return f"{title} [{note}]", header, rows


def render_text(table: Table) -> str:
    title, header, rows = table
    return f"{title}\n{tabulate(rows, headers=header, tablefmt='github', disable_numparse=True)}"


def print_comparison(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """Print the overall comparison table of the runs at ``paths`` (no plots: matplotlib stays unloaded); their
    summaries."""
    runs = [Run.load(path) for path in paths]
    summaries = [summarize_run(run, labels) for run, labels in zip(runs, pick_labels(runs), strict=True)]
    print(render_text(with_note(comparison_table(summaries), scoring_note(summaries))))
    return summaries

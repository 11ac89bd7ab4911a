"""The report's tables, as rows (for text and HTML alike) from run summaries (``metrics.summarize``)."""

from __future__ import annotations

from typing import Any, Sequence

from tabulate import tabulate

from vtb_env.evaluation.metrics import DOMAIN_COLUMNS, REWARD_COMPONENTS, TURNCASES

Table = tuple[str, list[str], list[list[Any]]]  # title, header, rows


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def comparison_table(summaries: Sequence[dict[str, Any]]) -> Table:
    """The headline: APR, ARS, MCC and tool use per run."""
    header = ["run", "tasks", "APR", "ARS", "MCC", "proactivity", "call success", "calls/task", "reward", "errors"]
    rows = []
    for s in summaries:
        tools = s["tool_use"]["overall"]
        mode = s["mode_selection"]
        rows.append([
            s["name"], s["n"], pct(s["apr"]), fmt(s["ars"]), fmt(mode["mcc"]) if mode else "n/a",
            pct(tools["proactivity"]), pct(tools["success_rate"]), fmt(tools["volume"], 2), fmt(s["reward"]), s["n_errors"],
        ])
    return "Overall", header, rows


def turncase_domain_table(summaries: Sequence[dict[str, Any]], metric: str) -> Table:
    """Tables 3 (APR) and 6 (ARS): single-turn and multi-turn by domain, and overall."""
    short = {"STEM": "STEM", "Medical": "Med", "Finance": "Fin", "Sports": "Sprt", "Generalist": "Gen"}
    header = ["run"]
    for case in TURNCASES:
        prefix = "ST" if case == "single-turn" else "MT"
        header += [f"{prefix} {short[d]}" for d in DOMAIN_COLUMNS] + [f"{prefix} all"]
    header.append("overall")
    rows = []
    for s in summaries:
        row: list[Any] = [s["name"]]
        for case in TURNCASES:
            groups = s["by_turncase_domain"].get(case, {})
            for key in (*DOMAIN_COLUMNS, "all"):
                value = groups.get(key, {}).get(metric)
                row.append(pct(value) if metric == "apr" else fmt(value))
        row.append(pct(s["apr"]) if metric == "apr" else fmt(s["ars"]))
        rows.append(row)
    title = "APR by turn case and domain (table 3)" if metric == "apr" else "ARS by turn case and domain (table 6)"
    return title, header, rows


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
    rows = [[s["name"], s["reward_n"], fmt(s["reward"]), *(fmt(s["reward_components"].get(n)) for n in names)] for s in summaries]
    return "Reward (the env's composed per-episode reward, rewards.compose)", ["run", "episodes", "reward", *names], rows


def focus_table(summaries: Sequence[dict[str, Any]]) -> Table:
    focuses = sorted({f for s in summaries for f in s["by_eval_focus"]})
    rows = [[s["name"], *(pct(s["by_eval_focus"].get(f, {}).get("apr")) for f in focuses)] for s in summaries]
    return "APR by task category (figure 3)", ["run", *focuses], rows


def process_table(summaries: Sequence[dict[str, Any]]) -> Table:
    rows = [[s["name"], fmt(s["kcoverage"]), fmt(s["tool_effectiveness"])] for s in summaries]
    return "Process metrics", ["run", "KCoverage", "tool effectiveness"], rows


def failure_table(summaries: Sequence[dict[str, Any]]) -> Table:
    kinds = sorted({k for s in summaries for k in s["failures"]})
    rows = [[s["name"], *(s["failures"].get(k, 0) for k in kinds)] for s in summaries]
    return "Outcomes and failure kinds", ["run", *kinds], rows


def all_tables(summaries: Sequence[dict[str, Any]]) -> list[Table]:
    return [
        comparison_table(summaries),
        turncase_domain_table(summaries, "apr"),
        turncase_domain_table(summaries, "ars"),
        tool_use_table(summaries),
        mode_table(summaries),
        reward_table(summaries),
        focus_table(summaries),
        process_table(summaries),
        failure_table(summaries),
    ]


def render_text(table: Table) -> str:
    title, header, rows = table
    return f"{title}\n{tabulate(rows, headers=header, tablefmt='github', disable_numparse=True)}"

"""``vtb eval``, ``vtb judge`` and ``vtb report`` (registered in ``vtb_env.cli``)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from vtb_env.evaluation.records import RECORDS_FILE, RunConflictError, RunLog, done_keys, latest_records, read_config, write_config


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """What `vtb eval` and `vtb label-modes` share: data, agent, judge, env, sampling, output."""
    parser.add_argument("--data", default="demo", help="demo | parquet file/dir | toolkit dir | tasks.jsonl | synth:N:SEED | synth-v1:N:SEED")
    parser.add_argument("--agent", default="ocr-baseline", help="ocr-baseline | openai:MODEL@URL | openai-text:MODEL@URL | hf:PATH")
    parser.add_argument("--judge", default="exact", help="exact | openai:MODEL@URL | hf:PATH")
    parser.add_argument("--preset", default="default", choices=("default", "official"), help="env preset")
    parser.add_argument("--concurrency", type=int, default=1, help="episodes in flight (one env each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-tokens", type=int, default=2048)
    parser.add_argument("--agent-extra-body", type=_json_object, default=None, metavar="JSON",
                        help='extra request fields for openai agents, e.g. \'{"chat_template_kwargs": {"tools_in_user_message": false}}\'')
    parser.add_argument("--limit", type=int, default=None, help="first N tasks only")
    parser.add_argument("--critical-rule", default="weight>=4", choices=("weight>=4", "flag", "either"))
    parser.add_argument("--multi-turn", default="pooled", choices=("pooled", "per_turn"))
    parser.add_argument("--name", default=None, help="run name in reports (default: the output dir's name)")
    parser.add_argument("--resume", action="store_true", help="continue a run in --out: skip done tasks, retry errors")
    parser.add_argument("--no-progress", action="store_true")


def register(subparsers: argparse._SubParsersAction) -> None:
    ev = subparsers.add_parser("eval", help="run an agent on tasks, judge and record every episode (resumable)")
    _add_run_arguments(ev)
    ev.add_argument("--ablation", default="strong", choices=("strong", "weak", "no_vision", "no_tools"), help="figure-7 setting")
    ev.add_argument("--samples", type=int, default=1, help="episodes per task")
    ev.add_argument("--mode-labels", default=None, metavar="FILE", help="labels from `vtb label-modes` for the env's mode reward and MCC")
    ev.add_argument("--mode-model", default=None, help="whose labels in --mode-labels (default: the agent's name)")
    ev.add_argument("--out", required=True, help="run directory (records.jsonl, config.json, images/)")
    ev.set_defaults(func=run_eval)

    lm = subparsers.add_parser("label-modes", help="text-only pass (no tools) through the env: Tool-Required / Tool-Redundant labels per task")
    _add_run_arguments(lm)
    lm.add_argument("--out", required=True, help="run directory of the text-only pass (a `vtb eval --ablation no_tools` run)")
    lm.add_argument("--labels", default=None, metavar="FILE", help="label store to update (default: OUT/mode_labels.json)")
    lm.set_defaults(func=run_label_modes)

    jd = subparsers.add_parser("judge", help="re-score a run's saved answers with another judge (cached)")
    jd.add_argument("run", help="a `vtb eval` (or `vtb import-toolkit`) run directory")
    jd.add_argument("--judge", required=True, help="exact | openai:MODEL@URL | hf:PATH")
    jd.add_argument("--data", default=None, help="where the tasks' rubrics come from (default: the run's --data)")
    jd.add_argument("--critical-rule", default=None, choices=("weight>=4", "flag", "either"))
    jd.add_argument("--multi-turn", default=None, choices=("pooled", "per_turn"))
    jd.add_argument("--out", required=True, help="new run directory for the re-scored records (resumable)")
    jd.set_defaults(func=run_judge)

    rp = subparsers.add_parser("report", help="tables, plots and an HTML report from one or more runs")
    rp.add_argument("runs", nargs="+", help="run directories (NAME=DIR to rename a run)")
    rp.add_argument("--out", required=True, help="report directory")
    rp.add_argument("--mode-labels", default=None, metavar="FILE", help="labels from `vtb label-modes` (per run: its model's labels)")
    rp.add_argument("--max-trajectories", type=int, default=None, help="per run, in the HTML")
    rp.add_argument("--all-tables", action="store_true", help="print every table, not only the overall comparison")
    rp.set_defaults(func=run_report)

    from vtb_env.evaluation.toolkit import register as register_import

    register_import(subparsers)


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}): {text!r}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def run_eval(args: argparse.Namespace) -> int:
    store = _label_store(args.mode_labels) if args.mode_labels else None
    if args.mode_labels and store is None:
        return 2
    return _evaluate(args, args.ablation, args.samples, store)[0]


def _label_store(path: str | Path, must_exist: bool = True) -> Any:
    from rewards.mode import ModeLabelStore

    if must_exist and not Path(path).exists():
        print(f"error: no mode-label file {path} (make one with `vtb label-modes`)", file=sys.stderr)
        return None
    return ModeLabelStore(path)


def _evaluate(args: argparse.Namespace, ablation: str, samples: int, store: Any = None) -> tuple[int, Path, list[Any]]:
    """Run `vtb eval` with ``args``: (exit code, run dir, tasks)."""
    from agents.ablations import ablate_agent, env_overrides
    from vtb_env.config import EnvConfig
    from vtb_env.env import VisualToolBenchEnv
    from vtb_env.evaluation.runner import Scoring, episode_reward, evaluate
    from vtb_env.evaluation.specs import load_eval_tasks, make_agent, make_judge

    out = Path(args.out)
    tasks = load_eval_tasks(args.data, limit=args.limit)
    if not tasks:
        print(f"error: no tasks loaded from {args.data!r}", file=sys.stderr)
        return 2, out, []
    base_agent = make_agent(args.agent, seed=args.seed, temperature=args.temperature, max_tokens=args.max_tokens, extra_body=args.agent_extra_body)
    agent = ablate_agent(base_agent, ablation)
    model = getattr(args, "mode_model", None) or base_agent.name
    # A task's own label (synthetic tasks, by construction) wins over stored ones (metrics.episode_mode_label).
    own = {task.id: task.mode_label for task in tasks}
    mode_labels = {tid: label for tid, label in (store.labels(model) if store else {}).items() if tid in own and not own[tid]}
    judge = make_judge(args.judge, cache_path=out / "judge_cache.sqlite" if args.judge != "exact" else None)
    env_config = EnvConfig.preset(args.preset, **env_overrides(ablation))
    scoring = Scoring(args.critical_rule, args.multi_turn)
    config = {
        "name": args.name or out.name,
        "data": args.data,
        "limit": args.limit,
        "tasks": len(tasks),
        "agent": agent.describe() if hasattr(agent, "describe") else {"name": agent.name},
        "judge": judge.judge_id,
        "judge_spec": args.judge,
        "preset": args.preset,
        "ablation": ablation,
        "samples": samples,
        "seed": args.seed,
        "scoring": vars(scoring),
    }
    if store is not None:
        config["mode_labels"] = {"file": str(Path(store.path).resolve()), "model": model, "labels": mode_labels}
    reward = episode_reward(judge, scoring, mode_labels)
    identity = {"agent": agent.name, "model": base_agent.name, "judge": judge.judge_id, "ablation": ablation, "preset": args.preset}
    try:
        digest = write_config(out, config)
        result = evaluate(
            tasks, agent, lambda ts: VisualToolBenchEnv(ts, reward=reward, config=env_config), judge, out,
            config_hash=digest, samples=samples, concurrency=args.concurrency, seed=args.seed,
            resume=args.resume, scoring=scoring, progress=not args.no_progress, identity=identity, mode_labels=mode_labels,
        )
    except RunConflictError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2, out, []
    except KeyboardInterrupt:
        print(f"\ninterrupted: {len(done_keys(out / RECORDS_FILE))} items done in {out / RECORDS_FILE}; "
              "rerun the same command with --resume to finish", file=sys.stderr)
        return 130, out, []
    finally:
        if hasattr(agent, "close"):
            agent.close()
    print(f"{result.succeeded} done, {result.failed} errors, {result.skipped} already done; records in {out / RECORDS_FILE}")
    _print_tables([out])
    return (1 if result.failed else 0), out, tasks


def run_label_modes(args: argparse.Namespace) -> int:
    """The text-only pass as a `no_tools` eval run, then one label per task whose judging is complete."""
    from vtb_env.evaluation.metrics import Run, run_model, text_only_results

    code, out, tasks = _evaluate(args, "no_tools", 1)
    if not tasks:
        return code
    run = Run.load(out)
    model = run_model(run.config)
    store = _label_store(args.labels or out / "mode_labels.json", must_exist=False)
    labels = store.record_text_only(model, text_only_results(run))
    counts = {label: sum(1 for v in labels.values() if v == label) for label in ("tool_required", "tool_redundant")}
    unlabelled = len(tasks) - len(labels)
    print(f"mode labels for {model}: {counts['tool_required']} tool_required, {counts['tool_redundant']} tool_redundant, "
          f"{unlabelled} unlabelled (episode or judging failed; rerun with --resume); stored in {store.path}")
    return code


def run_judge(args: argparse.Namespace) -> int:
    from vtb_env.evaluation.runner import Scoring, judge_episode
    from vtb_env.evaluation.specs import load_eval_tasks, make_judge

    source, out = Path(args.run), Path(args.out)
    config = read_config(source)
    if not config:
        print(f"error: {source} has no config.json (not a `vtb eval` run)", file=sys.stderr)
        return 2
    tasks = {task.id: task for task in load_eval_tasks(args.data or config["data"], limit=config.get("limit"))}
    judge = make_judge(args.judge, cache_path=out / "judge_cache.sqlite" if args.judge != "exact" else None)
    scoring_config = {**config.get("scoring", {})}
    scoring_config.update({k: v for k, v in (("critical_rule", args.critical_rule), ("multi_turn", args.multi_turn)) if v})
    scoring = Scoring(**scoring_config)
    new_config = {**{k: v for k, v in config.items() if k != "config_hash"}, "judge": judge.judge_id, "judge_spec": args.judge,
                  "scoring": vars(scoring), "rejudged_from": str(source.resolve()), "name": out.name}
    digest = write_config(out, new_config)
    done = done_keys(out / RECORDS_FILE)
    records = [r for r in latest_records(source / RECORDS_FILE).values() if r.get("status") == "ok" and r["key"] not in done]
    missing = sorted({r["task_id"] for r in records if r["task_id"] not in tasks})
    if missing:
        print(f"error: {len(missing)} tasks of the run are not in the data (e.g. {missing[0]}); pass --data", file=sys.stderr)
        return 2
    with RunLog(out / RECORDS_FILE) as log:
        for record in records:
            for relpath in record.get("image_files", {}).values():
                target = out / relpath
                if not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source / relpath, target)
            task = tasks[record["task_id"]]
            judged = judge_episode(task, record["answers"], judge, scoring)
            rescored = {**record, **judged, "config_hash": digest, "judge": judge.judge_id}
            if record.get("episode"):
                rescored.update(_rescore_reward(task, record, judge, scoring))
            log.append(rescored)
    stats = judge.stats
    print(f"re-judged {len(records)} records ({len(done)} already done) with {judge.judge_id}: "
          f"{stats.checks} exact checks, {stats.cache_hits} cache hits, {stats.backend_calls} judge calls, {stats.errors} errors")
    _print_tables([out])
    return 0


def _rescore_reward(task: Any, record: dict[str, Any], judge: Any, scoring: Any) -> dict[str, Any]:
    """The env's composed reward again, from the saved episode, with the new judge and rule.

    Its judge shares the backend and cache (the verdicts just made are cache hits) but keeps
    its own stats, so the printed stats count the verdict pass only.
    """
    from rewards.judge.judge import Judge
    from vtb_env.evaluation.runner import episode_reward
    from vtb_env.trajectory import EpisodeRecord

    reward_judge = Judge(judge.backend, judge.cache, judge.template, judge.votes)
    reward = episode_reward(reward_judge, scoring, {task.id: record["mode_label"]} if record.get("mode_label") else {})
    try:
        value, components = reward(task, EpisodeRecord.from_dict(record["episode"]))
    except Exception as exc:  # a reward that fails is recorded, as the env does
        return {"reward": 0.0, "reward_components": None, "reward_error": f"{type(exc).__name__}: {exc}"}
    return {"reward": value, "reward_components": components, "reward_error": None}


def _parse_run_arg(value: str) -> tuple[str | None, Path]:
    if "=" in value and not Path(value).exists():
        name, path = value.split("=", 1)
        return name, Path(path)
    return None, Path(value)


def _print_tables(paths: list[Path]) -> list[dict[str, Any]]:
    from vtb_env.evaluation.metrics import Run, pick_labels, summarize
    from vtb_env.evaluation.tables import comparison_table, render_text

    runs = [Run.load(path) for path in paths]
    summaries = [summarize(run, labels) for run, labels in zip(runs, pick_labels(runs))]
    print(render_text(comparison_table(summaries)))
    return summaries


def run_report(args: argparse.Namespace) -> int:
    from vtb_env.evaluation.report import write_report

    store = _label_store(args.mode_labels) if args.mode_labels else None
    if args.mode_labels and store is None:
        return 2
    runs = [_parse_run_arg(value) for value in args.runs]
    paths = write_report(runs, Path(args.out), max_trajectories=args.max_trajectories, mode_labels=store)
    tables = paths["text"].read_text()
    print(tables if args.all_tables else tables.split("\n\n")[0])
    print(f"\nAll tables: {paths['text'].resolve()}\nHTML report: {paths['html'].resolve()}")
    return 0

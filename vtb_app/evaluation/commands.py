"""``vtb eval``, ``vtb judge`` and ``vtb report`` (registered in ``vtb_app.cli``)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from vtb_app.evaluation.failures import print_failures, report_failures, run_failures
from vtb_app.evaluation.records import (
    RECORDS_FILE,
    RunConflictError,
    RunLog,
    done_keys,
    error_record,
    judging_complete,
    latest_records,
    read_config,
    run_image_path,
    write_config,
)
from vtb_app.evaluation.report_cli import add_label_rule, label_store, register_report
from vtb_env.toolsets import ABLATIONS

# Episodes in flight by default: enough to keep a GPU inference server batching (tens of requests
# in flight) for agents behind HTTP; in-process agents share this machine's cores.
HTTP_AGENT_CONCURRENCY = 64


def default_concurrency(agent_spec: str) -> int:
    """``--concurrency`` when not given: 64 for OpenAI-compatible agents, the cores for the OCR
    baseline (its Tesseract runs are processes), 1 for in-process models (``hf:``: one model, one device)."""
    if agent_spec.startswith(("openai:", "openai-text:")):
        return HTTP_AGENT_CONCURRENCY
    if agent_spec == "ocr-baseline":
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    return 1


def _seed(text: str) -> int | None:
    if text.strip().lower() == "none":
        return None
    try:
        return int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--seed takes an integer or 'none', got {text!r}") from exc


def _add_judge_arguments(parser: argparse.ArgumentParser) -> None:
    """How an OpenAI-compatible judge is called, and the optional judge passes."""
    parser.add_argument(
        "--judge-temperature",
        default="0",
        metavar="T|none",
        help="judge sampling temperature; 'none' omits it (reasoning models such as o4-mini / GPT-5 reject it)",
    )
    parser.add_argument(
        "--judge-max-tokens", default="512", metavar="N|none", help="judge reply bound; 'none' omits it"
    )
    parser.add_argument(
        "--judge-token-field",
        default="max_tokens",
        choices=("max_tokens", "max_completion_tokens"),
        help="the field the bound is sent in (reasoning models take max_completion_tokens)",
    )
    parser.add_argument(
        "--judge-structured",
        default="auto",
        choices=("auto", "json_schema", "off"),
        help="ask for a JSON-schema reply; auto: falls back to plain text when the server refuses response_format",
    )
    parser.add_argument(
        "--process-metrics",
        action="store_true",
        help=(
            "judge KCoverage (both readings) and tool effectiveness per episode "
            "(LLM judge; one call per key step / tool call)"
        ),
    )
    parser.add_argument(
        "--error-types",
        action="store_true",
        help="classify each failed task's error type (appendix B.6, table 4; LLM judge)",
    )


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """What `vtb eval` and `vtb label-modes` share: data, agent, judge, env, sampling, output."""
    parser.add_argument(
        "--data",
        default="demo",
        help="demo | parquet file/dir | toolkit dir | tasks.jsonl | synth:N:SEED | synth-v1:N:SEED",
    )
    parser.add_argument(
        "--agent", default="ocr-baseline", help="ocr-baseline | openai:MODEL@URL | openai-text:MODEL@URL | hf:PATH"
    )
    parser.add_argument("--judge", default="exact", help="exact | openai:MODEL@URL | hf:PATH")
    parser.add_argument("--preset", default="default", choices=("default", "official"), help="env preset")
    parser.add_argument(
        "--max-dialogue-images",
        type=int,
        default=None,
        metavar="K",
        help="send only the last K images of the dialogue (at most vLLM's --limit-mm-per-prompt image limit)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help=(
            f"episodes in flight (one env each); default {HTTP_AGENT_CONCURRENCY} for openai agents, "
            "the cores for ocr-baseline, 1 for hf"
        ),
    )
    parser.add_argument(
        "--seed",
        type=_seed,
        default=0,
        metavar="N|none",
        help="base seed: each (task, sample) gets its own seed from it, recorded per record; 'none' sends no seed",
    )
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--max-tokens", type=int, default=2048)
    parser.add_argument(
        "--agent-extra-body",
        type=_json_object,
        default=None,
        metavar="JSON",
        help=(
            "extra request fields for openai agents, "
            'e.g. \'{"chat_template_kwargs": {"tools_in_user_message": false}}\''
        ),
    )
    parser.add_argument("--limit", type=int, default=None, help="first N tasks only")
    parser.add_argument("--critical-rule", default="weight>=4", choices=("weight>=4", "flag", "either"))
    parser.add_argument("--multi-turn", default="pooled", choices=("pooled", "per_turn"))
    parser.add_argument("--name", default=None, help="run name in reports (default: the output dir's name)")
    parser.add_argument("--resume", action="store_true", help="continue a run in --out: skip done tasks, retry errors")
    parser.add_argument("--no-progress", action="store_true")
    _add_judge_arguments(parser)
    _add_executor_arguments(parser)


def _add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    """Where episodes run: threads here (default) or Ray actors across a cluster (evaluation.ray_executor)."""
    parser.add_argument(
        "--executor",
        default="threads",
        choices=("threads", "ray"),
        help="threads: this process; ray: one actor per node of a Ray cluster (pip install 'vtb-gym[ray]')",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="an existing cluster (auto, HOST:PORT, ray://HOST:PORT); default: start a local one",
    )
    parser.add_argument(
        "--ray-temp-dir",
        default=None,
        metavar="DIR",
        help="a new local cluster's session files (default: $VTB_RAY_TEMP_DIR or /tmp/vtb-ray-UID)",
    )
    parser.add_argument("--ray-log-to-driver", action="store_true", help="show the actors' stdout/stderr here")


def register(subparsers: argparse._SubParsersAction) -> None:
    ev = subparsers.add_parser("eval", help="run an agent on tasks, judge and record every episode (resumable)")
    _add_run_arguments(ev)
    ev.add_argument("--ablation", default="strong", choices=tuple(ABLATIONS), help="figure-7 setting")
    ev.add_argument("--samples", type=int, default=1, help="episodes per task")
    ev.add_argument(
        "--mode-labels",
        default=None,
        metavar="FILE",
        help="labels from `vtb label-modes` for the env's mode reward and MCC",
    )
    ev.add_argument("--mode-model", default=None, help="whose labels in --mode-labels (default: the agent's name)")
    ev.add_argument("--out", required=True, help="run directory (records.jsonl, config.json, images/)")
    ev.set_defaults(func=run_eval)

    lm = subparsers.add_parser(
        "label-modes", help="text-only pass (no tools) through the env: Tool-Required / Tool-Redundant labels per task"
    )
    _add_run_arguments(lm)
    lm.add_argument(
        "--out", required=True, help="run directory of the text-only pass (a `vtb eval --ablation no_tools` run)"
    )
    lm.add_argument(
        "--labels", default=None, metavar="FILE", help="label store to update (default: OUT/mode_labels.json)"
    )
    lm.add_argument("--samples", type=int, default=1, help="text-only episodes per task")
    add_label_rule(lm)
    lm.set_defaults(func=run_label_modes)

    jd = subparsers.add_parser("judge", help="re-score a run's saved answers with another judge (cached)")
    jd.add_argument("run", help="a `vtb eval` (or `vtb import-toolkit`) run directory")
    jd.add_argument("--judge", required=True, help="exact | openai:MODEL@URL | hf:PATH")
    jd.add_argument("--data", default=None, help="where the tasks' rubrics come from (default: the run's --data)")
    jd.add_argument("--critical-rule", default=None, choices=("weight>=4", "flag", "either"))
    jd.add_argument("--multi-turn", default=None, choices=("pooled", "per_turn"))
    jd.add_argument("--out", required=True, help="new run directory for the re-scored records (resumable)")
    jd.add_argument("--concurrency", type=int, default=8, help="records judged at once")
    _add_judge_arguments(jd)
    jd.set_defaults(func=run_judge)

    register_report(subparsers)

    from vtb_app.evaluation.toolkit import register as register_import  # lazy: keeps `vtb --help` fast

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
    store = label_store(args.mode_labels) if args.mode_labels else None
    return _evaluate(args, args.ablation, args.samples, store)[0]


def _optional(text: str, kind: type) -> Any:
    return None if str(text).strip().lower() == "none" else kind(text)


def judge_options(args: argparse.Namespace) -> Any:
    """The ``--judge-*`` request options."""
    from vtb_app.evaluation.specs import JudgeOptions

    return JudgeOptions(
        temperature=_optional(args.judge_temperature, float),
        max_tokens=_optional(args.judge_max_tokens, int),
        token_field=args.judge_token_field,
        structured=args.judge_structured,
    )


def judge_from_args(args: argparse.Namespace, out: Path) -> Any:
    """The judge of ``--judge`` with the ``--judge-*`` request options; the passes need an LLM judge."""
    from vtb_app.evaluation.specs import SpecError, judge_from_spec

    options = judge_options(args)
    if args.judge == "exact" and (args.process_metrics or args.error_types):
        raise SpecError(
            "--process-metrics and --error-types need an LLM judge (--judge openai:MODEL@URL or hf:PATH), not 'exact'"
        )
    return judge_from_spec(
        args.judge, cache_path=out / "judge_cache.sqlite" if args.judge != "exact" else None, options=options
    )


def _passes(args: argparse.Namespace) -> Any:
    from vtb_app.evaluation.runner import JudgePasses

    return JudgePasses(process_metrics=args.process_metrics, error_types=args.error_types)


def _evaluate(args: argparse.Namespace, ablation: str, samples: int, store: Any = None) -> tuple[int, Path, list[Any]]:
    """Run `vtb eval` with ``args``: (exit code, run dir, tasks)."""
    from vtb_agents.ablations import ablate_agent
    from vtb_app.evaluation.metrics import task_index
    from vtb_app.evaluation.runner import episode_reward, evaluate
    from vtb_app.evaluation.specs import SpecError, make_agent
    from vtb_app.evaluation.tables import print_comparison
    from vtb_env.config import EnvConfig
    from vtb_env.env import VisualToolBenchEnv
    from vtb_env.loaders import load_tasks
    from vtb_env.tools import default_tools
    from vtb_env.toolsets import ablation_overrides
    from vtb_rewards.compose import RewardConfig

    out = Path(args.out)
    if args.executor == "ray":
        from vtb_app.evaluation.ray_executor import check_shareable

        try:
            check_shareable(args.agent, args.judge)
        except SpecError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2, out, []
    tasks = load_tasks(args.data, limit=args.limit)
    if not tasks:
        print(f"error: no tasks loaded from {args.data!r}", file=sys.stderr)
        return 2, out, []
    try:
        judge = judge_from_args(args, out)
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2, out, []
    # HTTP agents get every (task, sample) its own request seed from the runner (runner.sample_seed);
    # in-process models seed their sampler once with --seed.
    base_agent = make_agent(
        args.agent,
        seed=args.seed,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        extra_body=args.agent_extra_body,
    )
    agent = ablate_agent(base_agent, ablation)
    model = getattr(args, "mode_model", None) or base_agent.name
    # The model's own text-only labels come first; a task's built-in label is the fallback (seed 000).
    ids = {task.id for task in tasks}
    mode_labels = {tid: label for tid, label in (store.labels(model) if store else {}).items() if tid in ids}
    env_config = EnvConfig.preset(
        args.preset, **ablation_overrides(ablation), max_dialogue_images=args.max_dialogue_images
    )
    scoring = RewardConfig(critical_rule=args.critical_rule, multi_turn=args.multi_turn)
    passes = _passes(args)
    concurrency = args.concurrency or default_concurrency(args.agent)
    config = {
        "name": args.name or out.name,
        "data": args.data,
        "limit": args.limit,
        "tasks": len(tasks),
        "task_index": task_index(tasks),
        "agent": agent.describe() if hasattr(agent, "describe") else {"name": agent.name},
        "judge": judge.judge_id,
        "judge_spec": args.judge,
        "preset": args.preset,
        "env": {k: v for k, v in vars(env_config).items()},
        "ablation": ablation,
        "samples": samples,
        "seed": args.seed,
        "scoring": scoring.scoring(),
        "passes": vars(passes),
    }
    if store is not None:
        config["mode_labels"] = {"file": str(Path(store.path).resolve()), "model": model, "labels": mode_labels}
    reward = episode_reward(judge, scoring, mode_labels)
    identity = {
        "agent": agent.name,
        "model": base_agent.name,
        "judge": judge.judge_id,
        "ablation": ablation,
        "preset": args.preset,
    }
    tools = default_tools()  # one registry (one sandbox pool) shared by every worker's env
    try:
        digest = write_config(out, config)
        if args.executor == "ray":
            result = _evaluate_on_ray(
                args, tasks, ablation, samples, concurrency, env_config, scoring, passes, mode_labels, digest, identity
            )
        else:
            result = evaluate(
                tasks,
                agent,
                lambda ts: VisualToolBenchEnv(ts, tools=tools, reward=reward, config=env_config),
                judge,
                out,
                config_hash=digest,
                samples=samples,
                concurrency=concurrency,
                seed=args.seed,
                passes=passes,
                resume=args.resume,
                scoring=scoring,
                progress=not args.no_progress,
                identity=identity,
                mode_labels=mode_labels,
            )
    except RunConflictError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2, out, []
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: {len(done_keys(out / RECORDS_FILE))} items done in {out / RECORDS_FILE}; "
            "rerun the same command with --resume to finish",
            file=sys.stderr,
        )
        return 130, out, []
    finally:
        tools.close()
        if hasattr(agent, "close"):
            agent.close()
    print(
        f"{result.succeeded} done, {result.failed} errors, {result.skipped} already done, {result.rejudged} re-judged "
        f"({concurrency} in flight); records in {out / RECORDS_FILE}"
    )
    print_comparison([out])
    return report_failures(out, nothing_done=not (result.succeeded or result.skipped)), out, tasks


def _evaluate_on_ray(
    args: argparse.Namespace,
    tasks: list[Any],
    ablation: str,
    samples: int,
    concurrency: int,
    env_config: Any,
    scoring: Any,
    passes: Any,
    mode_labels: dict[str, str],
    digest: str,
    identity: dict[str, Any],
) -> Any:
    """The ``--executor ray`` branch of ``_evaluate``: the same run, its parts rebuilt in each actor from their
    specs."""
    from vtb_app.evaluation.ray_executor import RunSpec, evaluate_on_ray

    spec = RunSpec(
        agent=args.agent,
        judge=args.judge,
        env_config=env_config,
        ablation=ablation,
        scoring=scoring,
        passes=passes,
        mode_labels=mode_labels,
        judge_options=judge_options(args),
        seed=args.seed,
        config_hash=digest,
        identity=identity,
        agent_options={
            "seed": args.seed,
            "temperature": args.temperature,
            "max_tokens": args.max_tokens,
            "extra_body": args.agent_extra_body,
        },
    )
    return evaluate_on_ray(
        tasks,
        spec,
        args.out,
        samples=samples,
        concurrency=concurrency,
        resume=args.resume,
        progress=not args.no_progress,
        address=args.ray_address,
        temp_dir=args.ray_temp_dir,
        log_to_driver=args.ray_log_to_driver,
    )


def run_label_modes(args: argparse.Namespace) -> int:
    """The text-only pass as a `no_tools` eval run, then one label per task whose judging is complete."""
    from vtb_app.evaluation.metrics import Run
    from vtb_app.evaluation.modes import run_model, text_only_results

    code, out, tasks = _evaluate(args, "no_tools", args.samples)
    if not tasks:
        return code
    run = Run.load(out)
    model = run_model(run.config)
    store = label_store(args.labels or out / "mode_labels.json", must_exist=False)
    labels = store.record_text_only(model, text_only_results(run, args.label_rule))
    counts = {label: sum(1 for v in labels.values() if v == label) for label in ("tool_required", "tool_redundant")}
    unlabelled = len(tasks) - len(labels)
    print(
        f"mode labels for {model}: {counts['tool_required']} tool_required, {counts['tool_redundant']} tool_redundant, "
        f"{unlabelled} unlabelled (episode or judging failed; rerun with --resume); stored in {store.path}"
        + (f" (rule over {args.samples} samples: {args.label_rule})" if args.samples > 1 else "")
    )
    return code


def run_judge(args: argparse.Namespace) -> int:
    """Re-judge a run's saved answers into ``--out``; records judged incompletely there (or in the
    source) are judged again on every rerun until complete."""
    from vtb_app.evaluation.runner import Progress, rejudge, run_work
    from vtb_app.evaluation.specs import SpecError
    from vtb_app.evaluation.tables import print_comparison
    from vtb_env.loaders import load_tasks
    from vtb_rewards.compose import RewardConfig

    source, out = Path(args.run), Path(args.out)
    config = read_config(source)
    if not config:
        raise FileNotFoundError(f"{source} has no config.json (not a `vtb eval` run)")
    if source.resolve() == out.resolve():
        print("error: --out must be a new directory, not the run being re-judged", file=sys.stderr)
        return 2
    try:
        judge = judge_from_args(args, out)
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    tasks = {task.id: task for task in load_tasks(args.data or config["data"], limit=config.get("limit"))}
    scoring_config = {**config.get("scoring", {})}
    scoring_config.update(
        {k: v for k, v in (("critical_rule", args.critical_rule), ("multi_turn", args.multi_turn)) if v}
    )
    scoring, passes = RewardConfig(**scoring_config), _passes(args)
    new_config = {
        **{k: v for k, v in config.items() if k != "config_hash"},
        "judge": judge.judge_id,
        "judge_spec": args.judge,
        "scoring": scoring.scoring(),
        "passes": vars(passes),
        "rejudged_from": str(source.resolve()),
        "name": out.name,
    }
    try:
        digest = write_config(out, new_config)
    except RunConflictError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    done = done_keys(out / RECORDS_FILE)
    chosen = latest_records(source / RECORDS_FILE)
    records = [r for r in chosen.values() if r.get("status") == "ok" and r["key"] not in done]
    missing = sorted({r["task_id"] for r in records if r["task_id"] not in tasks})
    if missing:
        print(
            f"error: {len(missing)} tasks of the run are not in the data (e.g. {missing[0]}); pass --data",
            file=sys.stderr,
        )
        return 2
    bar = Progress(len(records), enabled=False)

    def rejudge_one(record: dict[str, Any]) -> dict[str, Any]:
        try:
            _copy_images(record, source, out)
            return rejudge(record, tasks[record["task_id"]], judge, scoring, passes, digest)
        except Exception as exc:  # this record is retried on the next run; the others go on
            return error_record(record, f"re-judging failed: {type(exc).__name__}: {exc}")

    present = latest_records(out / RECORDS_FILE)
    # Failed episodes come along as errors, so the re-judged run keeps every task in its denominators.
    failed = [
        error_record(r, str(r.get("error")), config_hash=digest)
        for r in chosen.values()
        if r.get("status") != "ok" and r["key"] not in present
    ]
    with RunLog(out / RECORDS_FILE) as log:
        for record in failed:
            log.append(record)

        def keep(record: dict[str, Any]) -> None:
            try:
                log.append(record)
            except Exception as exc:
                log.append(error_record(record, f"record could not be written: {type(exc).__name__}: {exc}"))
            bar.update(record)

        run_work([lambda r=r: rejudge_one(r) for r in records], args.concurrency, keep)
    latest = latest_records(out / RECORDS_FILE)
    incomplete = sum(1 for r in latest.values() if r.get("status") == "ok" and not judging_complete(r))
    print_failures(*run_failures(latest.values()))
    stats = judge.stats
    print(
        f"re-judged {len(records)} records ({len(done)} already done) with {judge.judge_id}: "
        f"{stats.checks} exact checks, {stats.cache_hits} cache hits, {stats.backend_calls} judge calls, "
        f"{stats.errors} errors; "
        f"{incomplete} records incompletely judged (rerun to retry them)"
    )
    print_comparison([out])
    return 1 if incomplete or bar.errors else 0


def _copy_images(record: dict[str, Any], source: Path, out: Path) -> None:
    """Copy a record's stored images into ``out``; names that are not stored images of ``source``
    (crafted paths, links) are dropped from the record, never followed."""
    files = record.get("image_files")
    kept: dict[str, str] = {}
    for name, relpath in files.items() if isinstance(files, dict) else ():
        path = run_image_path(source, relpath)
        if path is None:
            continue
        target = out / relpath
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        kept[str(name)] = relpath
    record["image_files"] = kept

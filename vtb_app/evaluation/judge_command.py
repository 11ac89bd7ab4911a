"""``vtb judge`` (re-score a run's saved answers) and the judge options every command that judges takes."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from vtb_app.evaluation.failures import print_failures, run_failures
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


def register_judge(subparsers: argparse._SubParsersAction) -> None:
    jd = subparsers.add_parser("judge", help="re-score a run's saved answers with another judge (cached)")
    jd.add_argument("run", help="a `vtb eval` (or `vtb import-toolkit`) run directory")
    jd.add_argument("--judge", required=True, help="exact | openai:MODEL@URL | hf:PATH")
    jd.add_argument("--data", default=None, help="where the tasks' rubrics come from (default: the run's --data)")
    jd.add_argument("--critical-rule", default=None, choices=("weight>=4", "flag", "either"))
    jd.add_argument("--multi-turn", default=None, choices=("pooled", "per_turn"))
    jd.add_argument("--out", required=True, help="new run directory for the re-scored records (resumable)")
    jd.add_argument("--concurrency", type=int, default=8, help="records judged at once")
    add_judge_arguments(jd)
    jd.set_defaults(func=run_judge)


def add_judge_arguments(parser: argparse.ArgumentParser) -> None:
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


def judge_passes(args: argparse.Namespace) -> Any:
    from vtb_app.evaluation.judging import JudgePasses

    return JudgePasses(process_metrics=args.process_metrics, error_types=args.error_types)


def run_judge(args: argparse.Namespace) -> int:
    """Re-judge a run's saved answers into ``--out``; records judged incompletely there (or in the
    source) are judged again on every rerun until complete."""
    from vtb_app.evaluation.console import print_comparison
    from vtb_app.evaluation.judging import rejudge
    from vtb_app.evaluation.progress import Progress
    from vtb_app.evaluation.runner import run_work
    from vtb_app.evaluation.specs import SpecError
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
    scoring, passes = RewardConfig(**scoring_config), judge_passes(args)
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

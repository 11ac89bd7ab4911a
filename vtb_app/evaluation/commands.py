"""``vtb eval`` and ``vtb label-modes``; registers ``vtb judge`` (``judge_command``), ``vtb report`` and
``vtb import-toolkit`` with them (in ``vtb_app.cli``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from vtb_app.arg_types import integer
from vtb_app.evaluation.failures import report_failures
from vtb_app.evaluation.judge_command import (
    add_judge_arguments,
    judge_from_args,
    judge_options,
    judge_passes,
    register_judge,
)
from vtb_app.evaluation.records import (
    RECORDS_FILE,
    RunConflictError,
    done_keys,
    unreadable_report,
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
        type=integer(1),
        default=None,
        metavar="K",
        help="send only the last K images of the dialogue (at most vLLM's --limit-mm-per-prompt image limit)",
    )
    parser.add_argument(
        "--concurrency",
        type=integer(1, 4096),
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
    parser.add_argument("--max-tokens", type=integer(1), default=2048)
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
    parser.add_argument("--limit", type=integer(0), default=None, help="first N tasks only")
    parser.add_argument("--critical-rule", default="weight>=4", choices=("weight>=4", "flag", "either"))
    parser.add_argument("--multi-turn", default="pooled", choices=("pooled", "per_turn"))
    parser.add_argument("--name", default=None, help="run name in reports (default: the output dir's name)")
    parser.add_argument("--resume", action="store_true", help="continue a run in --out: skip done tasks, retry errors")
    parser.add_argument("--no-progress", action="store_true")
    add_judge_arguments(parser)
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
    ev.add_argument("--samples", type=integer(1, 10_000), default=1, help="episodes per task")
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
    lm.add_argument("--samples", type=integer(1, 10_000), default=1, help="text-only episodes per task")
    add_label_rule(lm)
    lm.set_defaults(func=run_label_modes)

    register_judge(subparsers)
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


def _evaluate(args: argparse.Namespace, ablation: str, samples: int, store: Any = None) -> tuple[int, Path, list[Any]]:
    """Run `vtb eval` with ``args``: (exit code, run dir, tasks)."""
    from vtb_agents.ablations import ablate_agent
    from vtb_app.evaluation.console import print_comparison
    from vtb_app.evaluation.judging import episode_reward
    from vtb_app.evaluation.runner import evaluate
    from vtb_app.evaluation.runs import task_index
    from vtb_app.evaluation.specs import SpecError, make_agent
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
    passes = judge_passes(args)
    concurrency = args.concurrency if args.concurrency is not None else default_concurrency(args.agent)
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
        skipped = unreadable_report(out / RECORDS_FILE) if args.resume else None
        if skipped:  # nothing is lost silently: the user learns which lines were not read, and may look
            print(f"warning: {skipped}", file=sys.stderr)
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
    from vtb_app.evaluation.modes import run_model, text_only_results
    from vtb_app.evaluation.runs import Run

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

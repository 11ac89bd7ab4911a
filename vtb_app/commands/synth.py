"""``vtb synth``: write generated tasks (or the bundled demo set) in the project format."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from vtb_env.tasks import TASK_CATEGORIES, Task
from vtb_env.tools.base import ToolRegistry

SFT_VIEWS = ("pixels", "ocr", "ocr-pages")
NO_TOOLS = "none"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("synth", help="generate synthetic think-with-images tasks with exact rubrics")
    parser.add_argument("--n", type=int, default=20, help="number of tasks (twins count)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="output folder (tasks.jsonl + images/)")
    parser.add_argument("--difficulty", type=float, default=0.5, help="0 (easy) .. 1 (hard)")
    parser.add_argument(
        "--mix",
        type=json.loads,
        default=None,
        help=f"category weights as JSON, e.g. '{{\"region_switch_qa\": 2}}'; names: {', '.join(TASK_CATEGORIES)}",
    )
    parser.add_argument("--no-twins", action="store_true", help="tool-required tasks only")
    parser.add_argument(
        "--generator",
        choices=("v1", "v2", "v3"),
        default="v3",
        help="v3: twins show the same pages and print, only reading tells the label (default); "
        "v2: twins share one photo, only the key pages differ; v1: the first generator",
    )
    parser.add_argument(
        "--split",
        choices=("all", "train", "heldout"),
        default="all",
        help="v3 only: train leaves out the held-out scene types and hiding mechanisms; heldout has only those",
    )
    parser.add_argument(
        "--solvable",
        action="store_true",
        help="keep a pair only when the OCR probe confirms its labels: the tool-required task unreadable as shown "
        "and read after the reference code, the twin read as shown (needs Tesseract)",
    )
    parser.add_argument(
        "--demo", action="store_true", help="regenerate the bundled demo set, corpus and weather archive"
    )
    parser.add_argument(
        "--sft",
        action="store_true",
        help="also write OUT/sft.parquet: each task's reference trajectory run in the env, then the golden answer "
        "(TRL's conversational format; docs/training.md)",
    )
    parser.add_argument(
        "--view",
        choices=SFT_VIEWS,
        default="pixels",
        help="--sft for a text policy: ocr shows each picture as the words OCR reads in it (ocr-pages: the words "
        "alone, no question); pixels (default): image placeholders and an images column",
    )
    parser.add_argument(
        "--tools",
        default=None,
        help="--sft: the tools offered, comma-separated (default: all); none: no tools, every conversation answers "
        "directly (the reference calls left out, the no-tools system prompt); a task whose reference calls a tool "
        "not offered is skipped",
    )
    parser.add_argument(
        "--ocr-cache", type=Path, help="--sft --view ocr: a JSON file of OCR reads, loaded if it exists, written back"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from vtb_env.loaders import DEMO_DIR, save_tasks
    from vtb_env.synth import demo_tasks, generate
    from vtb_env.synth.reference_data import write_reference_data

    if args.demo:
        out = args.out or DEMO_DIR
        tasks = demo_tasks(args.generator)
        corpus, weather = write_reference_data()
        print(f"wrote {corpus} and {weather}")
    else:
        if args.out is None:
            raise SystemExit("vtb synth: --out is required (or use --demo)")
        if not 0.0 <= args.difficulty <= 1.0:
            raise SystemExit("vtb synth: --difficulty must be in [0, 1]")
        try:
            tasks = generate(
                args.n,
                args.seed,
                args.mix,
                difficulty=args.difficulty,
                twins=not args.no_twins,
                generator=args.generator,
                split=args.split,
                solvable=args.solvable,
            )
        except ValueError as exc:
            raise SystemExit(f"vtb synth: {exc}") from None
        out = args.out
    path = save_tasks(tasks, out)
    print(f"wrote {len(tasks)} tasks to {path}")
    if args.sft:
        _export_sft(tasks, Path(out), args.view, args.tools, args.ocr_cache)
    return 0


def _export_sft(tasks: list[Task], out: Path, view: str, tools: str | None, ocr_cache: Path | None) -> None:
    from vtb_app.integrations.trl_model import ocr_cache_file
    from vtb_env.ocr_view import make_view
    from vtb_env.sft import export_sft, sft_env_config
    from vtb_env.tools import default_tools

    registry = default_tools()
    try:
        offered = _offered(registry, tools)
        config = sft_env_config(tool_set="none", system_prompt="no_tools") if tools == NO_TOOLS else sft_env_config()
        with ocr_cache_file(ocr_cache if view != "pixels" else None):  # the view reads through the shared cache
            path, rows, skipped = export_sft(
                without_reference_calls(tasks) if tools == NO_TOOLS else tasks,
                out,
                offered,
                config,
                make_view(view) if view != "pixels" else None,
            )
    finally:
        registry.close()
    print(f"wrote {rows} SFT conversations to {path}")
    for task_id, why in skipped:
        print(f"skipped {task_id}: {why}")


def _offered(registry: ToolRegistry, tools: str | None) -> ToolRegistry:
    """The registry limited to ``--tools`` (all of it for none: the env's tool set withdraws them)."""
    try:
        return registry if tools in (None, NO_TOOLS) else registry.select(tools)
    except ValueError as exc:
        raise SystemExit(f"vtb synth --tools: {exc}") from None


def without_reference_calls(tasks: list[Task]) -> list[Task]:
    """The tasks with their reference tool calls left out: each turn's reference conversation answers directly."""
    return [replace(t, turns=tuple(replace(turn, tool_trajectory_raw="") for turn in t.turns)) for t in tasks]

"""``vtb synth``: write generated tasks (or the bundled demo set) in the project format."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from vtb_env.tasks import TASK_CATEGORIES


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
        _export_sft(tasks, Path(out))
    return 0


def _export_sft(tasks: list, out: Path) -> None:
    from vtb_env.sft import export_sft
    from vtb_env.tools import default_tools

    tools = default_tools()
    try:
        path, rows, skipped = export_sft(tasks, out, tools)
    finally:
        tools.close()
    print(f"wrote {rows} SFT conversations to {path}")
    for task_id, why in skipped:
        print(f"skipped {task_id}: {why}")

"""Small VisualToolBench files in the exact official layouts, for loader tests and benchmarks.

``official_rows()`` gives rows in the current Hub schema (HF Image structs ``{bytes, path}``,
``list<list<struct>>`` for ``images_by_turn``); the writers below lay them out as current
parquet, the two older parquet layouts, or a directory like the toolkit's
``download_dataset.py`` writes.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
CURRENT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("turncase", pa.string()),
        ("num_turns", pa.int64()),
        ("prompt_category", pa.string()),
        ("eval_focus", pa.string()),
        ("turn_prompts", pa.list_(pa.string())),
        ("turn_golden_answers", pa.list_(pa.string())),
        ("turn_tool_trajectories", pa.list_(pa.string())),
        ("rubrics_by_turn", pa.list_(pa.string())),
        ("images", pa.list_(IMAGE)),
        ("images_by_turn", pa.list_(pa.list_(IMAGE))),
        ("num_images", pa.int64()),
    ]
)
# The features block `datasets` writes into the schema metadata (so load_dataset sees Images).
_HF_FEATURES = {
    name: {"dtype": "string" if pa.types.is_string(t) else "int64", "_type": "Value"}
    for name, t in zip(CURRENT_SCHEMA.names, CURRENT_SCHEMA.types, strict=True)
    if not pa.types.is_list(t)
}
_HF_FEATURES.update(
    {
        name: {"feature": {"dtype": "string", "_type": "Value"}, "_type": "List"}
        for name in ("turn_prompts", "turn_golden_answers", "turn_tool_trajectories", "rubrics_by_turn")
    }
)
_HF_FEATURES["images"] = {"feature": {"_type": "Image"}, "_type": "List"}
_HF_FEATURES["images_by_turn"] = {"feature": {"feature": {"_type": "Image"}, "_type": "List"}, "_type": "List"}
HF_METADATA = {b"huggingface": json.dumps({"info": {"features": _HF_FEATURES}}).encode()}


def png_bytes(width: int = 32, height: int = 24, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buffer, format="PNG")
    return buffer.getvalue()


def image_struct(data: bytes, path: str | None = None) -> dict[str, Any]:
    return {"bytes": data, "path": path}


def rubric(
    description: str, weight: int, critical: str = "no", final_answer: str = "yes", **extra: Any
) -> dict[str, Any]:
    """One official rubric entry (note the slash keys and the yes/no strings)."""
    return {
        "description": description,
        "weight": weight,
        "objective/subjective": extra.get("objective", "objective"),
        "explicit/implicit": extra.get("explicit", "explicit"),
        "category": extra.get("category", ["visual understanding"]),
        "critical": critical,
        "final_answer": final_answer,
    }


def make_row(
    task_id: str,
    turns: list[dict[str, Any]],
    *,
    prompt_category: str = "generalist",
    eval_focus: str = "region_switch_qa",
) -> dict[str, Any]:
    """A current-schema row; each turn: prompt, answer, images (bytes list), rubrics (dict), trajectory."""
    by_turn = [
        [image_struct(data, f"{task_id}_{t}_{j}.png") for j, data in enumerate(turn.get("images", []))]
        for t, turn in enumerate(turns)
    ]
    return {
        "id": task_id,
        "turncase": "single-turn" if len(turns) == 1 else "multi-turn",
        "num_turns": len(turns),
        "prompt_category": prompt_category,
        "eval_focus": eval_focus,
        "turn_prompts": [turn["prompt"] for turn in turns],
        "turn_golden_answers": [turn.get("answer", "42") for turn in turns],
        "turn_tool_trajectories": [
            turn.get("trajectory", '[{"tool": "python_image_processing", "code": "crop"}]') for turn in turns
        ],
        "rubrics_by_turn": [
            turn["rubrics"] if isinstance(turn["rubrics"], str) else json.dumps(turn["rubrics"]) for turn in turns
        ],
        "images": [image for images in by_turn for image in images],
        "images_by_turn": by_turn,
        "num_images": sum(len(images) for images in by_turn),
    }


def official_rows() -> list[dict[str, Any]]:
    """Four good tasks covering the awkward cases of the real data."""
    red, green, blue = (
        png_bytes(color=(200, 30, 30)),
        png_bytes(40, 30, (30, 200, 30)),
        png_bytes(20, 50, (30, 30, 200)),
    )
    return [
        make_row(
            "68658a711603983919432616",
            [
                {
                    "prompt": "What does the sign in the second photo say?",
                    "answer": "OPEN",
                    "images": [red, green],  # a multi-image turn
                    "rubrics": {
                        "3f1c9a2e-1111-4c1d-9a55-0a1b2c3d4e5f_1": rubric(
                            "Says OPEN", 5, "yes", category=["visual understanding", "truthfulness"]
                        ),
                        "3f1c9a2e-1111-4c1d-9a55-0a1b2c3d4e5f_2": rubric(
                            "Mentions the colour", 2, "yes", "no", objective="subjective", explicit="implicit"
                        ),
                    },
                }
            ],
            prompt_category="chemistry",
            eval_focus="region_switch_qa",
        ),
        make_row(
            "68658a711603983919432617",
            [
                {
                    "prompt": "Read the chart.",
                    "answer": "12 mg",
                    "images": [blue],
                    "rubrics": {"a0-final": rubric("States 12 mg", 4)},
                },
                {
                    "prompt": "And per day?",
                    "answer": "36 mg",
                    "images": [],
                    "rubrics": {"b0-final": rubric("States 36 mg", 5)},
                },  # no image
                {
                    "prompt": "Compare with these.",
                    "answer": "higher",
                    "images": [green, red],
                    "rubrics": {"c0": rubric("Says higher", 3)},
                },
            ],
            prompt_category="medical",
            eval_focus="follow_up_test",
        ),
        make_row(
            "68658a711603983919432618",
            [
                {
                    "prompt": "Total of the receipt?",
                    "answer": "$13",
                    "images": [green],
                    "rubrics": {"d0": rubric("Says $13", 5)},
                }
            ],
            prompt_category="finance",
            eval_focus="hybrid_tool_reasoning",
        ),
        make_row(
            "68658a711603983919432619",
            [
                {"prompt": "Who leads?", "answer": "Team A", "images": [red], "rubrics": {"e0": rubric("Team A", 5)}},
                {
                    "prompt": "After the break?",
                    "answer": "Team B",
                    "images": [blue],
                    "rubrics": {"e1": rubric("Team B", 4)},
                },
            ],
            prompt_category="sports",
            eval_focus="temporal_visual_reasoning",
        ),
    ]


def broken_rows() -> dict[str, dict[str, Any]]:
    """One row per bad-row reason, keyed by the word the report's reason must contain."""
    good = png_bytes()
    bad_json = make_row("bad-rubric-json", [{"prompt": "p", "images": [good], "rubrics": "{not json"}])
    bad_image = make_row(
        "bad-image", [{"prompt": "p", "images": [b"\x89PNG\r\n\x1a\n truncated"], "rubrics": {"r": rubric("x", 5)}}]
    )
    uneven = make_row(
        "uneven-turns",
        [
            {"prompt": "p", "images": [good], "rubrics": {"r": rubric("x", 5)}},
            {"prompt": "q", "rubrics": {"s": rubric("y", 5)}},
        ],
    )
    uneven["turn_golden_answers"] = uneven["turn_golden_answers"][:1]
    missing = make_row("missing-answer", [{"prompt": "p", "images": [good], "rubrics": {"r": rubric("x", 5)}}])
    missing["turn_golden_answers"] = None
    return {"rubric JSON": bad_json, "decode": bad_image, "different lengths": uneven, "missing field": missing}


def write_current(path: Path, rows: list[dict[str, Any]], row_group_size: int | None = None) -> Path:
    table = pa.Table.from_pylist(rows, schema=CURRENT_SCHEMA.with_metadata(HF_METADATA))
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def write_legacy_1191(path: Path, rows: list[dict[str, Any]]) -> Path:
    """The older 1,191-row layout: ``prompt`` and ``rubrics`` lists per turn, ``images_by_turn``."""
    legacy = [
        {
            "id": r["id"],
            "prompt_category": r["prompt_category"],
            "eval_focus": r["eval_focus"],
            "prompt": r["turn_prompts"],
            "rubrics": r["rubrics_by_turn"],
            "images_by_turn": r["images_by_turn"],
        }
        for r in rows
    ]
    pq.write_table(pa.Table.from_pylist(legacy), path)
    return path


def write_legacy_1204(path: Path, rows: list[dict[str, Any]]) -> Path:
    """The older flat layout: '[Turn N]'-prefixed strings, flat ``images`` and a first ``image``."""

    def prefixed(values: list[str]) -> str:
        return values[0] if len(values) == 1 else " ".join(f"[Turn {i}] {v}" for i, v in enumerate(values, start=1))

    legacy = [
        {
            "id": r["id"],
            "prompt_category": r["prompt_category"],
            "eval_focus": r["eval_focus"],
            "prompt": prefixed(r["turn_prompts"]),
            "golden_answer": prefixed(r["turn_golden_answers"]),
            "tool_trajectory": json.dumps(r["turn_tool_trajectories"]),
            "rubrics": json.dumps([json.loads(x) for x in r["rubrics_by_turn"]])
            if len(r["rubrics_by_turn"]) > 1
            else r["rubrics_by_turn"][0],
            "image": r["images"][0],
            "images": r["images"],
        }
        for r in rows
    ]
    pq.write_table(pa.Table.from_pylist(legacy), path)
    return path


def write_toolkit_dir(root: Path, rows: list[dict[str, Any]]) -> Path:
    """What ``download_dataset.py`` writes: data/<split>/dataset.json + PNGs, paths relative to root."""
    counters = {"single_turn": 0, "multi_turn": 0}
    samples: dict[str, list[dict[str, Any]]] = {"single_turn": [], "multi_turn": []}
    for row in rows:
        split = "single_turn" if len(row["turn_prompts"]) == 1 else "multi_turn"
        k = counters[split]
        counters[split] += 1
        folder = root / "data" / split / "images" / f"sample_{k}"
        folder.mkdir(parents=True, exist_ok=True)
        sample = {key: value for key, value in row.items() if key not in ("images", "images_by_turn")}
        sample["image_paths"], sample["images_by_turn_paths"] = [], []
        for j, image in enumerate(row["images"]):
            (folder / f"image_{j}.png").write_bytes(image["bytes"])
            sample["image_paths"].append(f"data/{split}/images/sample_{k}/image_{j}.png")
        for t, images in enumerate(row["images_by_turn"]):
            paths = []
            for j, image in enumerate(images):
                (folder / f"turn_{t}_image_{j}.png").write_bytes(image["bytes"])
                paths.append(f"data/{split}/images/sample_{k}/turn_{t}_image_{j}.png")
            sample["images_by_turn_paths"].append(paths)
        samples[split].append(sample)
    for split, entries in samples.items():
        (root / "data" / split).mkdir(parents=True, exist_ok=True)
        (root / "data" / split / "dataset.json").write_text(json.dumps(entries, indent=2))
    return root

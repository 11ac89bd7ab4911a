"""Menu tasks for evaluation tests: a menu image drawn at two sizes and project-format tasks asking for prices."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository
ITEMS = [("Garden Salad", 9), ("Margherita Pizza", 13), ("Lemon Soda", 4)]


def draw_menu(path: Path, px: int = 40, shrink: int = 1) -> None:
    image = Image.new("RGB", (900, 120 + 70 * len(ITEMS)), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=px)
    draw.text((40, 30), "MENU", font=font, fill="black")
    for i, (label, price) in enumerate(ITEMS):
        draw.text((40, 100 + 70 * i), label, font=font, fill="black")
        draw.text((600, 100 + 70 * i), f"${price}", font=font, fill="black")
    if shrink > 1:
        image = image.resize((image.width // shrink, image.height // shrink), Image.BILINEAR)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)


def write_menu_tasks(root: Path, n: int = 2) -> Path:
    """``n`` project-format tasks: even ones show a large menu (readable), odd ones a tiny one."""
    draw_menu(root / "images" / "big.png")
    draw_menu(root / "images" / "tiny.png", shrink=5)  # OCR reads it only after upscaling
    with open(root / "tasks.jsonl", "w") as handle:
        for i in range(n):
            label, price = ITEMS[i % len(ITEMS)]
            rubrics = {
                "r1": {
                    "description": f"states {price}",
                    "weight": 5,
                    "critical": "yes",
                    "check": {"type": "number", "value": price},
                },
                "r2": {"description": "is concise", "weight": 1, "check": {"type": "text", "any_of": ["answer"]}},
            }
            task = {
                "id": f"menu-{i}",
                "prompt_category": "finance" if i % 2 else "generalist",
                "eval_focus": "region_switch_qa",
                "mode_label": "tool_required" if i % 2 else "tool_redundant",
                "turns": [
                    {
                        "prompt": f"What is the price of the {label}?",
                        "images": ["tiny.png" if i % 2 else "big.png"],
                        "golden_answer": str(price),
                        "rubrics": rubrics,
                    }
                ],
            }
            handle.write(json.dumps(task) + "\n")
    return root

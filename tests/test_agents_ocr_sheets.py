"""The OCR baseline flattens a small, turned, keystoned sheet from its four corners and reads its rows."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image, ImageDraw

from vtb_agents.ocr_baseline.agent import OcrBaselineAgent
from vtb_agents.ocr_baseline.episode import EpisodeView
from vtb_agents.ocr_baseline.reading import parse_reading
from vtb_agents.ocr_baseline.vision import enhance_code, repair_plan, sheets
from vtb_agents.ocr_baseline.voting import vote
from vtb_env.synth.photo import perspective_coeffs
from vtb_env.synth.render import font

ROWS = [("Hornets", "38"), ("Wolves", "40"), ("Falcons", "48"), ("Comets", "42"), ("Rangers", "18"), ("Pirates", "74")]


def keystoned_sheet(px: int = 10, turn: float = 25.0) -> tuple[Image.Image, list[tuple[float, float]], Image.Image]:
    """A photo with a small score sheet (``px`` print) turned by ``turn`` degrees and seen from below (its top
    edge 12% shorter): the photo, the sheet's true corners (top-left, top-right, bottom-right, bottom-left)
    and the flat sheet as printed."""
    w, h = 14 * px, 22 * px
    sheet = Image.new("L", (w, h), 238)
    draw = ImageDraw.Draw(sheet)
    draw.text((px, px), "League", font=font(px + 2, bold=True), fill=30)
    for i, (team, score) in enumerate(ROWS):
        y = int(px * (3.5 + 2.4 * i))
        draw.text((px, y), team, font=font(px), fill=30)
        draw.text((int(px * 8.5), y), score, font=font(px, bold=True), fill=20)
    a = np.radians(turn)
    corners = [
        (880 + x * 170 * np.cos(a) - y * 240 * np.sin(a), 300 + x * 170 * np.sin(a) + y * 240 * np.cos(a))
        for x, y in [(-0.44, -0.5), (0.44, -0.5), (0.5, 0.5), (-0.5, 0.5)]
    ]
    photo = Image.fromarray((np.indices((800, 1200)).sum(0) // 30 + 80).astype("uint8"))  # a soft gradient desk
    coeffs = perspective_coeffs(corners, [(0, 0), (w, 0), (w, h), (0, h)])
    shown = sheet.transform(photo.size, Image.Transform.PERSPECTIVE, coeffs, Image.Resampling.BICUBIC)
    mask = Image.new("L", (w, h), 255).transform(photo.size, Image.Transform.PERSPECTIVE, coeffs)
    photo.paste(shown, mask=mask)
    return photo.convert("RGB"), corners, sheet


def _run_tool_code(tmp_path, image: Image.Image) -> list[Image.Image]:
    """The repair plan's code run as the sandboxed tool runs it; the variants of the planned sheet."""
    image.save(tmp_path / "image_1.png")
    plan = repair_plan("image_1.png", image)
    code = enhance_code(plan, 1)
    assert len(code) <= 5000  # the tool's limit
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)["variants"]
    assert len(made) <= 16  # the sandbox returns at most 16 files
    sheet_box = next(list(p[1]) for p in plan if p[3] == "sheet")
    return [Image.open(tmp_path / name) for name, (_src, box) in made.items() if box == sheet_box]


def test_a_keystoned_turned_sheet_is_found_by_its_four_corners():
    photo, truth, _sheet = keystoned_sheet()
    found = sheets(photo, max_share=0.1)
    assert len(found) == 1
    _box, _angle, corners = found[0]
    # The same quadrilateral (clockwise, starting anywhere: the sheet's top is known up to quarter turns).
    offsets = [max(np.hypot(*np.subtract(corners[(i + k) % 4], truth[i])) for i in range(4)) for k in range(4)]
    assert min(offsets) <= 6, (corners, truth)
    plan = repair_plan("image_1.png", photo)
    assert [p[3] for p in plan] == ["page", "sheet"]
    assert 2.0 <= plan[1][4] <= 6.0  # the enlargement measured on 10 px print


def test_the_flattened_sheet_matches_the_printed_sheet(tmp_path):
    """One quarter turn of the tool's output is the printed sheet, enlarged: flattened by the perspective map
    from its corners (a rotation by the edge's angle leaves the keystone's slant; its crop holds the desk)."""
    photo, _truth, sheet = keystoned_sheet()
    variants = _run_tool_code(tmp_path, photo)
    assert len(variants) == 4
    printed = np.asarray(sheet, float)

    def likeness(variant: Image.Image) -> float:
        page = variant.convert("L").crop((24, 24, variant.width - 24, variant.height - 24))  # the quiet margin
        flat = np.asarray(page.resize(sheet.size, Image.Resampling.BOX), float)
        return float(np.corrcoef(flat.ravel(), printed.ravel())[0, 1])

    assert max(likeness(v) for v in variants) > 0.6  # 0.69 here; tilted 3 degrees 0.34-0.45
    assert min(v.height for v in variants) > 2.5 * min(sheet.size)  # enlarged at least 2.5x


@pytest.mark.slow
@pytest.mark.usefixtures("tesseract")  # skipped without it, a failure under CI
def test_every_row_of_a_keystoned_small_sheet_is_read_after_repair(tmp_path):
    photo, _truth, _sheet = keystoned_sheet()
    agent = OcrBaselineAgent()
    view = EpisodeView({"messages": []}, agent.ocr, agent.second_ocr)
    shown = parse_reading(agent.ocr(photo))
    assert not {v for _label, v in ROWS} <= {r.text for r in shown.rows}  # unreadable as shown
    view.images = {f"turn{i}": variant for i, variant in enumerate(_run_tool_code(tmp_path, photo))}
    voted = vote(view.region_votes(list(view.images), photo.size))
    assert {(row.label, row.text) for row in voted.rows} >= set(ROWS)

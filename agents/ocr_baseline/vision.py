"""Computer vision for the vision tool: where the text is, how it is tilted, and the code to repair it.

The agent locates small print (text-dense regions that are not a large page) and measures its
skew itself, then sends the sandboxed ``python_image_processing`` tool concrete code
(``enhance_code``): the whole picture with its light evened out and faint print darkened (rows
under glare or in a shadow), and each small-print region deskewed, enlarged 3.5x, cleaned and
saved in four quarter turns.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Box = tuple[int, int, int, int]
Plan = list[tuple[str, Box, float, str]]  # (image name, crop box, deskew angle in degrees, "page" | "small")
SMALL_SHARE = 0.2  # a text region larger than this share of the picture is a large page, not small print
SMALL_IMAGE = 400_000  # pixels: a picture this small is enlarged whole rather than searched for small print


def text_regions(image: Any, max_regions: int = 3, min_share: float = 0.3) -> list[tuple[int, int, int, int]]:
    """Boxes ``(x0, y0, x1, y1)`` of text-dense regions: many fine strokes close together.

    Shapes and large lettering give few fine strokes per area; small print gives many.
    """
    import cv2

    gray = np.asarray(image.convert("L"), dtype=np.float32)
    gray = (gray - gray.min()) / max(1.0, float(gray.max() - gray.min())) * 255
    strokes = np.abs(gray - cv2.GaussianBlur(gray, (0, 0), 1.0))
    ink = (strokes > max(6.0, float(np.percentile(strokes, 95)) * 0.5)).astype(np.float32)
    mask = (cv2.boxFilter(ink, -1, (25, 25)) > 0.18).astype(np.uint8)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(cv2.dilate(mask, np.ones((15, 15), np.uint8)))
    found = []
    for i in range(1, count):
        x, y, w, h, _area = (int(v) for v in stats[i])
        if w >= 30 and h >= 30:
            found.append((float(ink[labels == i].sum()), (x, y, x + w, y + h)))
    found.sort(reverse=True)
    if not found:
        return []
    return [box for score, box in found[:max_regions] if score >= min_share * found[0][0]]


def skew_angle(image: Any, box: tuple[int, int, int, int]) -> float:
    """Degrees to rotate the region (counter-clockwise) so its text lines run horizontally.

    Projection profile: the angle whose row sums of stroke pixels vary most.
    """
    import cv2

    gray = np.asarray(image.convert("L").crop(box), dtype=np.float32)
    strokes = np.abs(gray - cv2.GaussianBlur(gray, (0, 0), 1.0))
    ink = (strokes > max(4.0, float(np.percentile(strokes, 90)))).astype(np.float32)
    h, w = ink.shape
    center = (w / 2, h / 2)
    side = int(np.hypot(w, h))

    def spread(angle: float) -> float:
        matrix = cv2.getRotationMatrix2D(center, angle, 1.0)
        matrix[:, 2] += ((side - w) / 2, (side - h) / 2)
        rotated = cv2.warpAffine(ink, matrix, (side, side))
        return float(np.var(rotated.sum(axis=1)))

    coarse = max(np.arange(-90, 90, 3.0), key=spread)
    return float(max(np.arange(coarse - 3, coarse + 3.1, 0.5), key=spread))


ENHANCE_CODE = """import json
import cv2
import numpy as np
from PIL import Image, ImageFilter
# What to repair, located in the original images: (image, crop box, deskew angle in degrees, kind).
# "page": the whole picture, light evened out and its faint print darkened (glare, shadow);
# "small": small print, deskewed, enlarged and saved in four quarter turns (the angle is known up to them).
plan = {plan!r}
index, made = {start}, {{}}


def even(region, window=None):
    # Divide by the paper's brightness (ink removed by a max filter), then optionally darken faint print.
    grey = np.asarray(region.filter(ImageFilter.MedianFilter(3)), np.float32)
    paper = cv2.GaussianBlur(cv2.dilate(grey, np.ones((15, 15), np.uint8)), (0, 0), 8)
    flat = np.clip(grey / np.maximum(paper, 1) * 255, 0, 255)
    if window:
        low, high = window
        flat = np.clip((flat - low) * 255 / (high - low), 0, 255)
    return Image.fromarray(flat.astype(np.uint8))


def save(image, name, box):
    global index
    image.save(f"transformed_image_{{index}}.png")
    made[f"transformed_image_{{index}}.png"] = [name, list(box)]
    index += 1


for name, box, angle, kind in plan:
    region = Image.open(name).convert("L").crop(box)
    if kind == "page":
        save(even(region, window=(226, 251)), name, box)
        continue
    region = region.rotate(angle, resample=Image.BICUBIC, expand=True, fillcolor=255)
    region = even(region.resize((region.width * 7 // 2, region.height * 7 // 2), Image.LANCZOS))
    for turn in (0, 90, 180, 270):
        save(region.rotate(turn, expand=True), name, box)
print(json.dumps({{"variants": made}}))
"""


def repair_plan(name: str, image: Any) -> Plan:
    """What to repair in one image: the whole picture with its light evened out (faint rows on a
    large page), and its two densest page-shaped text regions that are neither a large page nor part of one
    (small print, padded, each with its measured deskew angle)."""
    whole = (0, 0, image.width, image.height)
    plan: Plan = [(name, whole, 0.0, "page")]
    if image.width * image.height <= SMALL_IMAGE:  # a small picture is small print as a whole
        return plan + [(name, whole, round(skew_angle(image, whole), 1), "small")]
    regions = text_regions(image, max_regions=12, min_share=0.03)
    small = [
        b
        for b in regions
        if _area(b) <= SMALL_SHARE * image.width * image.height
        and _page_like(b)
        and not any(o != b and _inside(b, o) for o in regions)  # a fragment of a larger page
    ]
    for box in small[:2]:  # the densest first
        box = _padded(box, image.size, 12)
        plan.append((name, box, round(skew_angle(image, box), 1), "small"))
    return plan


def enhance_code(plan: Plan, start: int) -> str:
    """The tool's code for ``plan``; its outputs are numbered from ``transformed_image_<start>``."""
    return ENHANCE_CODE.format(plan=plan, start=start)


def _page_like(box: Box) -> bool:
    """A page of small print, not one line of large print (a title): neither side 2.5x the other."""
    w, h = box[2] - box[0], box[3] - box[1]
    return max(w, h) <= 2.5 * min(w, h)


def _inside(box: Box, other: Box) -> bool:
    return other[0] <= box[0] and other[1] <= box[1] and box[2] <= other[2] and box[3] <= other[3]


def _area(box: Box) -> int:
    return (box[2] - box[0]) * (box[3] - box[1])


def _padded(box: Box, size: tuple[int, int], pad: int) -> Box:
    return (max(0, box[0] - pad), max(0, box[1] - pad), min(size[0], box[2] + pad), min(size[1], box[3] + pad))

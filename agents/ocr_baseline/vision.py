"""Computer vision for the vision tool: where the text is, how it is tilted, and the code to repair it.

The agent locates text-dense regions and measures their skew itself, then sends the sandboxed
``python_image_processing`` tool concrete code (``enhance_code``) that crops, deskews, upscales,
cleans and saves each region in eight orientations.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Box = tuple[int, int, int, int]
Plan = list[tuple[str, Box, float]]  # (image name, crop box, deskew angle in degrees)
SMALL_IMAGE = 400_000  # pixels: a picture this small is read whole rather than cropped


def text_regions(image: Any, max_regions: int = 3) -> list[tuple[int, int, int, int]]:
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
    return [box for score, box in found[:max_regions] if score >= 0.3 * found[0][0]]


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
from PIL import Image, ImageFilter, ImageOps
# Regions to read, located in the original images: (image, crop box, deskew angle in degrees).
plan = {plan!r}
index, made = {start}, {{}}
for name, box, angle in plan:
    region = Image.open(name).convert("L").crop(box)
    scale = min(3, max(2, 1200 // max(region.size)))
    region = region.resize((region.width * scale, region.height * scale), Image.LANCZOS)
    region = region.filter(ImageFilter.MedianFilter(3))
    region = ImageOps.autocontrast(region, cutoff=1)
    if sum(region.histogram()[:100]) > 0.6 * region.width * region.height:  # under-exposed: lift the shadows
        region = region.point(lambda v: int(255 * (v / 255) ** 0.6))
    region = region.rotate(angle, resample=Image.BICUBIC, expand=True, fillcolor=255)
    side = region.rotate(90, expand=True)
    # The measured angle is known up to quarter turns, and the region may be mirrored.
    for turned in (region, region.rotate(180), side, side.rotate(180),
                   ImageOps.mirror(region), ImageOps.flip(region), ImageOps.mirror(side), ImageOps.flip(side)):
        turned.save(f"transformed_image_{{index}}.png")
        made[f"transformed_image_{{index}}.png"] = [name, list(box)]
        index += 1
print(json.dumps({{"variants": made}}))
"""


def repair_plan(name: str, image: Any) -> Plan:
    """The regions of one image to repair: its two most text-dense regions (or the whole of a
    small picture), padded, each with its measured deskew angle."""
    whole = [(0, 0, image.width, image.height)]
    boxes = whole if image.width * image.height <= SMALL_IMAGE else text_regions(image, max_regions=2) or whole
    plan = []
    for box in boxes:
        box = _padded(box, image.size, 12)
        plan.append((name, box, round(skew_angle(image, box), 1)))
    return plan


def enhance_code(plan: Plan, start: int) -> str:
    """The tool's code for ``plan``; its outputs are numbered from ``transformed_image_<start>``."""
    return ENHANCE_CODE.format(plan=plan, start=start)


def _padded(box: Box, size: tuple[int, int], pad: int) -> Box:
    return (max(0, box[0] - pad), max(0, box[1] - pad), min(size[0], box[2] + pad), min(size[1], box[3] + pad))

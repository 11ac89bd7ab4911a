"""Computer vision for the vision tool: where the text is, how it is tilted, and the code to repair it.

The agent locates small print itself (small sheets by their outline and four corners; then
text-dense regions that are not a large page, deskewed by a projection profile) and measures its
letter height, then sends the sandboxed ``python_image_processing`` tool concrete code
(``enhance_code``): the whole picture with its light evened out (divided by a closing of the paper,
which keeps a shadow's or glare's edge sharp) and faint print darkened (rows under glare or in a
shadow), and each small-print region flattened (a sheet: one perspective map from its corners) or
deskewed, enlarged to ``TEXT_HEIGHT`` letters, cleaned and saved in four quarter turns.
"""

from __future__ import annotations

from typing import Any

import numpy as np

Box = tuple[int, int, int, int]
Corners = tuple[tuple[int, int], ...]  # a sheet's four corners, clockwise from the top-left one; () when not a sheet
# (image name, crop box, deskew angle in degrees, "page" | "small" | "sheet", enlargement, sheet corners)
Plan = list[tuple[str, Box, float, str, float, Corners]]
TEXT_HEIGHT = 32  # px: median letter height (as `text_height` measures) of enlarged print; 24 or 40 read fewer rows
SMALL_SHARE = 0.2  # a text region larger than this share of the picture is a large page, not small print
SMALL_IMAGE = 150_000  # pixels: a picture this small is small print as a whole


def text_regions(
    image: Any, max_regions: int = 3, min_share: float = 0.3, join: int = 15
) -> list[tuple[int, int, int, int]]:
    """Boxes ``(x0, y0, x1, y1)`` of text-dense regions: many fine strokes close together (strokes
    closer than ``join`` pixels join one region).

    Shapes and large lettering give few fine strokes per area; small print gives many.
    """
    import cv2

    gray = np.asarray(image.convert("L"), dtype=np.float32)
    gray = (gray - gray.min()) / max(1.0, float(gray.max() - gray.min())) * 255
    strokes = np.abs(gray - cv2.GaussianBlur(gray, (0, 0), 1.0))
    ink = (strokes > max(6.0, float(np.percentile(strokes, 95)) * 0.5)).astype(np.float32)
    mask = (cv2.boxFilter(ink, -1, (25, 25)) > 0.18).astype(np.uint8)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(cv2.dilate(mask, np.ones((join, join), np.uint8)))
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
from PIL import Image, ImageFilter, ImageOps
# What to repair, located in the original images: (image, crop box, deskew angle, kind, zoom, corners).
# "page": the whole picture, light evened out and its faint print darkened (glare, shadow);
# "sheet": a small sheet flattened from its four corners (perspective) and enlarged;
# "small": small print, deskewed and enlarged. Both are saved in four quarter turns (known up to them).
plan = {plan!r}
index, made = {start}, {{}}


def even(region, window=None):
    # Divide by the paper's brightness, then optionally darken faint print. With a window (the whole
    # picture), the paper is a closing (ink removed, a shadow's or glare's edge kept sharp); else a max filter, blurred.
    grey = np.asarray(region.filter(ImageFilter.MedianFilter(3)), np.float32)
    if window:
        paper = cv2.GaussianBlur(cv2.morphologyEx(grey, cv2.MORPH_CLOSE, np.ones((15, 15), np.uint8)), (0, 0), 1.5)
    else:
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


for name, box, angle, kind, zoom, corners in plan:
    photo = Image.open(name).convert("L")
    region = photo.crop(box)
    if kind == "page":
        save(even(region, window=(226, 251)), name, box)
        continue
    if kind == "sheet":
        src = np.float32(corners)
        w = int(zoom * (np.hypot(*(src[1] - src[0])) + np.hypot(*(src[2] - src[3]))) / 2)
        h = int(zoom * (np.hypot(*(src[3] - src[0])) + np.hypot(*(src[2] - src[1]))) / 2)
        flat = np.float32([(0, 0), (w, 0), (w, h), (0, h)])
        warp = cv2.getPerspectiveTransform(src, flat)
        grey = np.asarray(photo, np.uint8)
        region = Image.fromarray(cv2.warpPerspective(grey, warp, (w, h), flags=cv2.INTER_CUBIC, borderValue=255))
    else:
        region = region.rotate(angle, resample=Image.BICUBIC, expand=True, fillcolor=255)
        region = region.resize((int(region.width * zoom), int(region.height * zoom)), Image.LANCZOS)
    region = ImageOps.expand(even(region), border=24, fill=255)
    for turn in (0, 90, 180, 270):
        save(region.rotate(turn, expand=True), name, box)
print(json.dumps({{"variants": made}}))
"""


def small_pages(image: Any, max_share: float = SMALL_SHARE) -> list[tuple[Box, float]]:
    """Small sheets of paper with print on them: ``(bounding box, angle that levels their edges)``, largest first."""
    return [(box, angle) for box, angle, _corners in sheets(image, max_share)]


def sheets(image: Any, max_share: float = SMALL_SHARE) -> list[tuple[Box, float, Corners]]:
    """Small sheets of paper with print on them: ``(bounding box, edge angle, four corners)``, largest first.

    A sheet's outline is a convex quadrilateral of edges (Canny); one without fine strokes inside
    (a bar, a frame, a shape) is no page. The angle (and the corners' order) is known up to quarter turns.
    """
    import cv2

    gray = np.asarray(image.convert("L"))
    area = gray.shape[0] * gray.shape[1]
    edges = cv2.dilate(cv2.Canny(cv2.GaussianBlur(gray, (5, 5), 0), 30, 90), np.ones((3, 3), np.uint8))
    contours, _ = cv2.findContours(edges, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    ink = cv2.morphologyEx(gray, cv2.MORPH_BLACKHAT, np.ones((7, 7), np.uint8)) > 40  # dark fine strokes
    found: list[tuple[float, Box, float, Corners]] = []
    for contour in contours:
        hull = cv2.convexHull(contour)
        hull_area = cv2.contourArea(hull)
        if not 0.004 * area <= hull_area <= max_share * area:
            continue
        corners = cv2.approxPolyDP(hull, 0.04 * cv2.arcLength(hull, True), True).reshape(-1, 2)
        rect = cv2.minAreaRect(corners.astype(np.float32))
        sides = sorted(rect[1])
        if len(corners) != 4 or sides[0] * sides[1] > 1.3 * hull_area or sides[1] > 2.5 * sides[0]:
            continue  # not a quadrilateral sheet (or a line of print, a bar)
        x, y, w, h = cv2.boundingRect(corners)
        mask = np.zeros_like(gray, np.uint8)
        cv2.fillConvexPoly(
            mask, cv2.boxPoints(((rect[0]), (rect[1][0] * 0.85, rect[1][1] * 0.85), rect[2])).astype(int), 1
        )
        if ink[mask > 0].mean() < 0.02:  # no print inside
            continue
        (x0, y0), (x1, y1) = cv2.boxPoints(rect)[:2]
        angle = float(np.degrees(np.arctan2(y1 - y0, x1 - x0)))
        box = (x, y, x + w, y + h)
        if any(_overlap(box, other) > 0.5 for _a, other, _ang, _c in found):
            continue
        found.append((hull_area, box, angle, _clockwise(corners)))
    found.sort(key=lambda f: -f[0])
    return [(box, angle, corners) for _a, box, angle, corners in found]


def _clockwise(corners: Any) -> Corners:
    """Four corners clockwise on screen (y down), from the one nearest the top-left; 3 px outwards (the sheet's rim)."""
    points = np.asarray(corners, np.float64)
    center = points.mean(axis=0)
    points = points[np.argsort(np.arctan2(points[:, 1] - center[1], points[:, 0] - center[0]))]
    points = np.roll(points, -int(np.argmin(points.sum(axis=1))), axis=0)
    out = center + (points - center) * (1 + 3 / max(1.0, float(np.linalg.norm(points - center, axis=1).min())))
    return tuple((int(round(px)), int(round(py))) for px, py in out)


def text_height(gray: Any) -> float | None:
    """The median height in pixels of the letters in a grey page (connected dark strokes); None without print."""
    import cv2

    ink = (cv2.morphologyEx(gray, cv2.MORPH_BLACKHAT, np.ones((9, 9), np.uint8)) > 30).astype(np.uint8)
    count, _labels, stats, _ = cv2.connectedComponentsWithStats(ink)
    heights = [h for _x, _y, w, h, a in stats[1:count] if 3 <= h <= 60 and w <= 3 * h and a >= 6]
    return float(np.median(heights)) if len(heights) >= 8 else None


def zoom_for(gray: Any, scale: float) -> float:
    """The enlargement that brings the print of ``gray`` (already enlarged ``scale`` times) to ``TEXT_HEIGHT``."""
    height = text_height(gray)
    return 3.5 if height is None else round(float(np.clip(TEXT_HEIGHT * scale / height, 1.5, 6.0)), 2)


def sheet_zoom(image: Any, corners: Corners) -> float:
    """The enlargement for a sheet, measured on the sheet flattened at 2x (8 px print blurs together at 1x)."""
    import cv2

    src = np.float32(corners)
    w = int(np.hypot(*(src[1] - src[0])) * 2)
    h = int(np.hypot(*(src[3] - src[0])) * 2)
    warp = cv2.getPerspectiveTransform(src, np.float32([(0, 0), (w, 0), (w, h), (0, h)]))
    flat = cv2.warpPerspective(np.asarray(image.convert("L")), warp, (max(w, 1), max(h, 1)), flags=cv2.INTER_CUBIC)
    return zoom_for(flat, 2.0)


def repair_plan(name: str, image: Any, max_small: int = 3) -> Plan:
    """What to repair in one image: the whole picture with its light evened out (faint rows on a
    large page), and up to ``max_small`` places of small print: small sheets found by their outline
    (flattened from their four corners), then the densest page-shaped text regions that are neither a
    large page nor part of one (padded, each with its measured deskew angle). Each is enlarged so that
    its measured letters are ``TEXT_HEIGHT`` pixels high."""
    whole = (0, 0, image.width, image.height)
    plan: Plan = [(name, whole, 0.0, "page", 1.0, ())]
    if image.width * image.height <= SMALL_IMAGE:
        return plan + [(name, whole, round(skew_angle(image, whole), 1), "small", _region_zoom(image, whole), ())]
    for box, angle, corners in sheets(image, SMALL_SHARE / 2)[:max_small]:
        plan.append(
            (name, _padded(box, image.size, 8), round(angle % 90, 1), "sheet", sheet_zoom(image, corners), corners)
        )
    regions = text_regions(image, max_regions=12, min_share=0.03)
    small = [
        b
        for b in regions
        if _area(b) <= SMALL_SHARE * image.width * image.height
        and _page_like(b)
        and not any(o != b and _inside(b, o) for o in regions)  # a fragment of a larger page
        and not any(_overlap(b, p[1]) > 0.9 for p in plan[1:])  # on a sheet already planned
    ]
    for box in small[: max(0, max_small + 1 - len(plan))]:  # the densest first
        angle = skew_angle(image, _padded(box, image.size, 12))  # on the text itself, not its neighbours
        pad = 12 + max(box[2] - box[0], box[3] - box[1]) // 5  # a turned page's corners stick out of its text box
        padded = _padded(box, image.size, pad)
        plan.append((name, padded, round(angle, 1), "small", _region_zoom(image, padded), ()))
    return plan


def _region_zoom(image: Any, box: Box) -> float:
    """The enlargement for a text region, measured on it enlarged 2x."""
    region = image.convert("L").crop(box)
    return zoom_for(np.asarray(region.resize((region.width * 2, region.height * 2))), 2.0)


def _overlap(box: Box, other: Box) -> float:
    """The share of ``box`` that lies in ``other``."""
    w = min(box[2], other[2]) - max(box[0], other[0])
    h = min(box[3], other[3]) - max(box[1], other[1])
    return max(0, w) * max(0, h) / max(1, _area(box))


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

"""Figure 6: the image operations a vision-tool call performs, read from its code's syntax tree.

The code of each ``python_image_processing`` call is parsed with ``ast``; every call site of a
known image operation counts once in its category (so one call that crops, then rotates twice,
counts crop 1 and rotation 2: the paper's "multiple operations within a single vision-tool
call"). Names in comments, strings, variable names or imports count nothing. Code that cannot
run is left out: a branch under a constant condition that is false (``if False:``), the
statements after a ``return`` / ``raise`` / ``break`` / ``continue``, and functions that are
defined but never referenced. A branch that depends on data counts as written (static analysis
cannot know which way it goes). Code that does not parse counts nothing.

What counts (``QUALIFIED`` for module functions, resolved through the code's imports, and
``METHODS`` for methods on images or arrays): PIL (``Image``, ``ImageOps``, ``ImageEnhance``,
``ImageDraw`` objects' drawing), OpenCV, NumPy, SciPy ``ndimage`` and scikit-image; plus NumPy
slicing: ``a[y0:y1, x0:x1]`` is a crop, a ``::-1`` step a flip. Opening, saving, mode conversion
and helpers (``getRotationMatrix2D``, filter kernels) are not operations.
"""

from __future__ import annotations

import ast
from collections import Counter
from typing import Iterator

CATEGORIES = ("crop", "resize", "rotation", "flipping", "brightness", "contrast", "editing", "others")

# "module.function" (the last two parts of the resolved dotted name) -> category.
QUALIFIED: dict[str, str] = {
    **dict.fromkeys(("ImageOps.crop",), "crop"),
    **dict.fromkeys(
        (
            "ImageOps.fit",
            "ImageOps.contain",
            "ImageOps.cover",
            "ImageOps.scale",
            "ImageOps.pad",
            "cv2.resize",
            "cv2.pyrUp",
            "cv2.pyrDown",
            "ndimage.zoom",
            "transform.resize",
            "transform.rescale",
        ),
        "resize",
    ),
    **dict.fromkeys(
        (
            "ImageOps.exif_transpose",
            "cv2.rotate",
            "cv2.warpAffine",
            "numpy.rot90",
            "ndimage.rotate",
            "transform.rotate",
        ),
        "rotation",
    ),
    **dict.fromkeys(
        ("ImageOps.mirror", "ImageOps.flip", "cv2.flip", "numpy.flip", "numpy.fliplr", "numpy.flipud"), "flipping"
    ),
    **dict.fromkeys(("ImageEnhance.Brightness", "cv2.convertScaleAbs", "exposure.adjust_gamma"), "brightness"),
    **dict.fromkeys(
        (
            "ImageEnhance.Contrast",
            "ImageOps.autocontrast",
            "ImageOps.equalize",
            "cv2.equalizeHist",
            "cv2.createCLAHE",
            "exposure.equalize_hist",
            "exposure.equalize_adapthist",
            "exposure.rescale_intensity",
        ),
        "contrast",
    ),
    **dict.fromkeys(
        (
            "Image.blend",
            "Image.composite",
            "Image.alpha_composite",
            "cv2.rectangle",
            "cv2.line",
            "cv2.arrowedLine",
            "cv2.circle",
            "cv2.ellipse",
            "cv2.polylines",
            "cv2.fillPoly",
            "cv2.putText",
            "cv2.drawContours",
            "cv2.inpaint",
        ),
        "editing",
    ),
    **dict.fromkeys(
        (
            "ImageEnhance.Sharpness",
            "ImageEnhance.Color",
            "ImageOps.grayscale",
            "ImageOps.invert",
            "ImageOps.posterize",
            "ImageOps.solarize",
            "ImageOps.expand",
            "cv2.GaussianBlur",
            "cv2.medianBlur",
            "cv2.blur",
            "cv2.bilateralFilter",
            "cv2.filter2D",
            "cv2.threshold",
            "cv2.adaptiveThreshold",
            "cv2.Canny",
            "cv2.morphologyEx",
            "cv2.dilate",
            "cv2.erode",
            "cv2.cvtColor",
            "cv2.Sobel",
            "cv2.Laplacian",
            "cv2.warpPerspective",
            "ndimage.gaussian_filter",
            "ndimage.median_filter",
        ),
        "others",
    ),
}
# Methods of images (PIL) or arrays -> category; ``transpose`` depends on its argument.
METHODS: dict[str, str] = {
    "crop": "crop",
    "resize": "resize",
    "thumbnail": "resize",
    "reduce": "resize",
    "rotate": "rotation",
    "paste": "editing",
    "filter": "others",
    "point": "others",
    "quantize": "others",
}
# Methods of an ImageDraw.Draw object: all editing.
DRAW_METHODS = frozenset(
    {"rectangle", "rounded_rectangle", "line", "ellipse", "circle", "polygon", "text", "multiline_text", "arc"}
)


def _imports(tree: ast.AST) -> dict[str, str]:
    """Local name -> the dotted module (or module member) it stands for."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node: ast.AST, imports: dict[str, str]) -> str | None:
    """``np.fliplr`` -> ``numpy.fliplr`` when the chain starts at an imported name; else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in imports:
        return None
    return ".".join([imports[node.id], *reversed(parts)])


def _qualified(dotted: str) -> str:
    return ".".join(dotted.split(".")[-2:])


def _referenced(tree: ast.AST) -> set[str]:
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    return names | {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}


_TERMINAL = (ast.Return, ast.Raise, ast.Break, ast.Continue)


def _live(node: ast.AST, referenced: set[str]) -> Iterator[ast.AST]:
    """The nodes of ``node`` that can run (see the module doc), depth first."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in referenced:
        return
    if isinstance(node, (ast.If, ast.While, ast.IfExp)) and isinstance(node.test, ast.Constant):
        branch = node.body if node.test.value else node.orelse
        for child in branch if isinstance(branch, list) else [branch]:
            yield from _live(child, referenced)
        return
    yield node
    for _, value in ast.iter_fields(node):
        if isinstance(value, ast.AST):
            yield from _live(value, referenced)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, ast.AST):
                    yield from _live(item, referenced)
                    if isinstance(item, _TERMINAL):
                        break  # the rest of this block never runs


def _transpose_category(call: ast.Call) -> str | None:
    """``img.transpose(Image.FLIP_LEFT_RIGHT)`` is a flip, ``ROTATE_90`` / ``TRANSPOSE`` a rotation;
    an array's argument-free ``.transpose()`` is neither."""
    for arg in call.args:
        name = arg.attr if isinstance(arg, ast.Attribute) else arg.id if isinstance(arg, ast.Name) else ""
        if "FLIP" in name:
            return "flipping"
        if "ROTATE" in name or "TRANSPOSE" in name or "TRANSVERSE" in name:
            return "rotation"
    return None


def _draw_objects(tree: ast.AST, imports: dict[str, str]) -> set[str]:
    """Names bound to ``ImageDraw.Draw(...)``."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            dotted = _dotted(node.value.func, imports)
            if dotted and _qualified(dotted) == "ImageDraw.Draw":
                found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return found


def _call_category(call: ast.Call, imports: dict[str, str], draws: set[str]) -> str | None:
    dotted = _dotted(call.func, imports)
    if dotted is not None:
        return QUALIFIED.get(_qualified(dotted))
    if not isinstance(call.func, ast.Attribute):
        return None
    method, receiver = call.func.attr, call.func.value
    is_draw = (isinstance(receiver, ast.Name) and receiver.id in draws) or (
        isinstance(receiver, ast.Call)
        and (d := _dotted(receiver.func, imports)) is not None
        and _qualified(d) == "ImageDraw.Draw"
    )
    if is_draw:
        return "editing" if method in DRAW_METHODS else None
    if method == "transpose":
        return _transpose_category(call)
    return METHODS.get(method)


def _subscript_category(node: ast.Subscript) -> str | None:
    """``a[y0:y1, x0:x1]`` crops an array; a ``::-1`` step flips it."""
    if not isinstance(node.ctx, ast.Load):
        return None
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    slices = [item for item in items if isinstance(item, ast.Slice)]
    if any(isinstance(s.step, ast.UnaryOp) and isinstance(s.step.op, ast.USub) for s in slices):
        return "flipping"
    bounded = [s for s in slices if s.lower is not None or s.upper is not None]
    return "crop" if isinstance(node.slice, ast.Tuple) and len(slices) >= 2 and bounded else None


def operations_in_code(code: str) -> Counter:
    """Category -> number of operation call sites that can run in ``code`` (see the module doc)."""
    counts: Counter = Counter()
    try:
        tree = ast.parse(code)
        imports, referenced = _imports(tree), _referenced(tree)
        draws = _draw_objects(tree, imports)
        for node in _live(tree, referenced):
            if isinstance(node, ast.Call):
                category = _call_category(node, imports, draws)
            elif isinstance(node, ast.Subscript):
                category = _subscript_category(node)
            else:
                continue
            if category:
                counts[category] += 1
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # code nested past any parser: counts nothing
        return Counter()
    return counts

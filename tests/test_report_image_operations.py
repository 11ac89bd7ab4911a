"""Image operations in published numbers (issue 26): counted from what the code does (its AST), not from names in
it, and reported from real vision calls and the OCR baseline through the `vtb` CLI."""

from __future__ import annotations

import json

import pytest

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args
from tests.support.eval_tasks import vtb, write_tasks
from vtb_app.evaluation.records import episode_calls, latest_records

# -- image operations ---------------------------------------------------------------------------------------


def test_image_operations_count_what_the_code_does_not_names_in_it():
    from vtb_app.evaluation.image_ops import operations_in_code

    code = """
import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageOps
img = Image.open("img0.png")  # TODO: crop, resize, rotate, flip, brighten and raise the contrast
note = "rotate and flip if needed"
def unused_helper(image):
    return ImageOps.mirror(image.rotate(90))
if False:
    img = img.transpose(Image.FLIP_LEFT_RIGHT)
rotation_angle, flip = 0, False
arr = np.asarray(img)[10:50, 20:80]
red = arr[:, :, 0]
mirrored = arr[:, ::-1]
ImageDraw.Draw(img).rectangle((1, 2, 3, 4))
img = ImageEnhance.Contrast(img).enhance(2).resize((64, 64))
"""
    assert operations_in_code(code) == {"crop": 1, "flipping": 1, "editing": 1, "contrast": 1, "resize": 1}
    assert operations_in_code("x = 1  # crop resize rotate flip brightness contrast") == {}
    assert operations_in_code("def broken(:\n    img.crop()") == {}
    assert operations_in_code("[" * 5000 + "]" * 5000) == {}


def test_image_operations_in_the_report_from_real_vision_calls(tmp_path):
    data = write_tasks(tmp_path / "data", 1)
    code = (
        "from PIL import Image\n# crop resize rotate flip brightness contrast\nimg = Image.open('img0.png')\n"
        "if False:\n    img = img.rotate(90)\nimg.crop((0, 0, 9, 9)).save('transformed_image_1.png')\n"
    )

    def respond(request):
        if any(m["role"] == "tool" for m in request["messages"]):
            return {"content": "The total is 9."}
        arguments = json.dumps({"code": code})
        call = {"id": "c1", "type": "function", "function": {"name": "python_image_processing", "arguments": arguments}}
        return {"tool_calls": [call]}

    with ChatServer(respond) as agent:
        assert vtb(*eval_args(data, f"openai:m@{agent.base_url}", tmp_path / "run")) == 0
    assert vtb("report", tmp_path / "run", "--out", tmp_path / "report") == 0
    s = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]
    assert s["image_operations"] == {"crop": 1}


@pytest.mark.slow
@pytest.mark.usefixtures("tesseract")
def test_ocr_baseline_samples_and_its_image_operations_through_the_cli(tmp_path):
    """The OCR baseline on the menu tasks with 2 samples: tasks count as tasks, and figure 6 counts
    the operations its vision code performs (per call, each call site once: one crop, one resize, two
    rotations (the deskew and the quarter turns), a median filter, a closing, a dilation, two Gaussian
    blurs (the paper under a shadow band, the paper elsewhere), a perspective warp (a sheet flattened from
    its corners) and a quiet margin), not every operation name in it: the code names no flip and so counts
    none."""
    from tests.support.menu_tasks import write_menu_tasks
    from vtb_env.toolsets import VISION_TOOL

    data = write_menu_tasks(tmp_path / "data", n=2)  # menu-1 is tiny print: read after the vision tool
    assert vtb("eval", "--data", data, "--out", tmp_path / "run", "--samples", 2, "--no-progress") == 0
    assert vtb("report", tmp_path / "run", "--out", tmp_path / "report", "--all-tables") == 0
    s = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]
    assert (s["n"], s["samples"], s["n_episodes"], s["apr"]) == (2, 2, 4, 1.0)
    assert s["apr_std"] == 0.0 and s["pass_at_k"] == s["pass_hat_k"] == {"1": 1.0, "2": 1.0}  # deterministic
    calls = sum(
        1
        for r in latest_records(tmp_path / "run" / "records.jsonl").values()
        for c in episode_calls(r)
        if c["name"] == VISION_TOOL
    )
    assert calls >= 2
    per_call = {"rotation": 2, "others": 7, "crop": 1, "resize": 1}
    assert s["image_operations"] == {name: n * calls for name, n in per_call.items()}

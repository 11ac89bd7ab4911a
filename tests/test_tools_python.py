"""python_image_processing and python_interpreter through the shared sandbox pool."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from PIL import Image

from vtb_env.tools import NamedImage, ToolContext, default_tools


def png(color: str, size=(64, 48)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def tools():
    return default_tools({"tools": ("python_image_processing", "python_interpreter")})


@pytest.fixture
def context():
    return ToolContext(
        task_id="t",
        images=(
            NamedImage("image_1.png", png("red")),
            NamedImage("image_2.png", png("blue")),
            NamedImage("transformed_image_0.png", png("green")),
        ),
        next_image_index=1,
    )


def test_images_come_back_in_index_order_with_overwrites_and_other_files(tools, context):
    code = (
        "from PIL import Image\nimport os\n"
        "red = Image.open('image_1.png')\n"
        "red.crop((0, 0, 10, 10)).save('transformed_image_10.png')\n"
        "Image.open('image_2.png').save(os.path.join(os.getcwd(), 'transformed_image_2.png'), 'PNG')\n"
        "red.save('transformed_image_0.png')\n"  # overwrites an earlier index
        "red.save('extra.jpg')\nopen('notes.txt', 'w').write('x')\n"
        "print(Image.open('transformed_image_0.png').size)"
    )
    result = tools.call("python_image_processing", {"code": code}, context)
    assert result.ok, result.text
    names = [image.name for image in result.images]
    assert names == ["transformed_image_0.png", "transformed_image_2.png", "transformed_image_10.png", "extra.jpg"]
    assert result.images[0].open().getpixel((0, 0)) == (255, 0, 0)  # the overwrite, not the old green
    assert result.images[2].open().size == (10, 10)
    body = json.loads(result.text)
    assert body["stdout"] == "(64, 48)\n" and body["images"] == names


def test_unchanged_inputs_are_not_returned(tools, context):
    result = tools.call(
        "python_image_processing", {"code": "import cv2\nimg = cv2.imread('image_1.png')\nprint(img.shape)"}, context
    )
    assert result.ok and result.images == [] and "no image was saved" in result.text
    assert json.loads(result.text)["stdout"] == "(48, 64, 3)\n"


def test_opencv_and_numpy_saves(tools, context):
    code = "import cv2, numpy as np\ncv2.imwrite('transformed_image_1.png', np.zeros((5, 7, 3), np.uint8))"
    result = tools.call("python_image_processing", {"code": code}, context)
    assert [i.name for i in result.images] == ["transformed_image_1.png"]
    assert np.asarray(result.images[0].open()).shape == (5, 7, 3)


def test_decompression_bomb_output_is_refused_from_its_header_and_no_tool_image_is_decoded_in_the_env(
    tools, monkeypatch
):
    from tests.support.env_tools import exact_reward, hermes, make_task
    from vtb_env import tool_images
    from vtb_env.env import VisualToolBenchEnv

    decoded = []
    real_decode = tool_images.decode_image
    monkeypatch.setattr(tool_images, "decode_image", lambda data: decoded.append(len(data)) or real_decode(data))
    env = VisualToolBenchEnv(tasks=[make_task("a")], tools=tools, reward=exact_reward())
    env.reset(seed=0)
    code = "from PIL import Image\nImage.new('1', (9000, 9000)).save('transformed_image_0.png')"  # 81 Mpx in ~10 KB
    obs, *_ = env.step(hermes("python_image_processing", code=code))
    assert obs["image_names"] == ["image_1.png"] and decoded == []  # refused from the header, never decoded
    assert "transformed_image_0.png was not shown: the images of one call are capped" in obs["messages"][-1]["content"]
    obs, *_ = env.step(
        hermes("python_image_processing", code="from PIL import Image\nImage.new('RGB', (4, 4)).save('x.png')")
    )
    # decoded and checked inside the sandbox call: the env only looks at the container
    assert obs["image_names"] == ["image_1.png", "transformed_image_0.png"] and decoded == []


def test_non_image_bytes_under_an_image_name_are_refused_by_the_env(tools):
    from tests.support.env_tools import exact_reward, hermes, make_task
    from vtb_env.env import VisualToolBenchEnv

    env = VisualToolBenchEnv(tasks=[make_task("a")], tools=tools, reward=exact_reward())
    env.reset(seed=0)
    obs, *_ = env.step(
        hermes("python_image_processing", code="open('transformed_image_0.png', 'w').write('not a png')")
    )
    assert obs["image_names"] == ["image_1.png"]
    assert "transformed_image_0.png was not shown: cannot read the image header" in obs["messages"][-1]["content"]


def test_rendering_the_schema_starts_no_sandbox():
    from tests.support.env_tools import exact_reward, make_task
    from vtb_env.env import VisualToolBenchEnv
    from vtb_env.sandbox import Sandbox
    from vtb_env.tools.base import ToolRegistry
    from vtb_env.tools.python_tools import PythonImageProcessing

    with Sandbox(1) as sandbox:
        env = VisualToolBenchEnv(
            tasks=[make_task("a")], tools=ToolRegistry([PythonImageProcessing(sandbox)]), reward=exact_reward()
        )
        obs, _ = env.reset(seed=0)
        assert "transformed image as PNG to ." in obs["tools"][0]["function"]["description"]
        assert sandbox.started_slots == 0  # reset only renders: the first call starts a server
        env.step('<tool_call>{"name": "python_image_processing", "arguments": {"code": "print(1)"}}</tool_call>')
        assert sandbox.started_slots == 1


def test_code_errors_are_results_with_traceback(tools, context):
    result = tools.call(
        "python_image_processing", {"code": "from PIL import Image\nImage.open('image_9.png')"}, context
    )
    assert not result.ok and "FileNotFoundError" in result.error
    assert "line 2" in json.loads(result.text)["stderr"]


def test_work_dir_holds_only_the_context_images(tools, context):
    result = tools.call("python_image_processing", {"code": "import os; print(sorted(os.listdir('.')))"}, context)
    assert json.loads(result.text)["stdout"] == "['image_1.png', 'image_2.png', 'transformed_image_0.png']\n"


@pytest.mark.parametrize("disable", [(), ("tmpfs",)], ids=["private-tmpfs", "host-disk-work-dir"])
def test_schema_names_the_work_dir_the_code_sees(context, disable):
    from vtb_env.sandbox import Sandbox
    from vtb_env.tools.base import ToolRegistry
    from vtb_env.tools.python_tools import PythonImageProcessing

    with Sandbox(1, disable=disable) as sandbox:
        tools = ToolRegistry([PythonImageProcessing(sandbox)])
        schema = tools.schemas(context)[0]
        save_path = schema["function"]["description"].split("transformed image as PNG to ")[1].split(" ")[0]
        code = f"from PIL import Image\nImage.new('RGB', (3, 3)).save(f'{save_path}/transformed_image_1.png', 'PNG')"
        result = tools.call("python_image_processing", {"code": code}, context)
        assert [image.name for image in result.images] == ["transformed_image_1.png"], result.text
        assert ("tmpfs" in " ".join(sandbox.layers)) == (not disable)  # both kinds of work dir were exercised


def test_empty_and_oversized_code_are_refused(tools, context):
    assert "code" in tools.call("python_image_processing", {"code": ""}, context).error
    assert "code" in tools.call("python_interpreter", {"code": "x" * 5001}, context).error


@pytest.mark.slow
def test_interpreter_has_the_advertised_packages(tools, context):
    code = (
        "import numpy, pandas as pd, scipy.optimize, sympy, sklearn.linear_model, tabulate, bs4\n"
        "print(pd.Series([1, 2, 3]).sum(), sympy.factor('x**2 - 1'), "
        "bs4.BeautifulSoup('<b>hi</b>', 'html.parser').text, tabulate.tabulate([[1]]).count('-') > 0)"
    )
    result = tools.call("python_interpreter", {"code": code}, context)
    assert result.ok, result.text
    assert json.loads(result.text)["stdout"] == "6 (x - 1)*(x + 1) hi True\n"
    assert (
        tools.call("python_interpreter", {"code": "import os; print(os.listdir('.'))"}, context).text.count("image")
        == 0
    )

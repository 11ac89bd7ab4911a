"""The sandbox's limits against the attacks of issue 11 (items 3, 7, 8), on real processes: the memory limit holds
for the whole call, tool output is bounded, slots scale with the cores, and the env caps the pixels a call or an
episode returns. Each test asserts containment AND that the next call works;
``tests/test_sandbox_attacks_isolation.py`` runs this module once more as nobody."""

from __future__ import annotations

import os

import pytest

from tests.support import sandbox_attacks
from tests.support.sandbox_attacks import alive
from vtb_env.sandbox import Limits, Sandbox
from vtb_env.sandbox.pool import default_slot_count

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX only")

# the module-scoped sandbox, shared with the other attack files
sandbox = sandbox_attacks.sandbox


# -- 3. the memory limit holds for the whole call ------------------------------------------------

FIVE_CHILDREN = """
import os
started = []
for _ in range(5):
    try:
        pid = os.fork()
    except OSError as exc:
        print("fork failed:", type(exc).__name__)
        continue
    if pid == 0:
        block = bytearray(200 * 2**20)
        block[::4096] = b"x" * len(block[::4096])
        os._exit(0)
    started.append(pid)
print("children:", len(started))
"""


def test_forked_children_cannot_multiply_the_memory_limit():
    with Sandbox(1, limits=Limits(timeout_s=5.0, memory_mb=256, processes=32)) as sb:
        result = sb.run(FIVE_CHILDREN)
        assert result.exit_code == 0, result.stderr
        assert "children: 0" in result.stdout and result.stdout.count("fork failed: PermissionError") == 5
        for code in (
            "import subprocess; subprocess.run(['true'])",
            "import multiprocessing as mp; mp.Pool(2).map(abs, [1, 2])",
        ):
            assert sb.run(code).exit_code == 1
        threads = sb.run(
            "import threading\nout = []\n"
            "def work():\n    out.append(len(bytearray(40 * 2**20)))\n"
            "ts = [threading.Thread(target=work) for _ in range(4)]\n[t.start() for t in ts]\n[t.join() for t in ts]\n"
            "print(sum(out) // 2**20)"
        )
        assert (threads.exit_code, threads.stdout) == (0, "160\n"), threads.stderr
        hog = sb.run(
            "import threading\nkeep = []\n"
            "def eat():\n    keep.extend(bytearray(50 * 2**20) for _ in range(8))\n"
            "ts = [threading.Thread(target=eat) for _ in range(4)]\n[t.start() for t in ts]\n[t.join() for t in ts]\n"
            "print(len(keep))"
        )
        assert "MemoryError" in hog.stderr and hog.stdout != "32\n"
        alive(sb)


# -- 7. tool output is bounded -----------------------------------------------------------------------


def test_skipped_files_list_is_capped(sandbox):
    code = "import os\nfor i in range(1500):\n    os.mkdir(f'{i:04d}_' + 'x' * 200)"  # directories: never collected
    result = sandbox.run(code, collect_files=True, timeout_s=30)
    assert result.exit_code == 0, result.stderr
    assert len(result.skipped_files) == 17 and result.skipped_files[-1] == "... and 1484 more files skipped"
    assert sum(len(entry) for entry in result.skipped_files) < 4000
    alive(sandbox)


# -- 8. slots scale with the cores ------------------------------------------------------------------------


def test_default_pool_uses_every_usable_core(monkeypatch):
    assert Sandbox().slots == len(os.sched_getaffinity(0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert default_slot_count() == 16 and Sandbox().slots == 16  # no cap at 8 (slots start lazily)


def test_pixels_one_call_returns_are_capped_by_the_env(sandbox, monkeypatch):
    from tests.support.env_tools import exact_reward, hermes, make_task
    from vtb_env import env as env_module
    from vtb_env import tool_images
    from vtb_env.tools import python_tools
    from vtb_env.tools.base import ToolRegistry

    monkeypatch.setattr(tool_images, "MAX_TOOL_PIXELS_PER_CALL", 3 * 400 * 300)
    tool = python_tools.PythonImageProcessing(sandbox)
    env = env_module.VisualToolBenchEnv(tasks=[make_task("a")], tools=ToolRegistry([tool]), reward=exact_reward())
    env.reset(seed=0)
    code = (
        "from PIL import Image\nfor i in range(4):\n"
        "    Image.new('RGB', (400, 300), (i, 0, 0)).save(f'transformed_image_{i}.png')"
    )
    obs, *_ = env.step(hermes("python_image_processing", code=code))
    assert obs["image_names"][1:] == [f"transformed_image_{i}.png" for i in range(3)]
    refused = "transformed_image_3.png was not shown: the images of one call are capped"
    assert refused in obs["messages"][-2]["content"]
    code = code.replace("range(4)", "range(3, 7)")  # the next call writes new files: the budget is per call
    obs, *_ = env.step(hermes("python_image_processing", code=code))
    assert obs["image_names"][1:] == [f"transformed_image_{i}.png" for i in range(6)]
    alive(sandbox)


def test_tool_pixels_per_episode_are_capped_and_kept_encoded(monkeypatch):
    from tests.support.env_tools import ImageMakerTool, exact_reward, hermes, make_task
    from vtb_env import env as env_module
    from vtb_env import tool_images
    from vtb_env.tools.base import ToolRegistry

    monkeypatch.setattr(tool_images, "MAX_TOOL_PIXELS_PER_EPISODE", 3 * 32 * 24)
    env = env_module.VisualToolBenchEnv(
        tasks=[make_task("a")], tools=ToolRegistry([ImageMakerTool()]), reward=exact_reward()
    )
    env.reset(seed=0)
    obs, *_ = env.step(hermes("python_image_processing", code="save save"))
    assert obs["image_names"][1:] == ["transformed_image_0.png", "transformed_image_1.png"]
    assert all(image.tile for image in obs["images"][1:])  # pending tiles: not decoded until someone reads pixels
    obs, *_ = env.step(hermes("python_image_processing", code="save save"))
    assert obs["image_names"][1:] == ["transformed_image_0.png", "transformed_image_1.png", "transformed_image_2.png"]
    assert f"capped at {3 * 32 * 24} pixels" in obs["messages"][-2]["content"]
    assert obs["images"][-1].convert("RGB").size == (32, 24)

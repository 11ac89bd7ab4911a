"""verifiers 0.4 (``verifiers.v1``): the taskset id ``vtb-gym``, found by verifiers' own loader and run by ``vf-eval``.

``vf-eval vtb-gym`` runs as a user would run it (a subprocess, its own CLI, the ``null`` chat
harness on the subprocess runtime, its interception proxy) against a local OpenAI-compatible
server (tests/support/chat_server.py, real HTTP on 127.0.0.1) playing a scripted policy: in
each user turn that asks a question it crops ``image_1.png`` once with python_image_processing
(the real sandbox), then answers "The answer is 42.".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers.v1", reason="verifiers>=0.4 is installed by the project's setup (docs/training.md)")

from tests.support.chat_server import ChatServer  # noqa: E402
from tests.support.env_tools import value_task  # noqa: E402
from vtb_env.loaders import save_tasks  # noqa: E402

CROP = "from PIL import Image\nImage.open('image_1.png').crop((0, 0, 20, 10)).save('transformed_image_{i}.png')"


def _policy(request: dict) -> dict:
    """One crop after each user message that asks a question, then the answer."""
    texts = [json.dumps(m.get("content")) for m in request["messages"]]
    last_question = max(i for i, text in enumerate(texts) if "Question" in text)
    crops = sum("tool result python_image_processing" in text for text in texts)
    if not any("tool result" in text for text in texts[last_question:]):
        call = {"name": "python_image_processing", "arguments": {"code": CROP.format(i=crops)}}
        return {"content": f"I will zoom in.\n<tool_call>{json.dumps(call)}</tool_call>"}
    return {"content": "The answer is 42."}


def test_verifiers_loader_finds_the_vtb_gym_taskset_and_env():
    from verifiers.v1.utils.loaders import environment_class, taskset_class

    from vtb_app.integrations.verifiers_env import VTBEnv, VTBTaskset, VTBTasksetConfig

    assert taskset_class("vtb-gym") is VTBTaskset and environment_class("vtb-gym") is VTBEnv
    tasks = list(VTBTaskset(VTBTasksetConfig(id="vtb-gym", tasks="synth:4:0")))
    assert [t.data.idx for t in tasks] == [0, 1, 2, 3] and len({t.key for t in tasks}) == 4


@pytest.mark.slow  # vf-eval's start-up and one chat-program process per turn: ~40 s
def test_vf_eval_plays_multi_turn_episodes_with_tool_images_and_the_env_reward(tmp_path: Path):
    if shutil.which("uv", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("verifiers' null harness runs its chat program with uv: pip install uv (scripts/setup.sh does)")
    tasks_dir = tmp_path / "tasks"
    save_tasks([value_task("right", 42, turns=2), value_task("wrong", 7, turns=1)], tasks_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VTB_JUDGE")}  # exact rubric checks only
    env |= {"VTB_TEST_CHAT_KEY": "test", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    with ChatServer(_policy) as server:
        done = subprocess.run(
            [
                str(Path(sys.executable).parent / "vf-eval"),
                "vtb-gym",
                "-m",
                "test-model",
                "--client.base-url",
                server.base_url,
                "--client.api-key-var",
                "VTB_TEST_CHAT_KEY",
                "--no-push",
                "-o",
                str(tmp_path / "out"),
                "--env.taskset.tasks",
                str(tasks_dir),
                "--env.taskset.max-tool-calls",
                "3",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (traces_file,) = (tmp_path / "out").glob("*/traces.jsonl")
    traces = {}
    for line in traces_file.read_text().splitlines():
        (trace,) = json.loads(line)["traces"]
        assert not trace["errors"], trace["errors"]
        traces[trace["task"]["data"]["task_id"]] = trace
    right, wrong = traces["right"], traces["wrong"]
    assert right["metrics"]["vtb_rubric_score"] == 1.0 and wrong["metrics"]["vtb_rubric_score"] == 0.0
    assert right["rewards"]["vtb_reward"]["score"] > wrong["rewards"]["vtb_reward"]["score"]
    assert right["metrics"]["vtb_tool_success"] == 1.0
    # what the model was sent: the task image and the sandbox's crop as data URLs, the second turn after the answer
    requests = [json.dumps(r["messages"]) for r in server.requests]
    assert all("data:image/png;base64," in r for r in requests)
    assert any("transformed_image_0.png" in r and r.count("data:image/png;base64,") >= 2 for r in requests)
    assert any("Question 2" in r for r in requests)
    assert len(server.requests) == 3 * 2  # per question: the call, then the answer

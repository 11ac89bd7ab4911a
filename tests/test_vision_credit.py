"""Vision credit for visual work (issue 31, item 3): a vision call counts only when the sandbox saw it read an
input image and return something of its own; a call that never ran is no call (item 4).

Real sandbox processes: the fork server records reads from the kernel (inotify), the checking child
compares the returned pixels with the inputs. Model code tries to fake the record every way it can reach.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest
from PIL import Image

from tests.support.env_tools import exact_reward, hermes, make_task
from vtb_env.completion import record_from_completion
from vtb_env.env import VisualToolBenchEnv
from vtb_env.sandbox import Sandbox
from vtb_env.sandbox.isolation import OPTIONAL_LAYERS
from vtb_env.tools.base import ToolRegistry
from vtb_env.tools.python_tools import RETURNED_IMAGES, PythonImageProcessing
from vtb_env.trajectory import EpisodeRecord, StepRecord, ToolCallRecord, TurnRecord
from vtb_rewards.compose import EpisodeReward
from vtb_rewards.grpo import make_trl_reward_func


def _png(color=(200, 30, 30), size=(40, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


INPUTS = {"image_1.png": _png(), "transformed_image_0.png": _png((0, 90, 0))}

READS = {  # code -> the inputs the kernel saw it read
    "pass": [],
    "raise RuntimeError('before any image')": [],
    "import os\nos.stat('image_1.png'); os.listdir('.'); os.utime('image_1.png')": [],
    "open('image_1.png', 'rb').close()": [],  # opened, never read
    "open('image_1.png', 'wb').write(b'not read')": [],  # overwritten, never read
    "import os\nos.rename('image_1.png', 'x.png')": [],
    "print(open('image_1.png', 'rb').read(1))": ["image_1.png"],
    "from PIL import Image\nImage.open('transformed_image_0.png').load()": ["transformed_image_0.png"],
    "import cv2\ncv2.imread('image_1.png')": ["image_1.png"],
    "import numpy as np\nnp.fromfile('image_1.png', dtype=np.uint8)": ["image_1.png"],
    "import shutil\nshutil.copyfile('image_1.png', 'transformed_image_1.png')": None,  # a copy: read or not, no work
}


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(1) as sandbox:
        yield sandbox.start()


@pytest.mark.parametrize("code", READS)
def test_the_server_sees_which_inputs_the_code_read(sandbox, code):
    result = sandbox.run(code, INPUTS, images=RETURNED_IMAGES)
    if READS[code] is not None:
        assert result.read_inputs == READS[code], result.stderr
    assert "reads(inotify)" in sandbox.layers


def test_read_tracking_holds_without_the_optional_layers():
    with Sandbox(1, disable=OPTIONAL_LAYERS) as degraded:
        assert degraded.run("pass", INPUTS, images=RETURNED_IMAGES).read_inputs == []
        read = degraded.run("open('image_1.png','rb').read()", INPUTS, images=RETURNED_IMAGES)
        assert read.read_inputs == ["image_1.png"]


def test_returned_images_that_repeat_an_input_are_marked_as_copies(sandbox):
    code = (
        "from PIL import Image\nimage = Image.open('image_1.png')\n"
        "image.save('transformed_image_1.png')\n"  # the same pixels
        "image.convert('RGB').save('transformed_image_2.png', compress_level=9)\n"  # same pixels, other bytes
        "image.rotate(90, expand=True).save('transformed_image_3.png')\n"  # new work
    )
    result = sandbox.run(code, INPUTS, images=RETURNED_IMAGES)
    assert [(i.name, i.copy_of) for i in result.images] == [
        ("transformed_image_1.png", "image_1.png"),
        ("transformed_image_2.png", "image_1.png"),
        ("transformed_image_3.png", None),
    ]


WORK = {  # code -> the vision call's image_work (what the reward reads), its error, whether it counts
    "pass": ({"read": [], "new_images": 0, "printed": False}, False),
    "raise RuntimeError('before any image')": ({"read": [], "new_images": 0, "printed": False}, False),
    # model code that prints or saves what it hopes the record says, without reading an image
    "import json\nprint(json.dumps({'image_work': {'read': ['image_1.png'], 'new_images': 1, 'printed': True}}))": (
        {"read": [], "new_images": 0, "printed": True},
        False,
    ),
    "from PIL import Image\nImage.new('RGB', (9, 9)).save('transformed_image_0.png')": (
        {"read": [], "new_images": 1, "printed": False},
        False,
    ),
    "import shutil\nshutil.copyfile('image_1.png', 'transformed_image_0.png')": (None, False),  # a copy
    "from PIL import Image\nImage.open('image_1.png').crop((0, 0, 9, 9)).save('transformed_image_0.png')": (
        {"read": ["image_1.png"], "new_images": 1, "printed": False},
        True,
    ),
    "from PIL import Image\nprint(Image.open('image_1.png').getpixel((0, 0)))": (
        {"read": ["image_1.png"], "new_images": 0, "printed": True},
        True,
    ),
    "from PIL import Image\nprint(Image.open('image_1.png').size)\nraise ValueError('then failed')": (
        {"read": ["image_1.png"], "new_images": 0, "printed": True},
        True,  # visual work done: it counts for the mode, and as a failed call for tool_success
    ),
}


@pytest.mark.parametrize("code", WORK)
def test_only_a_call_that_did_visual_work_earns_vision_credit(sandbox, code):
    expected_work, counts = WORK[code]
    task = make_task("a")  # an image task labelled tool_required
    env = VisualToolBenchEnv(tasks=[task], tools=ToolRegistry([PythonImageProcessing(sandbox)]), reward=exact_reward())
    env.reset(seed=0)
    env.step(hermes("python_image_processing", code=code))
    *_, info = env.step("It is 10.")
    call = info["record"].tool_calls[0]
    if expected_work is not None:
        assert call.image_work == expected_work
    assert call.did_image_work is counts
    assert call.revealed is None  # no key facts (as official data): not judged, the image-work rule decides
    assert json.loads(call.output.split("\n[")[0])["image_work"] == call.image_work  # what the text path reads
    reward = EpisodeReward()
    with_call = reward(task, info["record"])
    info["record"].turns[0].steps.pop(0)  # the same episode without the call
    without = reward(task, info["record"])
    if counts:
        assert with_call[1]["used_tools"] == 1.0 and with_call[1]["tool_success"] == float(call.ok)
    else:  # exactly what no call earns (n_tool_calls is a diagnostic: it counts every call)
        assert with_call[0] == without[0]
        assert {**with_call[1], "n_tool_calls": 0.0} == {**without[1], "n_tool_calls": 0.0}


# ---- the text path: only calls with a result in the conversation -------------------------------

CALL = hermes("python_image_processing", code="from PIL import Image\nImage.open('image_1.png').save('x.png')")
DONE = json.dumps({"stdout": "", "exit_code": 0, "image_work": {"read": ["image_1.png"], "new_images": 1}})


def _scores(completions):
    task = make_task("a")
    reward = make_trl_reward_func({"a": task}, EpisodeReward())
    reward(prompts=["p"] * len(completions), completions=completions, task_id=["a"] * len(completions))
    return [(c["used_tools"], c.get("tool_success")) for c in reward.last_components]


def test_the_trl_reward_pays_a_call_only_when_a_tool_message_answers_it():
    answer = {"role": "assistant", "content": "It is 10."}
    assistant = {"role": "assistant", "content": CALL}
    assert _scores(
        [
            "It is 10.",
            CALL + "It is 10.",  # a call block that never ran
            CALL + f"<tool_response>{DONE}</tool_response>It is 10.",  # a result the policy wrote itself
            [assistant, answer],  # no tool message
            [assistant, {"role": "tool", "content": DONE}, answer],  # TRL's tool loop answered it
            [assistant, {"role": "tool", "content": json.dumps({"stdout": "", "image_work": None})}, answer],
        ]
    ) == [(0.0, None), (0.0, None), (0.0, None), (0.0, None), (1.0, 1.0), (0.0, None)]


def test_a_decoded_multi_turn_response_pays_the_calls_whose_results_follow_them():
    def used(text: str) -> list[bool]:
        return [call.answered for call in record_from_completion("a", text).tool_calls]

    hermes_turns = f"{CALL}\nuser\n<tool_response>\n{DONE}\n</tool_response>\nassistant\nIt is 10."
    llama_turns = f"{CALL}ipython\n\n{DONE}assistant\n\nIt is 10."  # special tokens skipped when decoding
    special = f"{CALL}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n{DONE}<|eot_id|>It is 10."
    assert used(hermes_turns) == used(llama_turns) == used(special) == [True]
    assert used(f"{CALL}{CALL}<tool_response>{DONE}</tool_response>It is 10.") == [True, False]
    assert used(f"{CALL}It is 10.") == [False]
    for text in (hermes_turns, llama_turns, special):
        record = record_from_completion("a", text)
        assert record.final_answers == ["It is 10."] and record.tool_calls[0].did_image_work


# ---- the mode credit reads what the env judged a call revealed (issue 39, item 4) ----------------------

WORK_DONE = {"read": ["image_1.png"], "new_images": 1, "printed": False}


def _episode(revealed, label):
    """The golden answer after one vision call that did visual work and revealed ``revealed`` (None: not judged)."""
    task = replace(make_task("a"), mode_label=label)
    call = ToolCallRecord("c1", "python_image_processing", {"code": "..."}, image_work=WORK_DONE, revealed=revealed)
    steps = [StepRecord("call", tool_calls=[call]), StepRecord("It is 10.", final_answer="It is 10.")]
    record = EpisodeRecord("a", [TurnRecord(0, steps, final_answer="It is 10.")], {"images": ["image_1.png"]})
    return task, record


@pytest.mark.parametrize(
    "revealed, label, mode, paid",
    [
        (["8.4"], "tool_required", 1.0, True),  # TP: the call showed a hidden fact
        ([], "tool_required", 0.0, False),  # judged, revealed nothing: FN, exactly what no call earns
        (None, "tool_required", 1.0, True),  # not judged (official data): the image-work rule
        ([], "tool_redundant", 0.0, False),  # a pointless call where no tool is needed is still FP
        (["8.4"], "tool_redundant", 0.0, True),
    ],
)
def test_the_mode_credit_needs_a_judged_reveal_on_a_tool_required_task(revealed, label, mode, paid):
    task, record = _episode(revealed, label)
    reward = EpisodeReward()
    total, components = reward(task, record)
    assert components["mode"] == mode and components["credited_tools"] == float(paid)
    assert ("tool_success" in components) is paid  # a call that earned nothing earns no tool_success either
    assert components["used_tools"] == 1.0  # the call is still a use of tools (the report's MCC, FP)
    without = _episode(revealed, label)[1]
    without.turns[0].steps.pop(0)
    if not paid and label == "tool_required":
        assert total == reward(task, without)[0]
    flipped = "tool_redundant" if label == "tool_required" else "tool_required"
    relabelled = reward.relabel(components, flipped)[1]["mode"]
    assert relabelled == EpisodeReward(mode_labels={"a": flipped})(task, record)[1]["mode"]


def test_mode_credit_image_work_pays_a_call_that_did_visual_work_whatever_it_revealed():
    """``RewardConfig(mode_credit="image_work")``: the rule for a policy whose call is one fixed action (the
    learning check's zoom); a judged call that revealed nothing is TP there, and FN under the default."""
    from vtb_rewards.compose import RewardConfig

    task, record = _episode([], "tool_required")
    assert EpisodeReward()(task, record)[1]["mode"] == 0.0
    components = EpisodeReward(config=RewardConfig(mode_credit="image_work"))(task, record)[1]
    assert components["mode"] == 1.0 and components["credited_tools"] == 1.0
    with pytest.raises(ValueError, match="mode_credit"):
        RewardConfig(mode_credit="gesture")

"""SkyRL: ``vtb_gym`` registered with skyrl-gym 0.4 and stepped through ``skyrl_gym.make`` as SkyRL's generators do.

The calls follow ``SkyRLVLMGymGenerator.agent_loop`` (skyrl 0.3): ``make(env_class,
env_config=..., extras=row | {"max_turns": ...})``, ``init(prompt)``, then ``step(generated_text)``
until ``done``, the generator appending the assistant text and the observations to its
conversation; ``get_metrics()`` and ``close()`` at the end. Real sandboxed crops.
"""

from __future__ import annotations

import base64
import io

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym", reason="skyrl-gym is the `skyrl` extra (docs/training.md)")

from PIL import Image  # noqa: E402

from tests.support.env_tools import hermes, value_task  # noqa: E402
from vtb_app.integrations import skyrl  # noqa: E402 -- registers vtb_gym and vtb-gym
from vtb_env.loaders import save_tasks  # noqa: E402

CROP = "from PIL import Image\nImage.open('image_1.png').crop((0, 0, 20, 10)).save('transformed_image_{i}.png')"


pytestmark = pytest.mark.usefixtures("exact_rubric_checks_only")


@pytest.fixture(scope="module")
def env_config(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tasks")
    save_tasks([value_task("right", 42, turns=2), value_task("wrong", 7, turns=1)], folder)
    return {"tasks": str(folder), "tools": "python_image_processing,calculator", "max_tool_calls": 3}


def _image_urls(messages: list[dict]) -> list[str]:
    return [
        part["image_url"]["url"]
        for m in messages
        if isinstance(m["content"], list)
        for part in m["content"]
        if part["type"] == "image_url"
    ]


def _play(env_config: dict, task_id: str, replies, max_turns: int = 10, env_id: str = "vtb_gym"):
    env = skyrl_gym.make(env_id, env_config=env_config, extras={"task_id": task_id, "max_turns": max_turns})
    conversation, _ = env.init([{"role": "user", "content": "(dataset prompt)"}])
    outputs = []
    for reply in replies:
        output = env.step(reply)
        outputs.append(output)
        conversation.append({"role": "assistant", "content": reply})
        if output["done"]:
            break
        conversation.extend(output["observations"])
    metrics = env.get_metrics()
    env.close()
    return conversation, outputs, metrics


def test_skyrl_make_plays_a_multi_turn_episode_with_tool_images_as_data_urls(env_config):
    crop = [hermes("python_image_processing", code=CROP.format(i=i)) for i in range(2)]
    conversation, outputs, metrics = _play(
        env_config, "right", [crop[0], "The answer is 42.", crop[1], "The answer is 42."]
    )
    assert [o["done"] for o in outputs] == [False, False, False, True]
    assert [o["reward"] for o in outputs[:3]] == [0.0, 0.0, 0.0] and outputs[-1]["reward"] > 0
    assert metrics["rubric_score"] == 1.0 and metrics["tool_success"] == 1.0
    # the task images and the two crops, as the OpenAI image parts SkyRL's VLM generator renders
    urls = _image_urls(conversation)
    assert len(urls) == 4 and all(u.startswith("data:image/png;base64,") for u in urls)
    crop_image = Image.open(io.BytesIO(base64.b64decode(urls[1].split(",", 1)[1])))
    assert crop_image.size == (20, 10)
    first_tool_output = outputs[0]["observations"]
    assert first_tool_output[0]["role"] == "tool" and first_tool_output[-1]["role"] == "user"
    assert "Question 2" in str(outputs[1]["observations"])  # the task's next turn arrives after the answer


def test_skyrl_max_turns_truncates_and_scores_and_bad_rows_get_clear_errors(env_config):
    crop = hermes("python_image_processing", code=CROP.format(i=0))
    _, outputs, metrics = _play(env_config, "wrong", [crop, crop, crop], max_turns=2, env_id="vtb-gym")  # the alias
    assert len(outputs) == 2 and outputs[-1]["done"] and metrics["rubric_score"] == 0.0
    with pytest.raises(ValueError, match="task_id"):
        skyrl_gym.make("vtb_gym", env_config=env_config, extras={"max_turns": 2})
    skyrl.register()  # idempotent
    for env_id in ("vtb_gym", "vtb-gym"):
        assert skyrl_gym.spec(env_id).entry_point == "vtb_app.integrations.skyrl:VTBSkyRLEnv"


def test_skyrl_env_without_tasks_refuses_instead_of_playing_the_demo_set(env_config):
    # what SkyRL's generators pass for an env with no config: getattr(cfg.environment.skyrl_gym, env_class, {})
    with pytest.raises(ValueError, match=r"no tasks configured: set environment\.skyrl_gym\.vtb_gym\.tasks"):
        skyrl_gym.make("vtb_gym", env_config={}, extras={"task_id": "right", "max_turns": 2})
    with pytest.raises(ValueError, match=r"unknown env_config fields \['task'\]"):
        skyrl_gym.make("vtb_gym", env_config={"task": env_config["tasks"]}, extras={"task_id": "right"})
    # the row's extras carry the settings (here all of them) when the trainer's config cannot
    row = {"task_id": "right", "max_turns": 4, **env_config, "max_tool_calls": 1}
    env = skyrl_gym.make("vtb_gym", env_config={"tasks": "demo", "max_tool_calls": 3}, extras=row)
    env.init([])
    output = env.step(hermes("python_image_processing", code=CROP.format(i=0)))
    env.close()
    assert env.env.config.max_tool_calls == 1 and _image_urls(output["observations"])  # the crop came back

"""SkyRL's trainer config (skyrl 0.3 on Python 3.12: scripts/test_py312.sh) configures ``vtb_gym`` with its own classes.

``VTBSkyRLTrainConfig`` is built by SkyRL's ``from_cli_overrides`` from ``key.path=value`` overrides;
the env is then made with the lookup SkyRL's generators use
(``getattr(cfg.environment.skyrl_gym, env_class, {})``) and played with real sandboxed crops.
SkyRL's own ``main_base`` dispatches ``trainer.override_entrypoint`` to ``vtb_app.integrations.skyrl_train``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("skyrl.train.config", reason="skyrl 0.3 (Python >= 3.12): scripts/test_py312.sh")

import skyrl_gym  # noqa: E402
from skyrl.train.config import SkyRLTrainConfig  # noqa: E402

from tests.support.env_tools import hermes, value_task  # noqa: E402
from vtb_app.integrations.skyrl import VTBGymEnvConfig  # noqa: E402
from vtb_app.integrations.skyrl_train import VTBSkyRLTrainConfig, parse_config  # noqa: E402
from vtb_env.loaders import save_tasks  # noqa: E402

CROP = "from PIL import Image\nImage.open('image_1.png').crop((0, 0, 20, 10)).save('transformed_image_0.png')"
ENTRYPOINT = "trainer.override_entrypoint=vtb_app.integrations.skyrl_train"


pytestmark = pytest.mark.usefixtures("exact_rubric_checks_only")


@pytest.fixture(scope="module")
def tasks_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tasks")
    save_tasks([value_task("right", 42, turns=1)], folder)
    return str(folder)


def _make_env_as_the_generator_does(config: SkyRLTrainConfig, row: dict):
    env_class = config.environment.env_class
    env_config = getattr(config.environment.skyrl_gym, env_class, dict())  # SkyRLVLMGymGenerator.agent_loop
    return skyrl_gym.make(env_class, env_config=env_config, extras={**row, "max_turns": config.generator.max_turns})


def test_skyrl_typed_config_carries_the_env_settings_to_an_episode(tasks_folder):
    config = parse_config(
        [
            ENTRYPOINT,
            "environment.env_class=vtb-gym",  # the alias reads as the id
            f"environment.skyrl_gym.vtb_gym.tasks={tasks_folder}",
            "environment.skyrl_gym.vtb_gym.tools=python_image_processing,calculator",
            "environment.skyrl_gym.vtb_gym.max_tool_calls=3",
            "generator.max_turns=4",
        ]
    )
    assert isinstance(config, VTBSkyRLTrainConfig) and config.environment.env_class == "vtb_gym"
    assert config.environment.skyrl_gym.vtb_gym == VTBGymEnvConfig(
        tasks=tasks_folder, tools="python_image_processing,calculator", max_tool_calls=3
    )
    env = _make_env_as_the_generator_does(config, {"task_id": "right"})
    conversation, _ = env.init([])
    assert set(env.env.tools.names) == {"python_image_processing", "calculator"}
    first = env.step(hermes("python_image_processing", code=CROP))
    last = env.step("The answer is 42.")
    env.close()
    assert not first["done"] and "image_url" in str(first["observations"])
    assert last["done"] and last["reward"] > 0 and env.get_metrics()["rubric_score"] == 1.0


def test_skyrl_base_config_refuses_the_settings_and_the_env_refuses_no_settings(tasks_folder):
    with pytest.raises(ValueError, match="Invalid fields {'vtb_gym'}"):
        SkyRLTrainConfig.from_cli_overrides([f"environment.skyrl_gym.vtb_gym.tasks={tasks_folder}"])
    base = SkyRLTrainConfig.from_cli_overrides(["environment.env_class=vtb_gym"])  # no override entry point
    with pytest.raises(ValueError, match="no tasks configured"):
        _make_env_as_the_generator_does(base, {"task_id": "right"})
    with pytest.raises(ValueError, match="no tasks configured"):
        parse_config([ENTRYPOINT])  # checked before Ray starts


def test_skyrl_main_base_dispatches_to_the_vtb_entry_point_which_fails_fast_on_a_bad_source(tmp_path):
    missing = tmp_path / "no-such-tasks"
    run = subprocess.run(
        [sys.executable, "-m", "skyrl.train.entrypoints.main_base", ENTRYPOINT]
        + [f"environment.skyrl_gym.vtb_gym.tasks={missing}"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert str(missing) in last and "Error" in last, run.stderr[-2000:]
    assert "vtb_app/integrations/skyrl_train.py" in run.stderr  # SkyRL's main_base called our main

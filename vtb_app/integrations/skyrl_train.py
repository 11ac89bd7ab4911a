"""SkyRL's trainer (skyrl 0.3) on ``vtb_gym``: its typed config with a ``vtb_gym`` field, and its PPO entry point.

SkyRL's config is a tree of dataclasses that refuses unknown fields (``environment.skyrl_gym.vtb-gym.tasks=...``
fails with ``Invalid fields``); its documented extension is a subclass, reached through
``trainer.override_entrypoint``::

    python -m skyrl.train.entrypoints.main_base trainer.override_entrypoint=vtb_app.integrations.skyrl_train \\
        environment.skyrl_gym.vtb_gym.tasks=synth:4096:0 environment.skyrl_gym.vtb_gym.max_tool_calls=5 \\
        generator.vision_language_generator=true data.train_data=[rows.parquet] ...

(``python -m vtb_app.integrations.skyrl_train ...`` is the same.) ``environment.env_class`` defaults to
``vtb_gym``; each dataset row carries ``task_id`` (and may override the env's fields, see
``vtb_app.integrations.skyrl``). ``main`` loads the configured tasks before starting Ray, so a bad
source fails in seconds with one clear error. Needs Python >= 3.12 (skyrl 0.3's config does not build on 3.11).
"""

import dataclasses  # no `from __future__ import annotations`: SkyRL's config builder reads the fields' real types
import sys

import ray
from skyrl.train.config import EnvironmentConfig, SkyRLGymConfig, SkyRLTrainConfig
from skyrl.train.entrypoints.main_base import BasePPOExp
from skyrl.train.utils.utils import initialize_ray, validate_cfg

from vtb_app.integrations.shared import shared_tasks
from vtb_app.integrations.skyrl import ENV_ALIASES, ENV_ID, VTBGymEnvConfig, env_settings

OVERRIDE_ENTRYPOINT = "trainer.override_entrypoint="


@dataclasses.dataclass
class VTBSkyRLGymConfig(SkyRLGymConfig):
    vtb_gym: VTBGymEnvConfig = dataclasses.field(default_factory=VTBGymEnvConfig)


@dataclasses.dataclass
class VTBEnvironmentConfig(EnvironmentConfig):
    env_class: str = ENV_ID
    skyrl_gym: VTBSkyRLGymConfig = dataclasses.field(default_factory=VTBSkyRLGymConfig)


@dataclasses.dataclass
class VTBSkyRLTrainConfig(SkyRLTrainConfig):
    environment: VTBEnvironmentConfig = dataclasses.field(default_factory=VTBEnvironmentConfig)


def parse_config(args: list[str]) -> VTBSkyRLTrainConfig:
    """SkyRL's ``key.path=value`` overrides on the extended config (``trainer.override_entrypoint`` is dropped)."""
    config = VTBSkyRLTrainConfig.from_cli_overrides([a for a in args if not a.startswith(OVERRIDE_ENTRYPOINT)])
    if config.environment.env_class in ENV_ALIASES:
        config.environment.env_class = ENV_ID
    if config.environment.env_class == ENV_ID:
        shared_tasks(env_settings(config.environment.skyrl_gym.vtb_gym, {}).tasks)  # fail before Ray starts
    return config


@ray.remote(num_cpus=1)
def _run(config: VTBSkyRLTrainConfig) -> None:
    # a Ray worker imports this module to run this function, which registers vtb_gym there
    BasePPOExp(config).run()


def main(argv: list[str] | None = None) -> None:
    """SkyRL's PPO run (``main_base.main``'s steps) with the extended config."""
    config = parse_config(sys.argv[1:] if argv is None else argv)
    validate_cfg(config)
    initialize_ray(config)
    ray.get(_run.remote(config))


if __name__ == "__main__":
    main()

"""The install: the wheel's import names are the project's own; the env core finds its default reward."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from vtb_env import reward as env_reward
from vtb_rewards.compose import EpisodeReward

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]
IMPORT_NAMES = {
    "vtb_env": "vtb_env",
    "vtb_app": "vtb_app",
    "agents": "vtb_agents",
    "rewards": "vtb_rewards",
    "vtb_gym": "vtb_gym",
}


def _package_folders() -> set[str]:
    """Every package folder of the repository, as the import name it installs under."""
    names = set()
    for folder, import_name in IMPORT_NAMES.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder).parts
            names.add(".".join((import_name, *relative)))
    return names


def test_pyproject_lists_every_package_folder_under_its_import_name():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert set(config["packages"]) == _package_folders()
    assert config["package-dir"] == {"": ".", "vtb_agents": "agents", "vtb_rewards": "rewards"}


def test_the_wheel_installs_only_the_projects_own_top_level_names(tmp_path):
    source = tmp_path / "source"  # setuptools builds in the source tree: a copy keeps the checkout clean
    skip = shutil.ignore_patterns(".*", "build", "runs", "*.egg-info", "__pycache__")
    shutil.copytree(ROOT, source, ignore=skip)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            str(source),
            "-w",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    # vtb_gym is deliberate: verifiers 0.4 imports the taskset id `vtb-gym` as this module (one file, re-exports)
    assert top_level == {"vtb_env", "vtb_app", "vtb_agents", "vtb_rewards", "vtb_gym"}
    assert [n for n in names if n.startswith("vtb_gym/")] == ["vtb_gym/__init__.py"]
    assert "vtb_rewards/judge/judge.py" in names and "vtb_agents/rollout.py" in names
    assert "vtb_env/data/demo/tasks.jsonl" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "vtb_rewards.compose:default_reward" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_env_gets_the_rewards_layers_default_through_the_entry_point():
    assert isinstance(env_reward.default_reward(), EpisodeReward)


def test_without_a_registered_default_the_env_says_what_to_do(monkeypatch):
    monkeypatch.setattr(env_reward, "entry_points", lambda group: [])
    env_reward._default_reward_factory.cache_clear()
    try:
        with pytest.raises(env_reward.NoDefaultRewardError, match="pass reward="):
            env_reward.default_reward()
    finally:
        env_reward._default_reward_factory.cache_clear()


def test_the_env_core_runs_an_episode_without_importing_a_layer_above_it():
    """Given its reward, the core never loads rewards, agents or the application (in a fresh interpreter)."""
    script = """
import sys
import gymnasium as gym
import vtb_env
env = gym.make("VisualToolBench-v0", reward=lambda task, record: (0.5, {"given": 1.0}), tools=None)
env.reset(seed=0)
done = False
while not done:
    _, reward, terminated, truncated, info = env.step("my final answer")
    done = terminated or truncated
env.close()
above = sorted(name for name in sys.modules if name.split(".")[0] in ("vtb_rewards", "vtb_agents", "vtb_app"))
print(reward, info["reward_components"]["given"], above)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.split() == ["0.5", "1.0", "[]"]


def test_the_rewards_contract_forbids_every_core_module_but_the_allowed_ones():
    """import-linter has no allow-list contract: the forbidden list must name each new core module."""
    import pkgutil

    import vtb_env

    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in config if c.get("source_modules") == ["vtb_rewards"]]
    core = {f"vtb_env.{m.name}" for m in pkgutil.iter_modules(vtb_env.__path__)}
    allowed = {
        *("vtb_env.tasks", "vtb_env.trajectory", "vtb_env.reward", "vtb_env.completion", "vtb_env.toolsets"),
        "vtb_env.kv_cache",
        "vtb_env.answer_values",
        "vtb_env.replay",
    }
    assert set(contract["forbidden_modules"]) == core - allowed

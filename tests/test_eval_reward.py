"""`vtb eval` records carry the env's composed reward and its components; `vtb report` shows their means."""

from __future__ import annotations

import json

import pytest

from tests.support.chat_server import ChatServer
from tests.test_eval import write_menu_tasks
from vtb_app.cli import main
from vtb_app.evaluation.records import latest_records
from vtb_env.loaders import load_tasks
from vtb_env.trajectory import EpisodeRecord
from vtb_rewards.compose import EpisodeReward


def test_records_carry_the_env_reward_and_the_report_averages_it(tmp_path, capsys):
    data = write_menu_tasks(tmp_path / "data", n=2)  # menu-0 asks for 9, menu-1 for 13
    with ChatServer(lambda request: {"content": "The answer is 13."}) as server:
        args = ["eval", "--data", str(data), "--agent", f"openai:m@{server.base_url}", "--ablation", "no_tools", "--no-progress"]
        assert main([*args, "--out", str(tmp_path / "run")]) == 0
    records = {r["task_id"]: r for r in latest_records(tmp_path / "run" / "records.jsonl").values()}
    tasks = {task.id: task for task in load_tasks(str(data))}
    for task_id, record in records.items():
        expected, components = EpisodeReward()(tasks[task_id], EpisodeRecord.from_dict(record["episode"]))
        assert record["reward"] == pytest.approx(expected) and record["reward_components"] == pytest.approx(components)
        assert record["reward_error"] is None
    assert records["menu-1"]["reward_components"]["passed"] == 1.0 and records["menu-0"]["reward_components"]["passed"] == 0.0
    # menu-0 is tool_redundant (TN without tools), menu-1 tool_required (FN): the mode component says so.
    assert (records["menu-0"]["reward_components"]["mode"], records["menu-1"]["reward_components"]["mode"]) == (1.0, 0.0)
    capsys.readouterr()

    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report"), "--all-tables"]) == 0
    out = capsys.readouterr().out
    assert "Reward (the env's composed per-episode reward" in out
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]
    mean = sum(r["reward"] for r in records.values()) / 2
    assert summary["reward"] == pytest.approx(mean) and summary["reward_n"] == 2
    assert summary["reward_components"]["mode"] == pytest.approx(0.5) and summary["reward_components"]["passed"] == pytest.approx(0.5)
    assert "tool_success" not in summary["reward_components"]  # no episode called a tool: the component applies to none
    assert f"{mean:.3f}" in out.split("\n\n")[0]  # the overall table's reward column

"""`vtb eval` records carry the env's composed reward and its components; `vtb report` shows their means."""

from __future__ import annotations

import json

import pytest

from tests.support.chat_server import ChatServer
from tests.support.cli import eval_args
from tests.support.menu_tasks import write_menu_tasks
from vtb_agents.base import BaseAgent
from vtb_app.cli import main
from vtb_app.evaluation.judging import episode_reward, judge_episode
from vtb_app.evaluation.records import latest_records
from vtb_app.evaluation.runner import evaluate
from vtb_env.env import VisualToolBenchEnv
from vtb_env.loaders import load_tasks
from vtb_env.tools.base import ToolRegistry
from vtb_env.trajectory import EpisodeRecord
from vtb_rewards.compose import EpisodeReward, RewardConfig
from vtb_rewards.judge.judge import Judge


def test_records_carry_the_env_reward_and_the_report_averages_it(tmp_path, capsys):
    data = write_menu_tasks(tmp_path / "data", n=2)  # menu-0 asks for 9, menu-1 for 13
    with ChatServer(lambda request: {"content": "The answer is 13."}) as server:
        assert main(eval_args(data, f"openai:m@{server.base_url}", tmp_path / "run", "--ablation", "no_tools")) == 0
    records = {r["task_id"]: r for r in latest_records(tmp_path / "run" / "records.jsonl").values()}
    tasks = {task.id: task for task in load_tasks(str(data))}
    for task_id, record in records.items():
        expected, components = EpisodeReward()(tasks[task_id], EpisodeRecord.from_dict(record["episode"]))
        assert record["reward"] == pytest.approx(expected) and record["reward_components"] == pytest.approx(components)
        assert record["reward_error"] is None
    assert (
        records["menu-1"]["reward_components"]["passed"] == 1.0
        and records["menu-0"]["reward_components"]["passed"] == 0.0
    )
    # menu-0 is tool_redundant (TN without tools), menu-1 tool_required (FN): the mode component says so.
    assert (records["menu-0"]["reward_components"]["mode"], records["menu-1"]["reward_components"]["mode"]) == (
        1.0,
        0.0,
    )
    capsys.readouterr()

    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report"), "--all-tables"]) == 0
    out = capsys.readouterr().out
    assert "Reward (the env's composed per-episode reward" in out
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())["runs"][0]
    mean = sum(r["reward"] for r in records.values()) / 2
    assert summary["reward"] == pytest.approx(mean) and summary["reward_n"] == 2
    assert summary["reward_components"]["mode"] == pytest.approx(0.5) and summary["reward_components"][
        "passed"
    ] == pytest.approx(0.5)
    assert "tool_success" not in summary["reward_components"]  # no episode called a tool: the component applies to none
    assert f"{mean:.4f}" in out.split("\n\n")[0]  # the overall table's reward column


class _Answers(BaseAgent):
    name = "answers"

    def act(self, observation):
        return "The answer is 13."


@pytest.mark.parametrize("same_scoring", [True, False])
def test_an_evaluated_episode_is_judged_once_by_the_env_reward(tmp_path, same_scoring):
    tasks = load_tasks(str(write_menu_tasks(tmp_path / "data", n=2)))  # two rubrics each
    judge = Judge(backend=None)
    run_scoring = RewardConfig(critical_rule="flag")
    reward = episode_reward(judge, run_scoring if same_scoring else RewardConfig())
    result = evaluate(
        tasks,
        _Answers(),
        lambda ts: VisualToolBenchEnv(ts, tools=ToolRegistry([]), reward=reward),
        judge,
        tmp_path / "run",
        scoring=run_scoring,
        progress=False,
        save_images=False,
    )
    assert result.succeeded == 2
    # The env's reward judged the 4 rubrics; the runner wrote its verdicts instead of judging again,
    # unless the reward scored under another rule: then the runner judges with the run's own.
    assert judge.stats.checks == (4 if same_scoring else 8)
    by_id = {task.id: task for task in tasks}
    for record in latest_records(tmp_path / "run" / "records.jsonl").values():
        expected = judge_episode(by_id[record["task_id"]], record["answers"], Judge(backend=None), run_scoring)
        assert {k: record[k] for k in ("verdicts", "score", "judge")} == expected
        assert "scoring" not in record


def test_judging_a_saved_record_again_checks_each_rubric_once(tmp_path, monkeypatch):
    """``vtb judge`` / ``--resume`` re-judging: the reward's verdicts are the record's, not a second pass."""
    from vtb_app.evaluation.judging import JudgePasses, rejudge
    from vtb_rewards.judge import judge as judge_module

    tasks = load_tasks(str(write_menu_tasks(tmp_path / "data", n=2)))  # two rubrics each
    scoring = RewardConfig(critical_rule="flag")
    reward = episode_reward(Judge(backend=None), scoring)

    def make_env(some_tasks):
        return VisualToolBenchEnv(some_tasks, tools=ToolRegistry([]), reward=reward)

    evaluate(tasks, _Answers(), make_env, Judge(backend=None), tmp_path / "run", scoring=scoring, progress=False)
    records = latest_records(tmp_path / "run" / "records.jsonl").values()

    checked = []
    real_run_check = judge_module.run_check
    monkeypatch.setattr(judge_module, "run_check", lambda *a, **k: checked.append(1) or real_run_check(*a, **k))
    by_id = {task.id: task for task in tasks}
    again = [rejudge(r, by_id[r["task_id"]], Judge(backend=None), scoring, JudgePasses(), "h") for r in records]
    assert len(checked) == 4  # 2 tasks x 2 rubrics (it was 8: verdicts, then the reward judged again)
    for old, new in zip(records, again, strict=True):
        assert {k: new[k] for k in ("verdicts", "score", "reward", "reward_components")} == {
            k: old[k] for k in ("verdicts", "score", "reward", "reward_components")
        }

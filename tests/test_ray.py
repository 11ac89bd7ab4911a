"""Ray: `vtb eval --executor ray` and RayEnvPool on a real local cluster of two nodes (one machine).

One ``ray.cluster_utils.Cluster`` (a head and a worker node, one CPU each) serves the module:
Ray's start-up is several seconds on two cores. Workers and a driver are killed mid-run; the
run file must then hold every (task, sample) exactly once.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster

from tests.support.chat_server import ChatServer
from tests.support.cli import wait_for_records
from tests.support.env_tools import exact_reward, hermes, make_task, small_tools
from vtb_app.cli import main
from vtb_app.evaluation.records import iter_records
from vtb_env.batch import EnvPool
from vtb_env.ray_cluster import alive_cpu_nodes, keep_token_off_home
from vtb_env.ray_pool import RayEnvPool

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    """Head + one worker node; their processes inherit PYTHONPATH, so actors import this checkout (and
    tests.support)."""
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    keep_token_off_home()
    temp = tempfile.mkdtemp(prefix="vtbray-", dir="/tmp")
    os.makedirs(os.path.join(temp, "ray"))
    os.environ["RAY_TMPDIR"] = temp  # Cluster writes its address file to $RAY_TMPDIR/ray, whatever temp_dir says
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "temp_dir": temp, "include_dashboard": False}
    )
    cluster.add_node(num_cpus=1, temp_dir=temp)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    assert len(alive_cpu_nodes(ray)) == 2
    yield cluster
    ray.shutdown()
    cluster.shutdown()
    del os.environ["RAY_TMPDIR"]
    shutil.rmtree(temp, ignore_errors=True)


def final_answers(request: dict) -> dict:
    """A scripted model: answers at once, the same way whoever asks (deterministic across executors)."""
    return {"content": "The answer is 42."}


def records_by_key(run_dir: Path) -> dict[str, list[dict]]:
    grouped = collections.defaultdict(list)
    for record in iter_records(run_dir / "records.jsonl"):
        grouped[record["key"]].append(record)
    return grouped


def latest(run_dir: Path) -> dict[str, dict]:
    return {key: records[-1] for key, records in records_by_key(run_dir).items()}


def comparable(record: dict) -> dict:
    """A record as both executors must write it: all of it but durations, timestamps and the config
    hash (the run's name, its directory's, is part of the config)."""
    return without_timings({k: v for k, v in record.items() if k != "config_hash"})


def episode_worker_pids() -> list[int]:
    """The EpisodeWorker actor processes of the module's cluster (Ray titles them ray::EpisodeWorker)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(b"ray::EpisodeWorker"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def eval_args(out: Path, *extra: str) -> list[str]:
    return ["eval", "--data", "demo", "--out", str(out), "--no-progress", *extra]


@pytest.mark.usefixtures("tesseract")
def test_ocr_baseline_gives_the_same_records_on_ray_and_threads(cluster, tmp_path, capsys):
    """Seeds, verdicts, rewards and images alike; then a resume on Ray judges an incompletely
    judged record again from its answers, as the threads executor does."""
    args = ["--limit", "1", "--samples", "2"]
    assert main(eval_args(tmp_path / "threads", *args, "--concurrency", "2")) == 0
    ray_args = eval_args(tmp_path / "ray", *args, "--executor", "ray", "--ray-address", cluster.address)
    assert main(ray_args) == 0
    threads, on_ray = latest(tmp_path / "threads"), latest(tmp_path / "ray")
    assert len(threads) == 2 and len({r["seed"] for r in threads.values()}) == 2
    assert {k: comparable(r) for k, r in on_ray.items()} == {k: comparable(r) for k, r in threads.items()}
    for relpath in {path for record in on_ray.values() for path in record["image_files"].values()}:
        assert (tmp_path / "ray" / relpath).read_bytes() == (tmp_path / "threads" / relpath).read_bytes()
    assert not (tmp_path / "ray" / "images" / ".ray-node-check").exists()

    key, record = sorted(on_ray.items())[0]
    outage = {
        **record,
        "score": {**record["score"], "passed": not record["score"]["passed"], "complete": False, "n_judge_errors": 1},
    }
    outage["verdicts"][0][0] = {**outage["verdicts"][0][0], "status": "judge_error"}
    with open(tmp_path / "ray" / "records.jsonl", "a") as log:
        log.write(json.dumps(outage) + "\n")
    capsys.readouterr()
    assert main([*ray_args, "--resume"]) == 0
    assert "1 done, 0 errors, 1 already done, 1 re-judged" in capsys.readouterr().out
    rejudged = latest(tmp_path / "ray")[key]
    assert "rejudged_at" in rejudged and comparable(rejudged) == comparable(threads[key])


def test_an_http_agent_gets_the_same_seeds_and_records_on_ray_even_with_deep_tool_arguments(cluster, tmp_path):
    """Per-sample request seeds and crash-proof records on Ray as in threads: every episode opens with
    a tool call nested 600, 5,000 or 100,000 levels deep (by its seed); the records keep such arguments
    as the policy's text, so each is an ``ok`` record with one failed call."""

    def deep_then_answer(request: dict) -> dict:
        if not any(m["role"] == "tool" for m in request["messages"]):
            depth = (600, 5_000, 100_000)[request["seed"] % 3]
            arguments = '{"expression": ' + "[" * depth + "]" * depth + "}"
            return {
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": arguments}}
                ]
            }
        return final_answers(request)

    with ChatServer(deep_then_answer) as server:
        args = ["--limit", "2", "--samples", "2", "--temperature", "1.0", "--agent", f"openai:m@{server.base_url}"]
        assert main(eval_args(tmp_path / "threads", *args)) == 0
        on_threads = len(server.requests)
        assert main(eval_args(tmp_path / "ray", *args, "--executor", "ray", "--ray-address", cluster.address)) == 0
        seeds = [
            sorted({r["seed"] for r in requests})
            for requests in (server.requests[:on_threads], server.requests[on_threads:])
        ]
    threads, on_ray = latest(tmp_path / "threads"), latest(tmp_path / "ray")
    assert len(threads) == 4 and all(r["status"] == "ok" and r["tool_use"]["calls"] == 1 for r in threads.values())
    assert len(seeds[0]) == 4 and seeds[1] == seeds[0]
    assert sorted(r["seed"] for r in on_ray.values()) == seeds[0]
    assert {k: comparable(r) for k, r in on_ray.items()} == {k: comparable(r) for k, r in threads.items()}


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(cluster, tmp_path):
    from vtb_app.evaluation.ray_executor import RunSpec, evaluate_on_ray
    from vtb_env.config import EnvConfig
    from vtb_env.loaders import load_tasks

    tasks = load_tasks("demo", limit=6)
    turns = sum(len(task.turns) for task in tasks) * 2
    gate = threading.Event()
    answered = iter(range(10**6))

    def held_after_four(request: dict) -> dict:
        if next(answered) >= 4:  # 4 episodes finish; then every worker slot waits here, mid-episode
            gate.wait(120)
        return final_answers(request)

    with ChatServer(held_after_four) as server:
        spec = RunSpec(agent=f"openai:m@{server.base_url}", judge="exact", env_config=EnvConfig.preset("default"))
        outcome: dict = {}
        runner = threading.Thread(
            target=lambda: outcome.update(
                result=evaluate_on_ray(tasks, spec, tmp_path, samples=2, concurrency=4, progress=False)
            )
        )
        runner.start()
        deadline = time.monotonic() + 240
        while len(server.requests) < 8 and time.monotonic() < deadline:  # 4 answered + 2 slots x 2 workers held
            time.sleep(0.1)
        victims = episode_worker_pids()
        assert len(server.requests) == 8 and len(victims) == 2
        os.kill(victims[0], signal.SIGKILL)
        time.sleep(1.0)
        gate.set()
        runner.join(timeout=300)
        assert not runner.is_alive()
        requests = len(server.requests)
    grouped = records_by_key(tmp_path)
    assert len(grouped) == 12 and all(
        len(records) == 1 and records[0]["status"] == "ok" for records in grouped.values()
    )
    assert outcome["result"].succeeded == 12 and outcome["result"].failed == 0
    assert requests >= turns + 2, "the killed worker's two episodes in flight were not run again"


def test_a_driver_killed_mid_run_resumes_without_loss_or_duplicates(cluster, tmp_path):
    out = tmp_path / "run"
    with ChatServer(final_answers, latency_s=0.3) as server:
        args = eval_args(
            out,
            "--limit",
            "3",
            "--samples",
            "2",
            "--concurrency",
            "2",
            "--executor",
            "ray",
            "--ray-address",
            cluster.address,
            "--agent",
            f"openai:m@{server.base_url}",
        )
        driver = subprocess.Popen(
            [sys.executable, "-m", "vtb_app.cli", *args],
            cwd=ROOT,
            env=os.environ.copy(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_records(out / "records.jsonl", 2)
        finally:
            driver.send_signal(signal.SIGKILL)
            driver.wait(timeout=30)
        before = records_by_key(out)
        assert 2 <= len(before) < 6
        assert main([*args, "--resume"]) == 0
    grouped = records_by_key(out)
    assert len(grouped) == 6 and all(len(records) == 1 and records[0]["status"] == "ok" for records in grouped.values())


def test_in_process_checkpoints_are_refused_with_what_to_do(tmp_path, capsys):
    assert main(eval_args(tmp_path / "run", "--executor", "ray", "--agent", "hf:/models/tiny")) == 2
    assert "Serve it over HTTP" in capsys.readouterr().err
    assert main(eval_args(tmp_path / "run", "--executor", "ray", "--judge", "hf:/models/judge")) == 2
    assert not (tmp_path / "run" / "records.jsonl").exists()


def make_pools(n: int) -> tuple[EnvPool, RayEnvPool]:
    kwargs = {"tasks": [make_task(f"t{i}") for i in range(4)], "tools": small_tools(), "reward": exact_reward()}
    return EnvPool.make(n, **kwargs), RayEnvPool.make(n, actors=2, **kwargs)


def same_observation(local: dict, remote: dict) -> bool:
    return (
        local["messages"] == remote["messages"]
        and local["image_names"] == remote["image_names"]
        and local["tools"] == remote["tools"]
        and [image.tobytes() for image in local["images"]] == [image.tobytes() for image in remote["images"]]
    )


def without_timings(value):
    """A record with its measured durations (``*_s``) and timestamps left out."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if not k.endswith(("_s", "_at"))}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def test_ray_env_pool_steps_like_env_pool_and_ships_each_image_once(cluster):
    local, remote = make_pools(4)
    try:
        for (lo, li), (ro, ri) in zip(local.reset(seed=3), remote.reset(seed=3), strict=True):
            assert li["task"]["id"] == ri["task"]["id"] and same_observation(lo, ro)
        script = [
            [hermes("python_image_processing", code="save save")] * 4,
            [hermes("python_image_processing", code="save")] * 4,
            ["It is 10.", "nothing", None, "It is 10."],
        ]
        for actions in script:
            for lr, rr in zip(local.step(actions), remote.step(actions), strict=True):
                assert (lr is None) == (rr is None)
                if lr is not None:
                    assert same_observation(lr.observation, rr.observation)
                    assert (lr.reward, lr.terminated, lr.truncated) == (rr.reward, rr.terminated, rr.truncated)
                    assert without_timings(lr.info["record"].to_dict()) == without_timings(rr.info["record"].to_dict())
        # 4 episodes x (1 task image + 3 made by tools), each pulled once although every step showed them all.
        assert remote.images_fetched == 16
    finally:
        local.close()
        remote.close()


def test_ray_env_pool_returns_fast_steps_while_a_slow_one_runs(cluster):
    pool = RayEnvPool.make(2, actors=2, tasks=[make_task("t0")], tools=small_tools(), reward=exact_reward())
    try:
        pool.reset(seed=0)
        slow = pool.submit(0, hermes("web_search", query="sleep 3"))
        fast = pool.submit(1, hermes("calculator", expression="7"))
        assert fast.result(timeout=60).observation["messages"][-1]["role"] == "tool" and not slow.done()
        with pytest.raises(RuntimeError, match="in flight"):
            pool.submit(0, "x")
        assert pool.submit(1, "It is 10.").result(timeout=60).terminated
        assert slow.result(timeout=60).observation["messages"][-1]["role"] == "tool"
    finally:
        pool.close()


def test_a_local_cluster_stays_off_home(tmp_path):
    """`--executor ray` without an address starts its own cluster; its files go to --ray-temp-dir, none to HOME."""
    home = tmp_path / "home"
    home.mkdir()
    temp = tempfile.mkdtemp(prefix="vtbray-", dir="/tmp")
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    for name in ("RAY_AUTH_TOKEN", "RAY_ADDRESS", "RAY_TMPDIR"):
        env.pop(name, None)
    out = tmp_path / "run"
    with ChatServer(final_answers) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "vtb_app.cli",
                *eval_args(
                    out,
                    "--limit",
                    "2",
                    "--executor",
                    "ray",
                    "--ray-temp-dir",
                    temp,
                    "--agent",
                    f"openai:m@{server.base_url}",
                ),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(records_by_key(out)) == 2
    assert list(home.iterdir()) == []
    assert any(name.startswith("session_") for name in os.listdir(temp))
    shutil.rmtree(temp, ignore_errors=True)

"""Round sync keeps the generation calls of every process equal, so no rank is left alone in a collective: in one
process against a simulated peer, and across two real torch.distributed (gloo) processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("trl")

from tests.support import grpo_rollouts  # noqa: E402
from tests.support.grpo_rollouts import plumbing_config, width_recording  # noqa: E402
from vtb_agents.rollout import ChatRenderer, HFGenerator, run_episodes  # noqa: E402
from vtb_app.integrations import trl as vtb_trl  # noqa: E402
from vtb_env.batch import EnvPool  # noqa: E402
from vtb_env.env import VisualToolBenchEnv  # noqa: E402
from vtb_env.tools.base import ToolRegistry  # noqa: E402

# module-scoped fixtures shared with the other GRPO test files
policy_path, tasks, tools = grpo_rollouts.policy_path, grpo_rollouts.tasks, grpo_rollouts.tools


def test_round_sync_keeps_generation_calls_equal_across_processes(policy_path, tasks, tools):
    """Another process still has 3 live episodes for 6 rounds: this one keeps generating (padded) until it is done
    too."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(policy_path)
    sampler = HFGenerator(AutoModelForCausalLM.from_pretrained(policy_path), tokenizer, max_new_tokens=8)
    generate, widths = width_recording(sampler)

    rounds = iter(range(100))
    other = lambda active: max(active, 3 if next(rounds) < 6 else 0)  # noqa: E731 - the other process's count
    pool = EnvPool([VisualToolBenchEnv(tasks=tasks, tools=tools, config=plumbing_config()) for _ in range(2)])
    torch.manual_seed(0)
    episodes = run_episodes(pool, [tasks[0].id] * 2, generate, ChatRenderer(tokenizer), round_sync=other)
    pool.close()
    assert len(widths) == 6 and all(
        w == 3 for w in widths
    )  # this process finishes within 6 rounds (cap 2 calls per turn)
    assert all(e.record is not None and e.policy_steps <= 6 for e in episodes)


def _rank_rollout(rank: int, world: int, port: int, model_path: str, out_dir: str) -> None:
    """One process of a 2-process CPU (gloo) group: rank 0 plays 1-turn tasks, rank 1 2-turn tasks."""
    import os

    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world),
    )
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.support.env_tools import exact_reward, make_task
    from vtb_env.tools.calculator import Calculator

    accelerator = Accelerator(cpu=True)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    sampler = HFGenerator(AutoModelForCausalLM.from_pretrained(model_path), tokenizer, max_new_tokens=16)
    generate, widths = width_recording(sampler)

    task = make_task(f"r{rank}", turns=rank + 1)
    pool = EnvPool(
        [
            VisualToolBenchEnv(
                tasks=[task], tools=ToolRegistry([Calculator()]), reward=exact_reward(), config=plumbing_config()
            )
            for _ in range(2)
        ]
    )
    episodes = run_episodes(
        pool, [task.id] * 2, generate, ChatRenderer(tokenizer), round_sync=vtb_trl.accelerator_round_sync(accelerator)
    )
    pool.close()
    Path(out_dir, f"{rank}.json").write_text(
        json.dumps(
            {
                "widths": widths,
                "calls": [len(e.record.tool_calls) for e in episodes],
                "steps": [e.policy_steps for e in episodes],
            }
        )
    )
    accelerator.wait_for_everyone()


@pytest.mark.slow
def test_round_sync_across_two_real_processes(tmp_path):
    """Real torch.distributed (gloo) group through accelerate: with round_sync both ranks generate equally often."""
    import socket

    import torch.multiprocessing as mp

    from tests.support.tiny_models import build_scripted_model

    model = build_scripted_model(
        tmp_path / "m", "llama", tool_call={"name": "calculator", "arguments": {"expression": "6*7"}}
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mp.spawn(_rank_rollout, args=(2, port, str(model), str(tmp_path)), nprocs=2)
    ranks = [json.loads((tmp_path / f"{rank}.json").read_text()) for rank in range(2)]
    # rank 0's episodes need 2 rounds (a call, the answer), rank 1's 4 (two turns): without round_sync
    # rank 0 would stop generating after 2 calls and leave rank 1 alone in the collective
    assert [r["calls"] for r in ranks] == [[1, 1], [2, 2]] and [r["steps"] for r in ranks] == [[2, 2], [4, 4]]
    assert ranks[0]["widths"] == ranks[1]["widths"] == [2, 2, 2, 2]  # same number of calls, same batch width

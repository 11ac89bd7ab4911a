"""What KV reuse across an episode's rounds saves ``HFGenerator``: a 3-turn task against a 1-turn one, greedy.

    .venv/bin/python scripts/bench_generator.py                      # a random Llama built here (hidden 512, 8 blocks)
    .venv/bin/python scripts/bench_generator.py --model PATH --chat-template chatml-text --image-view ocr

Each task is played in the real env with no tools (one policy reply per turn), ``--copies`` episodes at once,
by ``vtb_agents.generation.HFGenerator`` re-prefilling the whole dialogue every round (batched) and with
``kv_reuse`` (row by row, each round prefilling only what the env appended). Printed per task and mode: wall
and CPU seconds (the fastest of ``--repeats`` runs), prompt tokens prefilled, and the ratios 3-turn / 1-turn and
reuse / re-prefill. The two modes must produce the same tokens (greedy); the script says so or stops. With
``--image-view ocr`` the prompts carry the pages' words (Tesseract reads them once, in the warm-up).
"""

from __future__ import annotations

import vtb_app.openmp  # noqa: F401  (OMP_WAIT_POLICY=PASSIVE before torch loads)

# isort: split
import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.support (the project itself is installed)

from tests.support.tiny_models import _llama_config, _save, build_tokenizer  # noqa: E402
from vtb_agents.generation import HFGenerator  # noqa: E402
from vtb_agents.rollout import ChatRenderer, run_episodes  # noqa: E402
from vtb_app.integrations.trl_model import load_policy  # noqa: E402
from vtb_env.batch import EnvPool  # noqa: E402
from vtb_env.config import EnvConfig  # noqa: E402
from vtb_env.env import VisualToolBenchEnv  # noqa: E402
from vtb_env.synth import generate  # noqa: E402
from vtb_env.tools.base import ToolRegistry  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="a checkpoint (default: a random Llama built in a temporary folder)")
    p.add_argument("--chat-template", help="a template file or chatml-text (vtb_app.integrations.trl_model)")
    p.add_argument("--image-view", help="pixels, ocr or ocr-pages")
    p.add_argument("--hidden", type=int, default=512, help="the built model's hidden size")
    p.add_argument("--layers", type=int, default=8, help="the built model's transformer blocks")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--copies", type=int, default=1, help="episodes of each task played together (a GRPO group)")
    p.add_argument("--seed", type=int, default=0, help="synth:24:SEED: the tasks (its first 1-turn and 3-turn one)")
    p.add_argument("--repeats", type=int, default=3, help="runs per task and mode; the fastest is reported")
    return p.parse_args(argv)


def built_model(folder: Path, hidden: int, layers: int) -> Path:
    """A random-weight Llama with the tests' tokenizer (byte-level, so prompts run to thousands of tokens)."""
    import torch
    from transformers import LlamaForCausalLM

    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    config = _llama_config(tokenizer, hidden_size=hidden, layers=layers, heads=hidden // 64)
    config.intermediate_size = 4 * hidden
    return _save(LlamaForCausalLM(config).eval(), tokenizer, folder)


def play(policy, task, copies: int, reuse: bool, max_new_tokens: int) -> dict:
    """Greedy episodes of ``task`` without tools; their tokens, times and prefilled tokens."""
    import resource

    config = EnvConfig.preset("default", image_parts="name", tool_set="none", system_prompt="no_tools")
    pool = EnvPool([VisualToolBenchEnv(tasks=[task], tools=ToolRegistry([]), config=config) for _ in range(copies)])
    generator = HFGenerator(
        policy.model, policy.processing_class, max_new_tokens=max_new_tokens, greedy=True, kv_reuse=reuse
    )
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    try:
        episodes = run_episodes(
            pool, [task.id] * copies, generator, ChatRenderer(policy.processing_class), max_completion_tokens=10**6
        )
    finally:
        pool.close()
    wall = time.perf_counter() - start
    used = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "tokens": [e.completion_ids for e in episodes],
        "wall_s": wall,
        "cpu_s": used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime,
        "prefilled": generator.prefilled_tokens,
        "rounds": episodes[0].policy_steps,
    }


def main(argv: list[str] | None = None) -> None:
    import tempfile

    args = parse_args(argv)
    tasks = generate(24, seed=args.seed)
    picked = {turns: next(t for t in tasks if len(t.turns) == turns) for turns in (1, 3)}
    with tempfile.TemporaryDirectory() as folder:
        path = args.model or built_model(Path(folder), args.hidden, args.layers)
        policy = load_policy(path, chat_template=args.chat_template, image_view=args.image_view)
        policy.model.eval()
        results = {}
        for turns, task in picked.items():
            play(policy, task, 1, False, 2)  # warm-up: first-call costs out of the figures
            for reuse in (False, True):
                runs = [play(policy, task, args.copies, reuse, args.max_new_tokens) for _ in range(args.repeats)]
                results[turns, reuse] = run = min(runs, key=lambda r: r["wall_s"])
                mode = "kv reuse  " if reuse else "re-prefill"
                print(
                    f"{turns}-turn task ({run['rounds']} rounds), {mode}: {run['wall_s']:6.2f} s wall, "
                    f"{run['cpu_s']:6.2f} CPU-s, {run['prefilled']:6d} prompt tokens prefilled"
                )
            if results[turns, False]["tokens"] != results[turns, True]["tokens"]:
                raise SystemExit(f"{turns}-turn task: kv reuse generated other tokens than re-prefilling")
    print("greedy tokens identical with and without reuse")
    for reuse in (False, True):
        ratio = results[3, reuse]["wall_s"] / results[1, reuse]["wall_s"]
        print(f"3-turn / 1-turn wall, {'kv reuse' if reuse else 're-prefill'}: {ratio:.2f}x")
    for turns in (1, 3):
        wall = results[turns, True]["wall_s"] / results[turns, False]["wall_s"]
        prefill = results[turns, True]["prefilled"] / results[turns, False]["prefilled"]
        print(f"{turns}-turn, reuse / re-prefill: wall {wall:.2f}x, prompt tokens prefilled {prefill:.2f}x")


if __name__ == "__main__":
    main()

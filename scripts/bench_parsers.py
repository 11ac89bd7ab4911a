"""Worst-case tool-call parsing time on adversarial actions, next to a benign action of the same size.

Each adversarial family is a pattern that once made a parser super-linear (JSON repair on
unbalanced quotes, unclosed ``<think>``/``<function=`` runs, deep nesting, thousands of calls).
Every action is parsed with ``vtb_env.parsers.parse_action`` (the env's only parsing path) at
64 KB and 1 MB; the table shows the best of ``--repeat`` runs, the ratio to the benign action of
the same size measured in the same run, and the target (100 ms per 64 KB).

    .venv/bin/python scripts/bench_parsers.py [--repeat 3] [--sizes 65536,1048576]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Callable

from vtb_env.parsers import parse_action

TARGET_S_PER_64KB = 0.100


def _fill(prefix: str, unit: str, size: int, suffix: str = "") -> str:
    return prefix + unit * max((size - len(prefix) - len(suffix)) // len(unit), 0) + suffix


def benign(size: int) -> str:
    """A normal hermes action: reasoning text, then one call whose code argument fills the size."""
    code = "x = img.crop((0, 0, 10, 10))\n" * max((size - 200) // 29, 1)
    return (
        "<think>Crop the corner first.</think>"
        + '<tool_call>{"name": "python_interpreter", "arguments": '
        + json.dumps({"code": code})
        + "}</tool_call>"
    )


ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "hermes unbalanced quotes": lambda n: _fill('<tool_call>{"a"a"a', '"a', n),
    "hermes quote-space runs": lambda n: _fill('<tool_call>{"', 'a" ', n),
    "hermes 4 KB quote blocks": lambda n: _fill("", '<tool_call>{"' + 'a" ' * 1300 + "</tool_call>", n),
    "hermes 8 KB quote blocks": lambda n: _fill("", '<tool_call>{"' + 'a" ' * 2700 + "</tool_call>", n),
    "unclosed <think> x N": lambda n: _fill("", "<think>", n),
    "<function= x N": lambda n: _fill("", "<function=", n),
    "<function=f><parameter= x N": lambda n: _fill("<function=f>", "<parameter=", n),
    "deep JSON nesting": lambda n: _fill("<tool_call>", '{"a":', n),
    "deep bracket nesting": lambda n: _fill("<tool_call>", "[", n),
    "10k+ hermes calls": lambda n: _fill(
        "", '<tool_call>{"name": "calculator", "arguments": {"expression": "1"}}</tool_call>', n
    ),
    "10k+ pythonic calls": lambda n: _fill("[", 'calculator(expression="1"), ', n, "]"),
    "llama3 JSON stream": lambda n: _fill("", '{"name": "calculator", "parameters": {"expression": "1"}}; ', n),
    "pythonic deep operators": lambda n: _fill("[f(a=", "1+", n, "1)]"),
}


def best_time(text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        parse_action(text)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", default="65536,1048576")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    worst_ok = True
    for size in sizes:
        base = best_time(benign(size), args.repeat)
        target = TARGET_S_PER_64KB * size / 65536
        print(f"\n{size:,} characters (target <= {target * 1000:.0f} ms); benign hermes call: {base * 1000:.1f} ms")
        print(f"{'adversarial action':32} {'ms':>9} {'x benign':>9}")
        worst = 0.0
        for name, make in ADVERSARIAL.items():
            elapsed = best_time(make(size), args.repeat)
            worst = max(worst, elapsed)
            print(f"{name:32} {elapsed * 1000:9.1f} {elapsed / base:9.1f}")
        worst_ok &= worst <= target
        print(f"{'worst':32} {worst * 1000:9.1f} {worst / base:9.1f}  {'within' if worst <= target else 'OVER'} target")
    return 0 if worst_ok else 1


if __name__ == "__main__":
    sys.exit(main())

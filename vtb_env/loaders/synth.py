"""``synth:N:SEED``: the first N tasks of the synthetic stream with seed SEED (``vtb_env.synth``).

``synth-v1:N:SEED`` / ``synth-v2:N:SEED`` / ``synth-v3:N:SEED`` pick the generator (``synth:`` is the
default one, v3); ``synth:N:SEED:train`` / ``synth:N:SEED:heldout`` pick v3's training split or its
held-out one (scene types and hiding mechanisms the training split never shows).

Twins count: ``synth:4:0`` is two tool-required tasks and their tool-redundant twins when they
have one. The tasks are generated as the load streams, so ``limit`` and the filters cut the work.
"""

from __future__ import annotations

import re
from functools import partial
from itertools import islice
from typing import Iterator

from vtb_env.loaders.common import Candidate, DatasetSpecError, LoadReport
from vtb_env.synth.stream import DEFAULT_GENERATOR, stream
from vtb_env.tasks import Task

SYNTH_PREFIXES = ("synth:", "synth-v1:", "synth-v2:", "synth-v3:")
_SPEC = re.compile(r"synth(?:-(v1|v2|v3))?:(\d{1,10}):(\d{1,40})(?::(train|heldout))?")
MAX_TASKS = 10**9  # N of a spec: the stream is lazy (a limit cuts the work), but N must be a count


def is_synth_spec(source: object) -> bool:
    return isinstance(source, str) and source.startswith(SYNTH_PREFIXES)


def parse_synth_spec(spec: str) -> tuple[int, int, str, str]:
    """``(n, seed, generator, split)`` of ``synth[-vK]:N:SEED[:SPLIT]``; DatasetSpecError for anything else."""
    match = _SPEC.fullmatch(spec.strip())
    generator = (match.group(1) or DEFAULT_GENERATOR) if match else ""
    if match is None or (match.group(4) and generator != "v3") or int(match.group(2)) > MAX_TASKS:
        raise DatasetSpecError(
            f"{spec!r}: expected synth:N:SEED (or synth-v1:N:SEED for the first generator, "
            "synth:N:SEED:train / synth:N:SEED:heldout for v3's splits) "
            f"with 0 <= N <= {MAX_TASKS:,} and 0 <= SEED < 10**40, e.g. synth:50:0"
        )
    return int(match.group(2)), int(match.group(3)), generator, match.group(4) or "all"


def synth_candidates(spec: str, report: LoadReport) -> Iterator[Candidate]:
    n, seed, generator, split = parse_synth_spec(spec)
    report.kind = "synth"
    report.note_schema(f"synth generator {generator}, seed {seed}" + (f", split {split}" if split != "all" else ""))
    for task in islice(stream(seed, generator=generator, split=split), n):
        fields = {
            "id": task.id,
            "turncase": task.turncase,
            "prompt_category": task.prompt_category,
            "eval_focus": task.eval_focus,
        }
        yield Candidate(task.id, fields, partial(_generated, task))


def _generated(task: Task) -> Task:
    return task

"""``synth:N:SEED``: the first N tasks of the synthetic stream with seed SEED (``vtb_env.synth``).

``synth-v1:N:SEED`` / ``synth-v2:N:SEED`` pick the generator (``synth:`` is the default one).

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

SYNTH_PREFIXES = ("synth:", "synth-v1:", "synth-v2:")
_SPEC = re.compile(r"synth(?:-(v1|v2))?:(\d+):(-?\d+)")


def is_synth_spec(source: object) -> bool:
    return isinstance(source, str) and source.startswith(SYNTH_PREFIXES)


def parse_synth_spec(spec: str) -> tuple[int, int, str]:
    """``(n, seed, generator)`` of ``synth[-vK]:N:SEED``; DatasetSpecError for anything else."""
    match = _SPEC.fullmatch(spec.strip())
    if match is None:
        raise DatasetSpecError(
            f"{spec!r}: expected synth:N:SEED (or synth-v1:N:SEED for the first generator) "
            "with N >= 0 and an integer SEED, e.g. synth:50:0"
        )
    return int(match.group(2)), int(match.group(3)), match.group(1) or DEFAULT_GENERATOR


def synth_candidates(spec: str, report: LoadReport) -> Iterator[Candidate]:
    n, seed, generator = parse_synth_spec(spec)
    report.kind = "synth"
    report.note_schema(f"synth generator {generator}, seed {seed}")
    for task in islice(stream(seed, generator=generator), n):
        fields = {
            "id": task.id,
            "turncase": task.turncase,
            "prompt_category": task.prompt_category,
            "eval_focus": task.eval_focus,
        }
        yield Candidate(task.id, fields, partial(_generated, task))


def _generated(task: Task) -> Task:
    return task

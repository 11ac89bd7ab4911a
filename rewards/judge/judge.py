"""The judge: one verdict per criterion, from an exact check, the cache, or a backend.

Order per item: a rubric with an exact ``check`` is decided by ``vtb_rewards.checks`` (no LLM); a
missing answer is "Not Met" without a call; a cached verdict is reused; everything else goes to
the backend in one batch (the backend bounds its own concurrency). With ``votes=k`` each item
is asked k times and the majority of the readable replies wins (a tie or no readable reply is
``judge_error``); use k > 1 with a temperature above 0, else the votes are identical.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from vtb_env.tasks import Task
from vtb_rewards.checks import ANSWER_FORMATS, CheckSpecError, implied_world, run_check, slot_capacity
from vtb_rewards.judge.backends import BackendError, JudgeBackend
from vtb_rewards.judge.cache import VerdictCache, cache_key
from vtb_rewards.judge.prompt import RUBRIC_JUDGE_TEMPLATE, render, template_hash
from vtb_rewards.judge.verdict import JUDGE_ERROR, MET, NOT_MET, VERDICT_SCHEMA, Verdict, parse_verdict


@dataclass(frozen=True)
class JudgeItem:
    """One thing to judge: a criterion (rubric text, key step, tool call) against an answer."""

    question: str
    golden_answer: str
    criterion: str
    answer: str | None  # None: the policy gave no answer (Not Met without a judge call)
    check: Mapping[str, Any] | None = None  # an exact rule from vtb_rewards.checks, if the rubric has one
    world: Mapping[str, Any] | None = None  # the turn's closed world of values, for the exact rule


@dataclass
class JudgeStats:
    """Counts of one judge's work: exact checks, unanswered turns, cache hits, backend calls, failures."""

    checks: int = 0
    no_answer: int = 0
    cache_hits: int = 0
    backend_calls: int = 0
    errors: int = 0


@dataclass
class Judge:
    """Grades answers against rubrics: an exact ``check`` when the rubric has one, else the LLM ``backend``
    (``template`` prompt, majority of ``votes``), through ``cache``; ``backend=None`` means exact checks only
    (a rubric without one is a judge error). ``stats`` counts its work."""

    backend: JudgeBackend | None = None
    cache: VerdictCache | None = None
    template: str = RUBRIC_JUDGE_TEMPLATE
    votes: int = 1
    stats: JudgeStats = field(default_factory=JudgeStats)

    def __post_init__(self) -> None:
        if self.votes < 1:
            raise ValueError("votes must be >= 1")
        self._template_hash = template_hash(self.template)

    @property
    def judge_id(self) -> str:
        base = self.backend.judge_id if self.backend is not None else "none"
        return base if self.votes == 1 else f"{base}|votes={self.votes}"

    def _key(self, item: JudgeItem) -> str:
        return cache_key(
            self.judge_id, self._template_hash, item.question, item.golden_answer, item.criterion, item.answer or ""
        )

    def _without_backend(self, item: JudgeItem) -> Verdict | None:
        if item.check is not None:
            self.stats.checks += 1
            try:
                return Verdict(MET if run_check(item.check, item.answer or "", item.world) else NOT_MET, source="check")
            except CheckSpecError as exc:
                return Verdict.failure(str(exc), source="check")
        if item.answer is None or not item.answer.strip():
            self.stats.no_answer += 1
            return Verdict(NOT_MET, explanation="no final answer", source="no_answer")
        if self.cache is not None:
            cached = self.cache.get(self._key(item))
            if cached is not None:
                self.stats.cache_hits += 1
                return cached
        if self.backend is None:
            return Verdict.failure("no judge backend configured for a rubric without an exact check")
        return None

    def _majority(self, replies: Sequence[str | BackendError]) -> Verdict:
        verdicts = [parse_verdict(r) for r in replies if isinstance(r, str)]
        readable = [v for v in verdicts if not v.is_error]
        if not readable:
            errors = [str(r) for r in replies if isinstance(r, BackendError)] + [v.error or "" for v in verdicts]
            return Verdict.failure("; ".join(errors)[:500])
        counts = Counter(v.status for v in readable)
        if len(readable) > 1 and counts[MET] == counts[NOT_MET]:
            return Verdict.failure(f"tied vote {dict(counts)}")
        winner = counts.most_common(1)[0][0]
        return next(v for v in readable if v.status == winner)

    def judge(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        """Verdicts in the order of ``items``; never raises for a failed judgment."""
        results: list[Verdict | None] = [self._without_backend(item) for item in items]
        pending: dict[str, list[int]] = {}
        for index, verdict in enumerate(results):
            if verdict is None:
                pending.setdefault(self._key(items[index]), []).append(index)
        if pending:
            keys = list(pending)
            prompts = [
                render(
                    self.template,
                    question=it.question,
                    golden_answer=it.golden_answer,
                    criterion=it.criterion,
                    answer=it.answer or "",
                )
                for it in (items[pending[key][0]] for key in keys)
            ]
            replies = self.backend.complete_many([p for p in prompts for _ in range(self.votes)], schema=VERDICT_SCHEMA)  # type: ignore[union-attr]
            self.stats.backend_calls += len(replies)
            for n, key in enumerate(keys):
                verdict = self._majority(replies[n * self.votes : (n + 1) * self.votes])
                if self.cache is not None:
                    self.cache.put(key, verdict)
                for index in pending[key]:
                    results[index] = verdict
        final = [v for v in results if v is not None]
        self.stats.errors += sum(v.status == JUDGE_ERROR for v in final)
        return final


def judge_task(
    judge: Judge, task: "Task", answers: Sequence[str | None], answer_format: str = "free"
) -> list[dict[str, Verdict]]:
    """Verdicts for every rubric of every turn (one batch), as ``[{rubric_id: verdict}]`` per turn.

    As in the official toolkit, the judge sees the turn's own prompt and golden answer only.
    A turn with no answer (``None``, or missing from ``answers``) gets "Not Met" everywhere.
    Exact checks read the answer in the turn's closed world (``Turn.world``, else ``implied_world``);
    ``answer_format="slot"``: they read only its answer slot (``vtb_rewards.checks.answer_slot``).
    Raises ``CheckSpecError`` when a rubric's exact check cannot be evaluated (the loaders' schema keeps such
    tasks out; one built by hand is refused here, not scored without its check).
    """
    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"unknown answer_format {answer_format!r}; choose one of {ANSWER_FORMATS}")
    items, slots = [], []
    for t, turn in enumerate(task.turns):
        answer = answers[t] if t < len(answers) else None
        checks = [r.check for r in turn.rubrics if r.check is not None]
        world = turn.world if turn.world is not None else implied_world(turn.prompt, turn.golden_answer, checks)
        if answer_format == "slot":
            world = {**world, "slot": slot_capacity(checks)}
        for rubric in turn.rubrics:
            items.append(JudgeItem(turn.prompt, turn.golden_answer, rubric.description, answer, rubric.check, world))
            slots.append((t, rubric.id))
    verdicts: list[dict[str, Verdict]] = [{} for _ in task.turns]
    for (t, rubric_id), verdict in zip(slots, judge.judge(items), strict=True):
        verdicts[t][rubric_id] = verdict
    _raise_for_broken_checks(task, verdicts)
    return verdicts


def _raise_for_broken_checks(task: Task, verdicts: Sequence[Mapping[str, Verdict]]) -> None:
    """A check that cannot be evaluated is the task's error, not a judgment that failed: an LLM judge's outage
    passes and its rubric is judged again, a malformed check never will be, and scoring the episode without it
    would pay a reward the task does not define. Raised, it becomes the episode's ``reward_error``."""
    broken = [
        (t, rubric_id, verdict.error)
        for t, turn in enumerate(verdicts)
        for rubric_id, verdict in turn.items()
        if verdict.source == "check" and verdict.is_error
    ]
    if broken:
        t, rubric_id, error = broken[0]
        raise CheckSpecError(
            f"task {task.id} turn {t + 1} rubric {rubric_id!r}: its check cannot be evaluated ({error}); "
            f"{len(broken)} such check(s) in the task"
        )

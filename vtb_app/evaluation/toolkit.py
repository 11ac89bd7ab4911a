"""``vtb import-toolkit``: the official toolkit's output JSON as a run directory.

The official toolkit (GitHub ``xi1ngang/VisualToolBench``, scripts at commit ``8cdc54d``) writes:

- model responses (``run_model_response_{single,multi}_turn.py``): a JSON list of rows.
  Single-turn: ``{id, task_id, prompt, image, turncase, eval_focus, prompt_category,
  golden_answer, tool_trajectory, rubrics, model_answer, num_tool_calls, tool_use_list,
  content_list}``. Multi-turn: ``{id, task_id, turncase, eval_focus, prompt_category, turns:
  [{turn_number, prompt, image, model_answer, golden_answer, tool_trajectory, rubrics,
  num_tool_calls, tool_use_list, content_list}], total_turns}``. ``tool_use_list`` is
  ``[{function_name, function_args, observation}]`` (``observation``: the tool's result dict);
  ``content_list`` is ``[{step, content}]``, the text of each model round, the last one being
  the answer; both are ``{}`` when tools were off. Harness failures become the answer text
  (``API Error: ...``, ``Processing Error: ...``, ``Model inference failed ...``), and the tool
  cap the literal answer "Model hit the maximum number of tool calls".
- judge results (``run_judge_{single,multi}_turn.py``): a JSON list of ``{task_id, turncase,
  eval_focus, prompt_category, judge_result, score, accuracy}``; ``judge_result`` is
  ``[{rubric_id, judge_result}]`` (single-turn) or one such list per turn (multi-turn), each
  ``judge_result`` the judge's raw reply (``{"explanation", "judge_result": "Met"|"Not Met"}``).

Each response row becomes an ``ok`` record like those of ``vtb eval`` (a harness failure an
``error`` record, as ours are). Verdicts come from the toolkit's judge results, replayed through
our ``Judge`` (``ToolkitVerdicts``: its replies parsed leniently, a missing verdict is
``judge_error``, never a silent "Not Met"; they decide even rubrics that carry an exact check),
or from ``--judge``; the score and pass use our
rules, and the toolkit's own ``score``/``accuracy`` are kept in ``record["toolkit"]`` for
comparison. ``vtb judge`` re-scores the run and ``vtb report`` compares it with ours.

Not carried over: the images the toolkit's tools made (absolute paths on the machine that ran
it), and which round each tool call belongs to when a round holds several calls (the toolkit
does not record it; such calls are listed in the first round that made calls).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from vtb_app.errors import error_kind
from vtb_app.evaluation.console import print_comparison
from vtb_app.evaluation.failures import print_failures, run_failures
from vtb_app.evaluation.judging import episode_reward, judge_episode, reward_judged
from vtb_app.evaluation.playing import PlayedEpisode
from vtb_app.evaluation.records import RECORDS_FILE, RunLog, latest_records, ok_keys, record_key, write_config
from vtb_app.evaluation.runner import ok_record, task_summary
from vtb_app.evaluation.runs import task_index
from vtb_env.reward import score_episode
from vtb_env.tasks import Task
from vtb_env.trajectory import EpisodeRecord, StepRecord, ToolCallRecord, TurnRecord
from vtb_rewards.compose import RewardConfig
from vtb_rewards.judge.backends import BackendError
from vtb_rewards.judge.judge import Judge
from vtb_rewards.judge.prompt import RUBRIC_JUDGE_TEMPLATE, render

TOOL_NAMES = {"google_search": "web_search"}  # the toolkit's names -> ours (the rest are the same)
TOOL_CAP_ANSWER = "Model hit the maximum number of tool calls"
TOOLKIT_JUDGE_FAILURE = "Failed to get judge result"  # run_judge_*_turn.py's placeholder after its retries
HARNESS_ERRORS = ("API Error:", "Processing Error:", "Model inference failed")
OUTPUT_CHARS = 20_000  # a tool observation kept in the record (the toolkit can return whole pages)


class ToolkitFormatError(ValueError):
    """The file is not toolkit output; the message says what was expected."""


def load_rows(path: str | Path, what: str) -> list[dict[str, Any]]:
    try:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ToolkitFormatError(f"{path}: cannot read the toolkit's {what} JSON ({exc})") from exc
    if not isinstance(rows, list) or not all(isinstance(r, dict) and (r.get("task_id") or r.get("id")) for r in rows):
        raise ToolkitFormatError(f"{path}: expected the toolkit's {what} file, a JSON list of objects with a task_id")
    return rows


def _row_id(row: Mapping[str, Any]) -> str:
    return str(row.get("task_id") or row.get("id"))


def response_turns(row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The per-turn parts of a response row (a single-turn row is its own one turn)."""
    turns = row.get("turns")
    return list(turns) if isinstance(turns, list) else [row]


def _observation_error(observation: Any) -> str | None:
    """The toolkit's tools report failure as ``error``, ``status: "error"`` or ``ok: "false"``."""
    if not isinstance(observation, Mapping):
        return None
    if observation.get("error"):
        return str(observation["error"])
    if observation.get("status") == "error" or str(observation.get("ok", "")).lower() == "false":
        return str(observation.get("stderr") or observation.get("error") or "tool reported an error")[:2000]
    return None


def _tool_call(turn: int, index: int, call: Mapping[str, Any]) -> ToolCallRecord:
    observation = call.get("observation")
    error = _observation_error(observation)
    name = str(call.get("function_name", ""))
    output = observation if isinstance(observation, str) else json.dumps(observation, ensure_ascii=False, default=str)
    return ToolCallRecord(
        call_id=f"toolkit_{turn}_{index}",
        name=TOOL_NAMES.get(name, name),
        arguments=call.get("function_args"),
        output=output[:OUTPUT_CHARS],
        error=error,
        error_kind="tool_error" if error else None,
    )


def _turn_record(index: int, part: Mapping[str, Any]) -> TurnRecord:
    answer = part.get("model_answer")
    answer = None if answer is None else str(answer)
    calls = [_tool_call(index, i, c) for i, c in enumerate(part.get("tool_use_list") or []) if isinstance(c, Mapping)]
    texts = [str(c.get("content") or "") for c in (part.get("content_list") or []) if isinstance(c, Mapping)]
    hit_cap = answer == TOOL_CAP_ANSWER
    call_rounds = texts if hit_cap else texts[:-1]  # every round but the answering one made calls
    if not call_rounds and calls:
        call_rounds = [""]
    steps = [StepRecord(action_text=text) for text in call_rounds]
    if steps:
        if len(calls) == len(steps):
            for step, (round_index, call) in zip(steps, enumerate(calls), strict=False):
                call.round_index = round_index
                step.tool_calls = [call]
        else:
            steps[0].tool_calls = calls
    if not hit_cap:
        steps.append(StepRecord(action_text=answer or "", final_answer=answer))
    return TurnRecord(index=index, steps=steps, final_answer=answer, hit_tool_cap=hit_cap)


def episode_from_response(row: Mapping[str, Any]) -> EpisodeRecord:
    """Our episode record of one toolkit response row."""
    turns = [_turn_record(i, part) for i, part in enumerate(response_turns(row))]
    return EpisodeRecord(task_id=_row_id(row), turns=turns, metadata={"source": "official toolkit"})


def harness_error(row: Mapping[str, Any]) -> str | None:
    """The toolkit's own failure (written as the answer), if a turn has one: ``toolkit <kind>: <rest>``,
    so ``vtb_app.errors.error_kind`` groups it by the harness's kind (or the exception it quotes)."""
    for part in response_turns(row):
        answer = str(part.get("model_answer") or "")
        kind = next((prefix for prefix in HARNESS_ERRORS if answer.startswith(prefix)), None)
        if kind is not None:
            return f"toolkit {kind.rstrip(':')}: {answer[len(kind) :].strip()}"[:2000]
    return None


def row_problem(row: Mapping[str, Any]) -> str | None:
    """What makes a response row unreadable (a field of the wrong type), as a ``ToolkitRowError`` message."""
    turns = row.get("turns")
    if turns is not None and not (isinstance(turns, list) and all(isinstance(t, Mapping) for t in turns)):
        return f"ToolkitRowError: turns is a {type(turns).__name__}, not a list of objects"
    for index, part in enumerate(response_turns(row)):
        for field in ("tool_use_list", "content_list"):  # the toolkit writes {} for both with tools off
            value = part.get(field)
            if value and not isinstance(value, list):
                return f"ToolkitRowError: turn {index}: {field} is a {type(value).__name__}, not a list"
    return None


class ToolkitVerdicts:
    """A judge backend that answers with the toolkit's recorded judge replies.

    It renders our judge prompt for every (turn, rubric) the toolkit judged and returns the
    toolkit's raw reply for it, so ``Judge`` parses it (leniently) exactly as a live reply; a
    prompt the toolkit did not judge gets a ``BackendError`` (``judge_error``).
    """

    def __init__(self, name: str = "toolkit"):
        self.judge_id = f"toolkit:{name}"
        self._replies: dict[str, str | BackendError] = {}

    def add(self, task: Task, answers: Sequence[str | None], judge_row: Mapping[str, Any]) -> int:
        """Register the replies of one judge-results row; returns how many rubrics they cover."""
        per_turn = judge_row.get("judge_result")
        if not isinstance(per_turn, list):  # unreadable: its rubrics stay unjudged (judge_error)
            per_turn = []
        if per_turn and isinstance(per_turn[0], Mapping):
            per_turn = [per_turn]  # single-turn layout
        added = 0
        for t, (turn, results) in enumerate(zip(task.turns, per_turn, strict=False)):
            rubrics = {rubric.id: rubric for rubric in turn.rubrics}
            answer = answers[t] if t < len(answers) else None
            for result in results if isinstance(results, list) else []:
                rubric = rubrics.get(str(result.get("rubric_id"))) if isinstance(result, Mapping) else None
                if rubric is None or answer is None:
                    continue
                reply = result.get("judge_result")
                reply = reply if isinstance(reply, str) else json.dumps(reply)
                prompt = render(
                    RUBRIC_JUDGE_TEMPLATE,
                    question=turn.prompt,
                    golden_answer=turn.golden_answer,
                    criterion=rubric.description,
                    answer=answer,
                )
                # The toolkit writes a judge outage as this placeholder with "Not Met": it is a judge_error.
                self._replies[prompt] = (
                    BackendError(f"the toolkit's judge failed ({TOOLKIT_JUDGE_FAILURE!r})")
                    if TOOLKIT_JUDGE_FAILURE in reply
                    else reply
                )
                added += 1
        return added

    def complete_many(
        self, prompts: Sequence[str], schema: Mapping[str, Any] | None = None
    ) -> list[str | BackendError]:
        return [
            self._replies.get(p) or BackendError("the toolkit's judge results have no verdict for this rubric")
            for p in prompts
        ]


def without_checks(task: Task) -> Task:
    """The task with its rubrics' exact checks removed, so that the toolkit's verdicts decide every rubric."""
    turns = tuple(replace(turn, rubrics=tuple(replace(r, check=None) for r in turn.rubrics)) for turn in task.turns)
    return replace(task, turns=turns)


def import_toolkit(
    responses: Sequence[Mapping[str, Any]],
    tasks: Mapping[str, Task],
    out: Path,
    *,
    config: Mapping[str, Any],
    judge: Judge,
    judge_rows: Mapping[str, Mapping[str, Any]] | None = None,
    scoring: RewardConfig = RewardConfig(),
) -> tuple[int, list[str], int]:
    """Append one record per response row not yet imported: (ok, the error records' messages, already done).

    A harness failure or an unreadable row (``row_problem``) becomes an ``error`` record; the rest import."""
    digest = write_config(out, {**config, "judge": judge.judge_id, "scoring": scoring.scoring()})
    done = ok_keys(out / RECORDS_FILE)  # the toolkit's verdicts are fixed: `vtb judge` retries its judge errors
    reward = episode_reward(judge, scoring)
    identity = {
        "agent": config["agent"]["name"],
        "model": config["model"],
        "judge": judge.judge_id,
        "ablation": config["ablation"],
        "preset": "official toolkit",
    }
    ok, errors = 0, []
    with RunLog(out / RECORDS_FILE) as log:
        for row in responses:
            task = tasks[_row_id(row)]
            key = record_key(task.id, 0)
            if key in done:
                continue
            base = {
                "key": key,
                "task_id": task.id,
                "sample": 0,
                "config_hash": digest,
                **identity,
                "task": task_summary(task),
            }
            failure = row_problem(row) or harness_error(row)
            if failure:
                log.append({**base, "status": "error", "error": failure})
                errors.append(failure)
                continue
            episode = episode_from_response(row)
            judge_row = (judge_rows or {}).get(task.id)
            judged_task = task
            if isinstance(judge.backend, ToolkitVerdicts):
                judged_task = without_checks(task)
                if judge_row is not None:
                    judge.backend.add(task, episode.final_answers, judge_row)
            score = score_episode(reward, judged_task, episode)  # judges each rubric once; its verdicts are kept
            judged = reward_judged(score.details, judge, scoring)
            if judged is None:  # the reward failed before judging
                judged = judge_episode(judged_task, episode.final_answers, judge, scoring)
            played = PlayedEpisode(episode, {}, False, score.reward, score.components, score.error)
            toolkit = {k: judge_row.get(k) for k in ("score", "accuracy")} if judge_row is not None else None
            log.append(
                {
                    **base,
                    **ok_record(played, judged),
                    "toolkit": toolkit,
                    "usage": {"toolkit_num_tool_calls": [p.get("num_tool_calls") for p in response_turns(row)]},
                }
            )
            ok += 1
    return ok, errors, len(done)


def register(subparsers: argparse._SubParsersAction) -> None:
    im = subparsers.add_parser(
        "import-toolkit", help="the official toolkit's output JSON as a run directory (for vtb judge / vtb report)"
    )
    im.add_argument("responses", help="the toolkit's model-response JSON (run_model_response_*_turn.py output)")
    im.add_argument(
        "--judge-results",
        default=None,
        help="the toolkit's judge JSON for those responses (run_judge_*_turn.py output)",
    )
    im.add_argument("--judge", default=None, help="judge the answers here instead: exact | openai:MODEL@URL | hf:PATH")
    im.add_argument(
        "--toolkit-judge", default="toolkit", help="name of the judge model the toolkit used (recorded as toolkit:NAME)"
    )
    im.add_argument(
        "--data",
        required=True,
        help="the tasks the toolkit ran (rubrics, prompts, images): parquet, toolkit dir, tasks.jsonl, ...",
    )
    im.add_argument("--model", default=None, help="the model the toolkit ran (default: the responses file's name)")
    im.add_argument("--no-tools", action="store_true", help="the toolkit ran with tool use off (a text-only run)")
    im.add_argument("--critical-rule", default="weight>=4", choices=("weight>=4", "flag", "either"))
    im.add_argument("--multi-turn", default="pooled", choices=("pooled", "per_turn"))
    im.add_argument("--out", required=True, help="run directory to write (re-running adds only rows not yet imported)")
    im.set_defaults(func=run_import)


def run_import(args: argparse.Namespace) -> int:
    from vtb_app.evaluation.specs import judge_from_spec
    from vtb_env.loaders import load_tasks

    if (args.judge_results is None) == (args.judge is None):
        print(
            "error: give exactly one of --judge-results (the toolkit's verdicts) and --judge (judge here)",
            file=sys.stderr,
        )
        return 2
    out = Path(args.out)
    responses = load_rows(args.responses, "model-response")  # ToolkitFormatError: one line (vtb_app.cli)
    judge_rows = {_row_id(r): r for r in load_rows(args.judge_results, "judge-results")} if args.judge_results else None
    tasks = {task.id: task for task in load_tasks(args.data)}
    missing = sorted({_row_id(r) for r in responses} - set(tasks))
    if missing:
        print(
            f"error: {len(missing)} of the toolkit's tasks are not in {args.data!r} (e.g. {missing[0]})",
            file=sys.stderr,
        )
        return 2
    if args.judge_results:
        judge = Judge(ToolkitVerdicts(args.toolkit_judge))
    else:
        judge = judge_from_spec(args.judge, cache_path=out / "judge_cache.sqlite" if args.judge != "exact" else None)
    model = args.model or Path(args.responses).stem
    config = {
        "name": out.name,
        "data": args.data,
        "limit": None,
        "tasks": len(responses),
        "task_index": task_index(tasks[_row_id(r)] for r in responses),
        "agent": {"name": model, "class": "official toolkit"},
        "model": model,
        "judge_spec": args.judge or f"toolkit results {Path(args.judge_results).name}",
        "ablation": "no_tools" if args.no_tools else "strong",
        "imported_from": {
            "responses": str(Path(args.responses).resolve()),
            "judge_results": str(Path(args.judge_results).resolve()) if args.judge_results else None,
        },
    }
    ok, errors, skipped = import_toolkit(
        responses,
        tasks,
        out,
        config=config,
        judge=judge,
        judge_rows=judge_rows,
        scoring=RewardConfig(critical_rule=args.critical_rule, multi_turn=args.multi_turn),
    )
    summary = f"{error_summary(errors)}; {skipped} already imported"
    print(f"imported {ok} toolkit episodes ({summary}) into {out / RECORDS_FILE}")
    print_failures(*run_failures(latest_records(out / RECORDS_FILE).values()))  # each kind's first message
    print_comparison([out])
    return 0


def error_summary(errors: Sequence[str]) -> str:
    """``3 errors: 2 x API Error, 1 x ToolkitRowError`` (most frequent first), or ``0 errors``."""
    counts = Counter(error_kind(message) for message in errors)
    kinds = ", ".join(f"{count} x {kind}" for kind, count in counts.most_common())
    return f"{len(errors)} errors" + (f": {kinds}" if kinds else "")

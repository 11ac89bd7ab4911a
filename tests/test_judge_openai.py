"""The OpenAI-compatible judge backend against a real chat-completions server on 127.0.0.1."""

import json
import threading
import time

import pytest

from tests.support.chat_server import ChatServer
from vtb_env.tasks import Rubric, Task, Turn
from vtb_rewards.judge import JUDGE_ERROR, MET, NOT_MET, Judge, JudgeItem, OpenAIChatBackend, VerdictCache, judge_task
from vtb_rewards.judge.prompt import RUBRIC_JUDGE_TEMPLATE
from vtb_rewards.scoring import score_task


def verdict_json(status):
    return json.dumps({"explanation": "checked", "judge_result": status})


def by_rubric(request):
    """A judge that reads the rubric from the prompt: rubrics mentioning '$16' are Met."""
    prompt = request["messages"][0]["content"]
    criterion = prompt.split("**Rubric Criterion:**")[1].split("**Model Answer:**")[0]
    return {"content": f"```json\n{verdict_json(MET if '$16' in criterion else NOT_MET)}\n```"}


def backend(server, **kwargs):
    options = {"max_concurrency": 4, "timeout_s": 5.0, "retries": 2}
    return OpenAIChatBackend("judge-model", server.base_url, **{**options, **kwargs})


def items(n, answer="It costs $16."):
    return [JudgeItem("How much?", "$16", f"rubric {i}: reports $16", answer) for i in range(n)]


def test_prompt_is_the_papers_template_and_temperature_zero():
    with ChatServer(by_rubric) as server:
        verdicts = Judge(backend(server)).judge([JudgeItem("Q?", "gold", "The model reports $16", "ans")])
        request = server.requests[0]
    assert verdicts[0].status == MET
    assert request["temperature"] == 0.0 and request["model"] == "judge-model"
    prompt = request["messages"][0]["content"]
    assert prompt.startswith("You are an expert evaluator tasked with judging whether a model's answer meets")
    assert (
        "**Question:** Q?\n**Golden Answer:** gold\n**Rubric Criterion:** The model reports $16\n**Model Answer:** ans"
        in prompt
    )
    assert prompt.endswith('"judge_result": "Met" or "Not Met"\n}\n```')
    assert RUBRIC_JUDGE_TEMPLATE.count("{question}") == 1


def test_task_judging_end_to_end_scores_from_server_verdicts():
    rubrics = (
        Rubric(id="a", description="The model reports $16 as the price.", weight=5),
        Rubric(id="b", description="The model explains its steps.", weight=2),
        Rubric(id="c", description="Exact", weight=3, check={"type": "number", "value": 16}),
    )
    task = Task(id="pizza", turns=(Turn(prompt="How much?", golden_answer="$16", rubrics=rubrics),))
    with ChatServer(by_rubric) as server:
        verdicts = judge_task(Judge(backend(server)), task, ["$16"])
        assert len(server.requests) == 2  # the rubric with an exact check never reaches the judge
    assert {k: v.status for k, v in verdicts[0].items()} == {"a": MET, "b": NOT_MET, "c": MET}
    assert verdicts[0]["c"].source == "check"
    result = score_task(task, verdicts)
    assert result.score == pytest.approx(8 / 10) and result.passed


@pytest.mark.parametrize(
    "reply", ["I think it is fine.", '{"judge_result": "Maybe"}', "", '"judge_result": "Met" or "Not Met"']
)
def test_garbage_replies_are_judge_errors_not_not_met(reply):
    with ChatServer(lambda request: {"content": reply}) as server:
        verdict = Judge(backend(server)).judge(items(1))[0]
    assert verdict.status == JUDGE_ERROR and verdict.error


def test_server_errors_are_retried_then_succeed():
    calls = {"n": 0}
    lock = threading.Lock()

    def flaky(request):
        with lock:
            calls["n"] += 1
            n = calls["n"]
        return {"status": 500} if n <= 2 else {"content": verdict_json(MET)}

    with ChatServer(flaky) as server:
        verdict = Judge(backend(server, retries=2)).judge(items(1))[0]
        assert len(server.requests) == 3
    assert verdict.status == MET


def test_persistent_500_and_4xx_become_judge_errors_with_bounded_attempts():
    with ChatServer(lambda request: {"status": 500}) as server:
        verdict = Judge(backend(server, retries=2)).judge(items(1))[0]
        assert len(server.requests) == 3
    assert verdict.status == JUDGE_ERROR and "500" in verdict.error
    with ChatServer(lambda request: {"status": 400, "body": {"error": {"message": "bad"}}}) as server:
        verdict = Judge(backend(server, retries=2)).judge(items(1))[0]
        assert len(server.requests) == 1  # a client error is not retried
    assert verdict.status == JUDGE_ERROR


def test_timeouts_become_judge_errors():
    with ChatServer(lambda request: {"content": verdict_json(MET)}, latency_s=0.5) as server:
        judge = Judge(backend(server, timeout_s=0.1, retries=1))  # openai 3's first client loads for ~2 s
        started = time.perf_counter()
        verdict = judge.judge(items(1))[0]
        elapsed = time.perf_counter() - started
    assert verdict.status == JUDGE_ERROR and "Timeout" in verdict.error
    assert elapsed < 1.0


def test_concurrency_is_bounded():
    active = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def slow(request):
        with lock:
            active["now"] += 1
            active["peak"] = max(active["peak"], active["now"])
        time.sleep(0.05)
        with lock:
            active["now"] -= 1
        return {"content": verdict_json(MET)}

    with ChatServer(slow) as server:
        started = time.perf_counter()
        verdicts = Judge(backend(server, max_concurrency=3)).judge(items(12))
        elapsed = time.perf_counter() - started
    assert all(v.status == MET for v in verdicts)
    assert active["peak"] == 3
    assert elapsed < 12 * 0.05  # ran in parallel


def test_cache_second_scoring_makes_zero_requests_and_errors_are_retried(tmp_path):
    db = tmp_path / "verdicts.sqlite"
    state = {"fail": True}

    def respond(request):
        if state["fail"] and "rubric 0:" in request["messages"][0]["content"]:
            return {"content": "no idea"}
        return {"content": verdict_json(MET)}

    with ChatServer(respond) as server:
        first = Judge(backend(server), cache=VerdictCache(db)).judge(items(5))
        assert len(server.requests) == 5
        assert [v.status for v in first] == [JUDGE_ERROR] + [MET] * 4
        state["fail"] = False
        second_judge = Judge(backend(server), cache=VerdictCache(db))  # a new process would reopen the file
        second = second_judge.judge(items(5))
        assert len(server.requests) == 6  # only the earlier judge_error was asked again
        assert [v.status for v in second] == [MET] * 5
        assert second_judge.stats.cache_hits == 4
        third = Judge(backend(server), cache=VerdictCache(db)).judge(items(5))
        assert len(server.requests) == 6 and all(v.source == "cache" for v in third)
        Judge(backend(server), cache=VerdictCache(db)).judge(items(5, answer="It costs $17."))
        assert len(server.requests) == 11  # a different answer is a different key


def test_k_vote_majority_and_ties():
    replies = iter([MET, NOT_MET, MET, MET, NOT_MET])
    lock = threading.Lock()

    def respond(request):
        with lock:
            return {"content": verdict_json(next(replies))}

    with ChatServer(respond) as server:
        verdict = Judge(backend(server, max_concurrency=1), votes=3).judge(items(1))[0]
        assert len(server.requests) == 3
        assert verdict.status == MET
        tie = Judge(backend(server, max_concurrency=1), votes=2).judge(items(1))[0]
    assert tie.status == JUDGE_ERROR and "tied" in tie.error


def test_no_answer_and_no_backend():
    judge = Judge(backend=None)
    no_answer, unjudgeable, exact = judge.judge(
        [
            JudgeItem("q", "g", "c", None),
            JudgeItem("q", "g", "c", "some answer"),
            JudgeItem("q", "g", "c", "42", check={"type": "number", "value": 42}),
        ]
    )
    assert no_answer.status == NOT_MET and no_answer.source == "no_answer"
    assert unjudgeable.status == JUDGE_ERROR
    assert exact.status == MET
    bad_spec = judge.judge([JudgeItem("q", "g", "c", "x", check={"type": "regex"})])[0]
    assert bad_spec.status == JUDGE_ERROR and bad_spec.source == "check"

"""Verdicts and lenient parsing of a judge's reply.

A reply counts when a ``judge_result`` can be read from it: a JSON object (bare, inside a code
fence, or followed by trailing text; case-insensitive keys), or, failing JSON, a
``judge_result: ...`` line. Every path applies ONE rule to the value (``status_of``): after
lower-casing, turning ``_`` into spaces, collapsing whitespace and stripping surrounding
quotes, asterisks and punctuation, it must be exactly ``met`` or ``not met``. Any qualified
value ("Met (partially)", "Partially Met", "Met/Not Met") is ``judge_error``, never a guess and
never a silent "Not Met".

Reasoning models think before they answer: everything up to the last ``</think>`` (a
``<think>…</think>`` block, or a reasoning prefix whose opening tag the chat template added) is
dropped before the reply is read (``final_reply``), so a template quoted or a draft verdict written
while thinking never decides; the final JSON does. A reply that opens ``<think>`` and never closes
it was cut off while thinking: a ``judge_error``. Backends pass only the message's ``content``,
never an OpenAI-style ``reasoning_content`` / ``reasoning`` field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

import json_repair

Status = Literal["Met", "Not Met", "judge_error"]
MET: Status = "Met"
NOT_MET: Status = "Not Met"
JUDGE_ERROR: Status = "judge_error"


@dataclass(frozen=True)
class Verdict:
    """One judgment. ``source``: "llm", "cache", "check" (exact rule) or "no_answer"."""

    status: Status
    explanation: str = ""
    source: str = "llm"
    error: str | None = None

    @property
    def met(self) -> bool:
        return self.status == MET

    @property
    def is_error(self) -> bool:
        return self.status == JUDGE_ERROR

    @classmethod
    def failure(cls, error: str, source: str = "llm") -> "Verdict":
        return cls(JUDGE_ERROR, source=source, error=error)


_RESULT_LINE = re.compile(r"""["']?judge_result["']?\s*[:=]\s*["']?([^"'\n}]*)""", re.IGNORECASE)
_OBJECT = re.compile(r"\{.*?\}", re.DOTALL)
_THINK_END = re.compile(r"</think\s*>", re.IGNORECASE)
_THINK_START = re.compile(r"<think\s*>", re.IGNORECASE)
_TEMPLATE_ECHO = re.compile(r"""["']met["']\s+or\s+["']not met["']""", re.IGNORECASE)


# The JSON schema of a verdict reply, sent as ``response_format`` where the server supports it.
VERDICT_SCHEMA = {
    "name": "rubric_verdict",
    "schema": {
        "type": "object",
        "properties": {"explanation": {"type": "string"}, "judge_result": {"type": "string", "enum": [MET, NOT_MET]}},
        "required": ["explanation", "judge_result"],
        "additionalProperties": False,
    },
}


def status_of(value: object) -> Status | None:
    """The one parsing rule for a ``judge_result`` value (see the module docstring)."""
    if not isinstance(value, str):
        return None
    norm = " ".join(value.replace("_", " ").split()).lower().strip(" \t\"'`*.:;!")
    return {"met": MET, "not met": NOT_MET}.get(norm)


def _from_object(obj: object) -> Verdict | None:
    if not isinstance(obj, dict):
        return None
    fields = {str(key).strip().lower(): value for key, value in obj.items()}
    status = status_of(fields.get("judge_result"))
    if status is None:
        return None
    return Verdict(status, explanation=str(fields.get("explanation", "")))


def _candidates(text: str) -> list[Verdict]:
    """Verdicts from strict JSON objects; failing that, a repaired object; failing that, key lines."""
    strict = []
    for match in _OBJECT.finditer(text):
        try:
            strict.append(_from_object(json.loads(match.group())))
        except json.JSONDecodeError:
            continue
    found = [v for v in strict if v is not None]
    if found:
        return found
    start = text.find("{")
    if start >= 0:
        try:
            repaired = _from_object(json_repair.loads(text[start:]))
        except Exception:  # json_repair gives up in many ways
            repaired = None
        if repaired is not None:
            return [repaired]
    return [
        Verdict(status, explanation=text.strip()[:500])
        for m in _RESULT_LINE.finditer(text)
        if (status := status_of(m.group(1)))
    ]


class UnfinishedThinking(ValueError):
    """A reply that opened ``<think>`` and never closed it (cut off by the token bound)."""


def final_reply(text: str) -> str:
    """The reply without its reasoning: the text after the last ``</think>``.

    Raises ``UnfinishedThinking`` when a ``<think>`` is never closed (nothing after it is final).
    """
    ends = list(_THINK_END.finditer(text))
    if ends:
        return text[ends[-1].end() :]
    if _THINK_START.search(text):
        raise UnfinishedThinking(
            "the judge's reasoning never finished (<think> without </think>); raise the token bound"
        )
    return text


def parse_verdict(text: str | None) -> Verdict:
    """Read a judge reply; returns a ``judge_error`` verdict (with the reason) when it cannot."""
    try:
        text = final_reply(text or "")
    except UnfinishedThinking as exc:
        return Verdict.failure(str(exc))
    if not text.strip():
        return Verdict.failure("empty judge reply")
    if _TEMPLATE_ECHO.search(text):
        return Verdict.failure(f"reply echoes the output template: {text.strip()[:200]!r}")
    found = _candidates(text)
    statuses = {v.status for v in found}
    if len(statuses) == 1:
        return found[0]
    reason = "contradictory judge_result values" if statuses else "no judge_result in reply"
    return Verdict.failure(f"{reason}: {text.strip()[:200]!r}")

"""Exact programmatic rubric checks: a verdict without an LLM judge.

A rubric's ``check`` is a JSON object; ``type`` selects the rule:

- ``{"type": "number", "value": 13.5, "abs_tol": 0.01, "rel_tol": 0.0}``: some number in the
  answer equals ``value`` within tolerance (``1,234.5``, ``$13``, ``-4``, ``12%`` all parse).
- ``{"type": "text", "any_of": ["Lisbon"], "none_of": ["Porto"]}``: one of ``any_of`` occurs as a
  whole word/phrase (case and spacing insensitive) and none of ``none_of`` does.
- ``{"type": "choice", "answer": "B", "options": ["A", "B", "C"]}``: the answer names the right
  option and no other.
- ``{"type": "clarify", "none_of": ["42"]}``: the answer asks a question and commits to none of
  the values that would only be right with the missing information.

Spraying defence: an answer with more than ``MAX_NUMBERS`` distinct numbers fails a number check.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping

MAX_NUMBERS = 12
_NUMBER = re.compile(r"(?<![\w.])[-−]?\$?\d[\d,]*(?:\.\d+)?|(?<![\w.])[-−]?\$?\.\d+")


class CheckSpecError(ValueError):
    """A rubric's check object is malformed."""


def numbers_in(text: str) -> list[float]:
    """All numbers written in ``text``, thousands separators and currency signs removed."""
    values = []
    for match in _NUMBER.finditer(text):
        token = match.group().replace("−", "-").replace("$", "").replace(",", "")
        try:
            values.append(float(token))
        except ValueError:
            continue
    return values


def _normalize(text: str) -> str:
    """Lower-case words separated by single spaces; a dot survives only inside a number (3.5)."""
    words = re.findall(r"\d+(?:\.\d+)?%?|[a-z0-9]+", text.lower())
    return " " + " ".join(words) + " "


def _mentions(answer_norm: str, phrase: str) -> bool:
    return _normalize(phrase) in answer_norm


def _check_number(answer: str, spec: Mapping[str, Any]) -> bool:
    target = float(spec["value"])
    abs_tol = float(spec.get("abs_tol", 1e-6))
    rel_tol = float(spec.get("rel_tol", 0.0))
    found = numbers_in(answer)
    if len(set(found)) > MAX_NUMBERS:
        return False
    return any(math.isclose(value, target, rel_tol=rel_tol, abs_tol=abs_tol) for value in found)


def _check_text(answer: str, spec: Mapping[str, Any]) -> bool:
    norm = _normalize(answer)
    any_of = spec.get("any_of") or []
    if not any_of:
        raise CheckSpecError("text check needs a non-empty 'any_of'")
    hit = any(_mentions(norm, phrase) for phrase in any_of)
    return hit and not any(_mentions(norm, phrase) for phrase in spec.get("none_of", ()))


def _check_choice(answer: str, spec: Mapping[str, Any]) -> bool:
    right = spec["answer"]
    wrong = [option for option in spec.get("options", ()) if option != right]
    return _check_text(answer, {"any_of": [right], "none_of": wrong})


def _check_clarify(answer: str, spec: Mapping[str, Any]) -> bool:
    norm = _normalize(answer)
    asks = "?" in answer
    return asks and not any(_mentions(norm, phrase) for phrase in spec.get("none_of", ()))


_CHECKS = {"number": _check_number, "text": _check_text, "choice": _check_choice, "clarify": _check_clarify}


def run_check(spec: Mapping[str, Any], answer: str) -> bool:
    """Evaluate one check against a final answer; raises CheckSpecError for a bad spec."""
    kind = spec.get("type") if isinstance(spec, Mapping) else None
    rule = _CHECKS.get(kind)  # type: ignore[arg-type]
    if rule is None:
        raise CheckSpecError(f"unknown check type {kind!r}; known: {sorted(_CHECKS)}")
    try:
        return rule(answer or "", spec)
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, CheckSpecError):
            raise
        raise CheckSpecError(f"malformed {kind} check {dict(spec)!r}: {exc}") from exc

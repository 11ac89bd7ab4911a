"""Each synthetic turn's closed world: every value a correct answer may state.

The generator knows all of it: the numbers, times and dates of the dialogue so far (prompts and the
honest answers before), the facts the turns read from the images, every rubric's expected value, the
intermediate values of the reference computation (every sub-expression of its calculator calls) and of
the other sound ways to compute the asked operation over the asked rows (``Ask.working``, written by
each builder). The exact checks (``vtb_rewards.checks``) fail a check when the answer states a value
of its kind outside this world, so a hedge ("16 (or 17)"), a spray of candidates or a blind guess pays
nothing, whatever its spelling: docs/rewards.md.

The world is stored on the task (``Turn.world``), a plain JSON object:

- ``numbers``, ``times`` (minutes after midnight), ``dates`` (ISO): the allowed values;
- ``working``: this turn's intermediate values (a subset of ``numbers``; what an answer shows its working with);
- ``evidence``: the values of this turn that decide it (facts read, expected numbers): a direction or
  verdict word counts only beside one of them, so a coin flip ("It increased.") earns nothing;
- ``rival_names``: the names of the shown scene kinds' vocabularies that no turn so far reads, asks or
  answers about; a name check fails when the answer names one;
- ``clarify_rivals``: the missing details of the scene kinds of other domains; a clarifying question
  naming one asks about another scene;
- ``dialogue``: the user's prompts so far; an answer that quotes them states nothing by quoting.

A value the pages give away is bound to the answer (``bind_giveaways``): when every value of a check's kind
that the documents shown so far print is in the turn's world (a ticket prints one date; a superlative reads
every row), a transcription of the page would meet the check without reading the question, so the check is
Met only with the turn's critical checks (``"given"``).
"""

from __future__ import annotations

import ast
import operator
from typing import Any, Iterable

from vtb_env.answer_values import (
    DATE,
    NUMBER,
    TIME,
    WORLD_KEYS,
    Value,
    accounted_for,
    allowed_values,
    checked_kinds,
    fold,
    scan,
)
from vtb_env.synth.blueprints import ROW_WORDS, Ask, Blueprint
from vtb_env.synth.scenes import DOMAIN_KINDS, KINDS, Scene
from vtb_env.synth.templates import CLARIFY_DETAIL, VAGUE

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_PRECISION = 6  # decimals kept: the checks compare at the precision the answer writes


def subexpression_values(expression: str) -> list[float]:
    """The value of every sub-expression of an arithmetic expression (a reference calculator call)."""
    values: list[float] = []

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            result = float(node.value)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            result = -walk(node.operand) if isinstance(node.op, ast.USub) else walk(node.operand)
        elif isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            result = _OPERATORS[type(node.op)](walk(node.left), walk(node.right))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            result = walk(node.left) ** walk(node.right)
        else:
            raise ValueError(f"not arithmetic: {ast.dump(node)}")
        values.append(result)
        return result

    walk(ast.parse(expression, mode="eval"))
    return values


class _Values:
    """The numbers, times and dates collected for one world."""

    def __init__(self) -> None:
        self.kinds: dict[str, set[Any]] = {NUMBER: set(), TIME: set(), DATE: set()}

    def add_number(self, value: float) -> None:
        self.kinds[NUMBER].update({round(float(value), _PRECISION), round(-float(value), _PRECISION)})

    def add_text(self, text: str) -> None:
        for value in scan(fold(text)):
            if value.kind == NUMBER:
                self.add_number(float(value.value))
            else:
                self.kinds[value.kind].add(value.value)

    def as_json(self) -> dict[str, list[Any]]:
        return {
            "numbers": sorted(self.kinds[NUMBER]),
            "times": sorted(self.kinds[TIME]),
            "dates": sorted(self.kinds[DATE]),
        }


def _check_values(ask: Ask) -> Iterable[str | float]:
    for rubric in ask.rubrics:
        check = rubric.check
        if check.get("type") == "number":
            yield float(check["value"])
        for phrase in check.get("any_of", ()):
            yield str(phrase)


def _facts(blueprint: Blueprint, ask: Ask, into: _Values) -> None:
    """The facts ``ask`` reads from the images: printed text, and the value of a non-clock entry."""
    for state, label in ask.reads:
        scene: Scene = blueprint.states[state]
        entry = scene.entry(label)
        into.add_text(entry.text)
        if scene.kind.name not in ("timetable", "ticket"):
            into.add_number(entry.value)


def intermediate_values(ask: Ask) -> list[float]:
    """The intermediate values of the turn's computation: every sub-expression of its reference calculator
    calls and the builder's other sound paths (``Ask.working``)."""
    values = [
        value
        for call in ask.tool_calls
        if call.get("tool") == "calculator"
        for value in subexpression_values(str(call["arguments"]["expression"]))
    ]
    return values + [float(v) for v in ask.working]


def _add_turn(blueprint: Blueprint, ask: Ask, into: _Values) -> None:
    into.add_text(ask.prompt)
    into.add_text(ask.golden)
    for value in _check_values(ask):
        into.add_number(value) if isinstance(value, float) else into.add_text(value)
    _facts(blueprint, ask, into)
    for value in intermediate_values(ask):
        into.add_number(value)


def _words(text: str) -> str:
    return " " + " ".join(fold(text).lower().split()) + " "


def rival_names(blueprint: Blueprint, asks: list[Ask]) -> list[str]:
    """The names of the shown scene kinds' vocabularies that no turn so far reads, asks or answers about:
    a name check fails when the answer names one (a second entity for the asked one)."""
    vocabulary = {label for scene in blueprint.states for label in scene.kind.labels}
    said = "".join(_words(text) for ask in asks for text in (ask.prompt, ask.golden))
    read = "".join(_words(label) for ask in asks for _state, label in ask.reads)
    allowed = said + read
    return sorted(name for name in vocabulary if _words(name) not in allowed)


def clarify_rivals(kind: str) -> list[str]:
    """The missing details of scene kinds in other domains that name a thing: a phrase ("which team") or a
    row noun ("specimen", "stops"), never a common word ("order", "start"), and never a word this scene
    uses itself ("board" names a timetable's stop, but a quote board is a quote board)."""
    own = set(CLARIFY_DETAIL.get(kind, ()))
    domain = next((d for d, kinds in DOMAIN_KINDS.items() if kind in kinds), None)
    scene_words = ""
    if kind in KINDS:
        kind_of = KINDS[kind]
        scene_words = _words(" ".join((kind_of.what, *kind_of.header, *kind_of.titles)))
    wordings, question, _reply = VAGUE.get(kind, ((), "", ""))
    scene_words += _words(" ".join((*wordings, question)))
    nouns = {noun for noun, _highest in ROW_WORDS.values()} | {h.lower() for k in KINDS.values() for h in k.header}
    rivals = {
        phrase
        for other_domain, kinds in DOMAIN_KINDS.items()
        if other_domain != domain
        for other in kinds
        for phrase in CLARIFY_DETAIL[other]
        if _words(phrase) not in scene_words and (" " in phrase or {phrase, phrase[:-1], phrase[:-2]} & nouns)
    }
    return sorted(rivals - own)


def turn_worlds(blueprint: Blueprint) -> list[dict[str, Any]]:
    """The closed world of every turn of ``blueprint`` (cumulative: a later turn may restate earlier ones)."""
    values, worlds, dialogue = _Values(), [], []
    for ask in blueprint.asks:
        _add_turn(blueprint, ask, values)
        dialogue.append(ask.prompt)
        evidence = _Values()
        _facts(blueprint, ask, evidence)
        for value in _check_values(ask):
            if isinstance(value, float):
                evidence.add_number(value)
        working = sorted({round(v, _PRECISION) for v in intermediate_values(ask)})
        world: dict[str, Any] = {
            **values.as_json(),
            "working": working,
            "evidence": evidence.as_json(),
            "dialogue": list(dialogue),
            "rival_names": rival_names(blueprint, list(blueprint.asks[: len(dialogue)])),
        }
        if any(r.check.get("type") == "clarify" for r in ask.rubrics):
            world["clarify_rivals"] = clarify_rivals(blueprint.states[0].kind.name)
        worlds.append(world)
    return worlds


def _printed(scenes: Iterable[Scene]) -> list[Value]:
    """The values the documents print in their value column (a label is a name: "S-6" is no rival)."""
    return [value for scene in scenes for entry in scene.entries for value in scan(fold(entry.text))]


def _states(phrase: str, words: str) -> bool:
    return _words(phrase) in words


def transcription_meets(check: dict[str, Any], world: dict[str, Any], shown: list[Scene]) -> bool:
    """Would a transcription of the pages shown so far, of any one of them or of all (a reader who does not
    read the question), meet ``check`` in ``world``?"""
    return any(_transcribed_meets(check, world, pages) for pages in ([*([s] for s in shown), shown]))


def _transcribed_meets(check: dict[str, Any], world: dict[str, Any], scenes: list[Scene]) -> bool:
    """Would a transcription of ``scenes`` (every label and value they print, the question unread) meet
    ``check`` in ``world``? A value check: the pages print its expected value and no value of its kinds
    outside the world (no rival to fail the transcription); a name check: they print its name and none it
    refuses (``none_of``, the world's ``rival_names``). A verdict needs no value of its own, so a page without
    rivals gives it away too."""
    printed = _printed(scenes)
    words = "".join(_words(f"{e.label} {e.text}") for scene in scenes for e in scene.entries)
    kinds = checked_kinds(check)
    refused = [*check.get("none_of", ()), *(() if kinds else world.get("rival_names", ()))]
    if any(_states(phrase, words) for phrase in refused):
        return False
    if not kinds:  # a name
        return any(_states(p, words) for p in check.get("any_of", ()))
    allowed = {kind: allowed_values(world[WORLD_KEYS[kind]], kind) for kind in kinds}
    if any(v.kind in kinds and not accounted_for(v, allowed[v.kind]) for v in printed):
        return False  # a rival: the transcription states a value outside the world
    if check.get("type") == "number":
        target = float(check["value"])
        return any(v.kind == NUMBER and abs(float(v.value) - target) <= check.get("abs_tol", 1e-6) for v in printed)
    phrases = [str(p) for p in check.get("any_of", ())]
    values = {v.value for p in phrases for v in scan(fold(p))}
    return not values or any(v.value in values for v in printed) or any(_states(p, words) for p in phrases)


def bind_giveaways(blueprint: Blueprint, worlds: list[dict[str, Any]]) -> list[tuple[dict[str, Any], ...]]:
    """Every turn's rubric checks, a check that a transcription of the pages meets (``transcription_meets``)
    bound to the turn's other critical checks: it is Met only with them (``"given"``), so reading a page
    without the question earns nothing from it, and an honest answer keeps every credit it had. A critical
    check with no other critical check to be bound to stays as it is: ``giveaways`` finds it."""
    bound, shown = [], []
    for ask, world in zip(blueprint.asks, worlds, strict=True):
        shown += [blueprint.states[state] for state in ask.new_states]
        checks = []
        for rubric in ask.rubrics:
            check = dict(rubric.check)
            if transcription_meets(check, world, shown):
                given = [other.check for other in ask.rubrics if other.critical and other is not rubric]
                check = {**check, "given": given} if given else check
            checks.append(check)
        bound.append(tuple(checks))
    return bound


def giveaways(blueprint: Blueprint) -> list[str]:
    """The rubrics of ``blueprint`` that a transcription of its pages meets even after ``bind_giveaways``: a
    generator must not write them (``build_blueprint`` draws the task again)."""
    worlds = turn_worlds(blueprint)
    found, shown = [], []
    for ask, world, checks in zip(blueprint.asks, worlds, bind_giveaways(blueprint, worlds), strict=True):
        shown += [blueprint.states[state] for state in ask.new_states]
        found += [
            rubric.description
            for rubric, check in zip(ask.rubrics, checks, strict=True)
            if "given" not in check and transcription_meets(check, world, shown)
        ]
    return found

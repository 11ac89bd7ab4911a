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
- ``dialogue``: the user's prompts so far; an answer that quotes them states nothing by quoting;
- ``facts``: what the pages shown so far print, name by name (``printed_facts``): a value attributed to its
  own name is a true fact, working that is never a rival (the claim model, ``vtb_rewards.claims``).
- ``pictures``: how many pictures are shown so far, their row counts and row nouns (``pictures``): "image 2"
  and "6 rows" are references to them, not values (``vtb_rewards.reading``).

A value the pages give away is bound to the answer (``bind_giveaways``): when a transcription (of a page
shown so far, of all of them, or of one row the turn does not read) would meet a check without reading the
question (a ticket prints one date; a superlative reads every row, so no row is a rival), the check is Met
only with the turn's critical checks (``"given"``). A turn whose critical checks a transcription meets is
never asked (``giveaways``; ``stream.build_blueprint`` draws the pair again).
"""

from __future__ import annotations

import ast
import operator
from dataclasses import replace
from typing import Any, Iterable, Iterator

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
from vtb_env.synth.blueprints import ROW_WORDS, Ask, Blueprint, RubricSpec
from vtb_env.synth.kinds import DOMAIN_KINDS, KINDS
from vtb_env.synth.scenes import Scene
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


def _beside_facts(blueprint: Blueprint, asks: list[Ask], into: _Values) -> None:
    """What an honest answer says about the facts read so far: a read row's printed extra (a lab test's
    reference range, "(60-170)") and, for a row read in two or more snapshots, each change as a difference and
    as a percentage ("a 7.5% rise"). A picture's ordinal and row count are no values of the world: they are
    references (``pictures``), read only as "image 2" or "6 rows", so a hedge cannot offer them as a
    candidate ("0.0 (or 1.0) mm")."""
    by_label: dict[str, list[float]] = {}
    for state, label in sorted({read for ask in asks for read in ask.reads}):
        entry = blueprint.states[state].entry(label)
        into.add_text(entry.extra)
        if blueprint.states[state].kind.name not in ("timetable", "ticket"):
            by_label.setdefault(label, []).append(entry.value)
    for values in by_label.values():
        for i, before in enumerate(values):
            for after in values[i + 1 :]:
                into.add_number(after - before)
                if before:
                    into.add_number(100 * (after - before) / before)


def _add_turn(blueprint: Blueprint, asks: list[Ask], into: _Values) -> None:
    """Add the values of the last of ``asks`` (the turns so far) to the world."""
    ask = asks[-1]
    into.add_text(ask.prompt)
    into.add_text(ask.golden)
    for value in _check_values(ask):
        into.add_number(value) if isinstance(value, float) else into.add_text(value)
    _facts(blueprint, ask, into)
    _beside_facts(blueprint, asks, into)
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


def printed_facts(scenes: Iterable[Scene]) -> dict[str, list[str]]:
    """What the pages print, name by name: each row's printed value (every snapshot's) and its printed extra
    (a lab test's reference range). An answer that attributes one of these values to its own name states a
    true fact, never a rival (``vtb_rewards.claims``)."""
    facts: dict[str, list[str]] = {}
    for scene in scenes:
        for entry in scene.entries:
            texts = facts.setdefault(entry.label, [])
            texts += [text for text in (entry.text, entry.extra) if text and text not in texts]
    return facts


def pictures(shown: list[Scene]) -> dict[str, Any]:
    """What an answer may say about the pictures shown so far as references, not values: how many there are
    ("image 2"), each one's row count and the nouns that count rows ("6 dishes", "the page lists 6 rows")."""
    nouns = {ROW_WORDS[scene.kind.name][0] for scene in shown if scene.kind.name in ROW_WORDS}
    return {
        "count": len(shown),
        "row_counts": sorted({len(scene.entries) for scene in shown}),
        "row_nouns": sorted(nouns),
    }


def turn_worlds(blueprint: Blueprint) -> list[dict[str, Any]]:
    """The closed world of every turn of ``blueprint`` (cumulative: a later turn may restate earlier ones)."""
    values, worlds, dialogue, shown = _Values(), [], [], []
    for turn, ask in enumerate(blueprint.asks):
        shown += [blueprint.states[state] for state in ask.new_states]
        _add_turn(blueprint, list(blueprint.asks[: turn + 1]), values)
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
            "facts": printed_facts(shown),
            "pictures": pictures(shown),
        }
        if any(r.check.get("type") == "clarify" for r in ask.rubrics):
            world["clarify_rivals"] = clarify_rivals(blueprint.states[0].kind.name)
        worlds.append(world)
    return worlds


def _printed(scenes: Iterable[Scene]) -> list[Value]:
    """The values the documents print in their value column (a label is a name: "S-6" is no rival)."""
    return [value for scene in scenes for entry in scene.entries for value in scan(fold(entry.text))]


def _in_words(phrase: str, words: str) -> bool:
    return _words(phrase) in words


def transcription_meets(
    check: dict[str, Any], world: dict[str, Any], shown: list[Scene], unread: Iterable[Scene] = ()
) -> bool:
    """Would a transcription by a reader who does not read the question meet ``check`` in ``world``: of any
    one page shown so far, of all of them, or of any one row the turn does not read (``unread``: one-row
    scenes; the rows it reads are the work, so a lucky pick of one of them is a guess, not a giveaway)?"""
    pages = [*([page] for page in shown), shown, *([row] for row in unread)]
    return any(_transcribed_meets(check, world, scenes) for scenes in pages)


def _transcribed_meets(check: dict[str, Any], world: dict[str, Any], scenes: list[Scene]) -> bool:
    """Would a transcription of ``scenes`` (every label and value they print, the question unread) meet
    ``check`` in ``world``? A value check: the pages print its expected value and no value of its kinds
    outside the world (no rival to fail the transcription); a name check: they print its name and none it
    refuses (``none_of``, the world's ``rival_names``); a verdict: they print a value of its evidence and no
    rival (its word may stand anywhere on the picture)."""
    printed = _printed(scenes)
    words = "".join(_words(f"{e.label} {e.text}") for scene in scenes for e in scene.entries)
    kinds = checked_kinds(check)
    refused = [*check.get("none_of", ()), *(() if kinds else world.get("rival_names", ()))]
    if any(_in_words(phrase, words) for phrase in refused):
        return False
    if not kinds:  # a name
        return any(_in_words(p, words) for p in check.get("any_of", ()))
    allowed = {kind: allowed_values(world[WORLD_KEYS[kind]], kind) for kind in kinds}
    if any(v.kind in kinds and not accounted_for(v, allowed[v.kind]) for v in printed):
        return False  # a rival: the transcription states a value outside the world
    if check.get("type") == "number":
        target = float(check["value"])
        return any(v.kind == NUMBER and abs(float(v.value) - target) <= check.get("abs_tol", 1e-6) for v in printed)
    phrases = [str(p) for p in check.get("any_of", ())]
    values = {v.value for p in phrases for v in scan(fold(p))}
    if not values:  # a verdict: its word may be anywhere on the picture; it counts beside a value of evidence
        evidence = world.get("evidence") or world
        return any(accounted_for(v, allowed_values(evidence.get(WORLD_KEYS[v.kind], ()), v.kind)) for v in printed)
    return any(v.value in values for v in printed) or any(_in_words(p, words) for p in phrases)


def _turns(
    blueprint: Blueprint, worlds: list[dict[str, Any]]
) -> Iterator[tuple[Ask, dict[str, Any], list[Scene], list[Scene]]]:
    """Each turn with its world, the pages shown so far and the rows of those pages it does not read (each
    as a one-row scene)."""
    shown, states = [], []
    for ask, world in zip(blueprint.asks, worlds, strict=True):
        states += list(ask.new_states)
        shown += [blueprint.states[state] for state in ask.new_states]
        read = set(ask.reads)
        unread = [
            replace(blueprint.states[state], entries=(entry,))
            for state in states
            for entry in blueprint.states[state].entries
            if (state, entry.label) not in read
        ]
        yield ask, world, shown, unread


def _met_by_transcription(blueprint: Blueprint, worlds: list[dict[str, Any]]) -> list[list[bool]]:
    return [
        [transcription_meets(dict(rubric.check), world, shown, unread) for rubric in ask.rubrics]
        for ask, world, shown, unread in _turns(blueprint, worlds)
    ]


def _other_criticals(ask: Ask, rubric: RubricSpec) -> list[dict[str, Any]]:
    """The checks a given-away ``rubric`` is bound to: the turn's other critical checks."""
    return [other.check for other in ask.rubrics if other.critical and other is not rubric]


def bind_giveaways(blueprint: Blueprint, worlds: list[dict[str, Any]]) -> list[tuple[dict[str, Any], ...]]:
    """Every turn's rubric checks (``worlds``: ``turn_worlds(blueprint)``), a check that a transcription meets
    (``transcription_meets``) bound to the turn's other critical checks: it is Met only with them
    (``"given"``), so reading a page without the question earns nothing from it, and a right answer keeps
    every credit it had. A critical check that a transcription meets with the rest of the turn's critical
    checks is left for ``giveaways``."""
    bound = []
    for ask, met in zip(blueprint.asks, _met_by_transcription(blueprint, worlds), strict=True):
        checks = []
        for rubric, given_away in zip(ask.rubrics, met, strict=True):
            given = _other_criticals(ask, rubric)
            checks.append({**rubric.check, "given": given} if given_away and given else dict(rubric.check))
        bound.append(tuple(checks))
    return bound


def giveaways(blueprint: Blueprint) -> list[str]:
    """The rubrics that a transcription still meets after ``bind_giveaways``: one with nothing to be bound to,
    or any of a turn whose critical checks a transcription meets all of. A generator must not write them
    (``build_blueprint`` draws the pair again)."""
    found = []
    for ask, met in zip(blueprint.asks, _met_by_transcription(blueprint, turn_worlds(blueprint)), strict=True):
        criticals_met = all(m for rubric, m in zip(ask.rubrics, met, strict=True) if rubric.critical)
        found += [
            rubric.description
            for rubric, m in zip(ask.rubrics, met, strict=True)
            if m and (criticals_met or not _other_criticals(ask, rubric))
        ]
    return found

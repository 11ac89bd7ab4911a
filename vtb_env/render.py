"""Transcripts of an episode's dialogue: plain text (``render_mode="ansi"``) and HTML with images."""

from __future__ import annotations

import html
from typing import Any, Iterable, Mapping

_TEXT_LIMIT = 2000


def _parts(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if content else []


def _clip(text: str, limit: int = _TEXT_LIMIT) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit} more characters]"


def render_ansi(messages: Iterable[Mapping[str, Any]]) -> str:
    """One block per message; images appear as ``<image>`` after their ``[name]`` label."""
    blocks = []
    for message in messages:
        header = f"== {message['role']}" + (f" ({message['tool_call_id']})" if message.get("tool_call_id") else "")
        lines = [header]
        for part in _parts(message):
            lines.append(_clip(part["text"]) if part.get("type") == "text" else "<image>")
        for call in message.get("tool_calls") or ():
            lines.append(f"-> {call['id']}: {call['function']['name']}({_clip(call['function']['arguments'], 500)})")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


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

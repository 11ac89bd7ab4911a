"""HTML to readable text with BeautifulSoup (scripts, styles and navigation stripped)."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup

_DROP = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form", "svg", "iframe", "template")


def html_to_text(html: str) -> tuple[str, str]:
    """(title, text) of an HTML document."""
    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(_DROP):
        tag.decompose()
    body = soup.body or soup
    text = body.get_text("\n", strip=True)
    return title, re.sub(r"\n{3,}", "\n\n", text)

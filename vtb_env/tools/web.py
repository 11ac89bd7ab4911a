"""``web_search`` and ``browser_get_page_text`` over a search backend and a page backend.

Long pages are paged: a reply holds ``page_chars`` characters and, when there is more, a
``next_page`` URL (the same URL with ``#page=N``) that the model can open next.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Mapping, Protocol

from vtb_env.tools.base import Tool, ToolContext, ToolResult
from vtb_env.tools.cache import CacheMiss, ReplayCache
from vtb_env.tools.schemas import BROWSER_GET_PAGE_TEXT, WEB_SEARCH

PAGE_CHARS = 8000  # what the official toolkit returns of a page
_PAGE_SUFFIX = re.compile(r"#page=(\d+)$")


class SearchBackend(Protocol):
    """Where ``web_search`` finds results: the offline corpus or SerpAPI."""

    def search(self, query: str, num_results: int) -> list[dict[str, str]]: ...


class PageBackend(Protocol):
    """Where ``browser_get_page_text`` gets a page: the offline corpus or the web (``PageFetcher``)."""

    def page(self, url: str) -> dict[str, str]: ...


def _cached(cache: ReplayCache | None, kind: str, key: Any, fetch: Callable[[], Any]) -> Any:
    return fetch() if cache is None else cache.through(kind, key, fetch)


class WebSearch(Tool):
    """``web_search``: titles, URLs and snippets from its backend, recorded/replayed through the cache."""

    name = "web_search"
    schema = WEB_SEARCH

    def __init__(self, backend: SearchBackend, cache: ReplayCache | None = None):
        self.backend, self.cache = backend, cache

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        query = arguments["query"].strip()
        num = arguments.get("num_results", 5)
        if not query:
            return ToolResult.failure("web_search: the query is empty")
        if not 1 <= num <= 10:
            return ToolResult.failure(f"web_search: num_results must be between 1 and 10, got {num}")
        try:
            results = _cached(
                self.cache, "web_search", {"query": query, "num_results": num}, lambda: self.backend.search(query, num)
            )
        except (CacheMiss, RuntimeError, OSError, ValueError) as exc:
            return ToolResult.failure(f"web_search: {exc}")
        body = {"query": query, "results": results}
        if not results:
            body["note"] = "no results; try other words"
        return ToolResult(text=json.dumps(body, ensure_ascii=False), meta={"num_results": len(results)})


class BrowserGetPageText(Tool):
    """``browser_get_page_text``: a page's text (at most ``page_chars`` characters) from its backend."""

    name = "browser_get_page_text"
    schema = BROWSER_GET_PAGE_TEXT

    def __init__(self, backend: PageBackend, cache: ReplayCache | None = None, page_chars: int = PAGE_CHARS):
        self.backend, self.cache, self.page_chars = backend, cache, page_chars

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        url = arguments["url"].strip()
        match = _PAGE_SUFFIX.search(url)
        page_number = int(match.group(1)) if match else 1
        base_url = url[: match.start()] if match else url
        try:
            page = _cached(self.cache, "page", {"url": base_url}, lambda: self.backend.page(base_url))
        except (LookupError, RuntimeError, OSError, ValueError) as exc:
            return ToolResult.failure(f"browser_get_page_text: {exc}")
        text = page["text"]
        pages = max(1, -(-len(text) // self.page_chars))
        if not 1 <= page_number <= pages:
            return ToolResult.failure(f"browser_get_page_text: {base_url} has {pages} page(s), not {page_number}")
        start = (page_number - 1) * self.page_chars
        body = {
            "url": page["url"],
            "title": page.get("title", ""),
            "page": page_number,
            "pages": pages,
            "text": text[start : start + self.page_chars],
        }
        if page_number < pages:
            body["next_page"] = f"{base_url}#page={page_number + 1}"
        return ToolResult(text=json.dumps(body, ensure_ascii=False), meta={"chars": len(text)})

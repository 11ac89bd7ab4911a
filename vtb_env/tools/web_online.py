"""Online backends: search through SerpAPI (the provider the official toolkit uses, so results
match the paper's setting; key in ``SERPAPI_API_KEY``) and page fetching with httpx.

The fetcher is the SSRF guard: only http(s); every hop's host is resolved and refused if any
address is private, loopback, link-local, multicast or reserved (unless ``allow_private``), and
the connection goes to the address that was checked (no DNS-rebinding window; TLS still verifies
the host name via SNI). Redirects are followed by hand so each hop is checked; bytes and time
are capped.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from vtb_env.tools.html_text import html_to_text

SERPAPI_URL = "https://serpapi.com/search.json"


class FetchRefused(ValueError):
    """The URL points somewhere the fetcher must not go, or the response broke a cap."""


@dataclass
class PageFetcher:
    allow_private: bool = False
    timeout_s: float = 15.0
    max_bytes: int = 5 * 1024 * 1024
    max_redirects: int = 5
    user_agent: str = "vtb-gym/0.1 (+https://github.com/; research benchmark)"

    def page(self, url: str) -> dict[str, str]:
        """The page's text (the page-backend interface of ``browser_get_page_text``)."""
        try:
            return self._fetch(url)
        except httpx.HTTPError as exc:
            raise FetchRefused(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None

    def _fetch(self, url: str) -> dict[str, str]:
        deadline = time.monotonic() + self.timeout_s
        with httpx.Client(timeout=self.timeout_s, follow_redirects=False) as client:
            for _ in range(self.max_redirects + 1):
                target, host, address = self._check(url)
                request = client.build_request("GET", target, headers={"Host": host, "User-Agent": self.user_agent},
                                               extensions={"sni_hostname": urlsplit(url).hostname})
                response = client.send(request, stream=True)
                try:
                    if response.is_redirect:
                        url = urljoin(url, response.headers["location"])
                        continue
                    if response.status_code >= 400:
                        raise FetchRefused(f"HTTP {response.status_code} from {url}")
                    body = self._read_capped(response, deadline)
                finally:
                    response.close()
                return _to_page(url, response.headers.get("content-type", ""), body, response.encoding)
        raise FetchRefused(f"more than {self.max_redirects} redirects")

    def _check(self, url: str) -> tuple[str, str, str]:
        """(URL with the checked address, Host header, address). Raises FetchRefused."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise FetchRefused(f"only http(s) URLs can be fetched, got {url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise FetchRefused(f"cannot resolve {parts.hostname}: {exc}") from None
        addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
        for address in addresses:
            if not self.allow_private and not address.is_global:
                raise FetchRefused(f"refusing {parts.hostname}: {address} is not a public address")
        address = addresses[0]
        netloc = f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"
        host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, "")), host, str(address)

    def _read_capped(self, response: httpx.Response, deadline: float) -> bytes:
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self.max_bytes:
                raise FetchRefused(f"page larger than {self.max_bytes} bytes")
            if time.monotonic() > deadline:
                raise FetchRefused(f"page took longer than {self.timeout_s}s")
            chunks.append(chunk)
        return b"".join(chunks)


def _to_page(url: str, content_type: str, body: bytes, encoding: str | None) -> dict[str, str]:
    text = body.decode(encoding or "utf-8", errors="replace")
    if "html" in content_type or text.lstrip()[:15].lower().startswith(("<!doctype html", "<html")):
        title, text = html_to_text(text)
    elif content_type and not content_type.startswith(("text/", "application/json", "application/xml")):
        raise FetchRefused(f"cannot extract text from {content_type}")
    else:
        title = ""
    return {"url": url, "title": title, "text": text}


class SerpApiSearch:
    """Google results through SerpAPI. ``base_url`` is configurable (tests use a local server)."""

    def __init__(self, api_key: str | None = None, *, base_url: str = SERPAPI_URL, timeout_s: float = 20.0):
        self.api_key = api_key or os.environ.get("SERPAPI_API_KEY")
        self.base_url, self.timeout_s = base_url, timeout_s

    def search(self, query: str, num_results: int) -> list[dict[str, str]]:
        if not self.api_key:
            raise RuntimeError("online web_search needs SERPAPI_API_KEY (or use the offline backend)")
        params = {"engine": "google", "q": query, "num": num_results, "api_key": self.api_key}
        try:
            response = httpx.get(self.base_url, params=params, timeout=self.timeout_s)
            response.raise_for_status()
            organic = response.json().get("organic_results", [])[:num_results]
        except (httpx.HTTPError, ValueError) as exc:
            raise RuntimeError(f"search provider failed: {type(exc).__name__}: {exc}") from None
        return [{"title": r.get("title", ""), "url": r.get("link", ""), "snippet": r.get("snippet", "")} for r in organic]

"""Online backends: search through SerpAPI (the provider the official toolkit uses, so results
match the paper's setting; key in ``SERPAPI_API_KEY``) and page fetching with httpx.

The fetcher is the SSRF guard: only http(s); every hop's host is resolved and refused if any
address is in ``DENIED_NETWORKS`` (private, loopback, link-local, multicast, reserved, and the
IPv6 ranges that embed or translate to IPv4: NAT64, IPv4-mapped/compatible, 6to4, Teredo, plus
site-local) or is not global, unless ``allow_private``/``allow_networks`` says otherwise; the
connection goes to the address that was checked (no DNS-rebinding window; TLS still verifies the
host name via SNI). Redirects are followed by hand so each hop is checked; bytes are capped and
one deadline (``timeout_s``) covers the whole fetch: every connect, TLS handshake, header and body
read of every hop, however slowly a server drips its bytes.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any, Iterable
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpcore
import httpx

from vtb_env.tools.html_text import html_to_text

SERPAPI_URL = "https://serpapi.com/search.json"


class FetchRefused(ValueError):
    """The URL points somewhere the fetcher must not go, or the response broke a cap."""


DENIED_NETWORKS: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = tuple(
    ipaddress.ip_network(net)
    for net in (
        # IPv4 special-purpose ranges (RFC 6890 and successors)
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        # IPv6: unspecified, loopback, IPv4-compatible (::/96) and IPv4-mapped, NAT64 (well-known and
        # local-use), discard, IETF protocol assignments (Teredo), documentation, 6to4, ULA,
        # link-local, site-local (deprecated, still routed by some stacks), multicast
        "::/96",
        "::1/128",
        "::ffff:0:0/96",
        "64:ff9b::/96",
        "64:ff9b:1::/48",
        "100::/64",
        "2001::/23",
        "2001:db8::/32",
        "2002::/16",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
    )
)


def address_refusal(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why the fetcher must not connect to ``address`` (None: a public address)."""
    denied = next((net for net in DENIED_NETWORKS if address in net), None)
    if denied is not None:
        return f"{address} is not a public address (denied range {denied})"
    if not address.is_global:
        return f"{address} is not a public address"
    return None


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every read, write and TLS handshake ends by one fetch-wide deadline."""

    def __init__(self, stream: httpcore.NetworkStream, deadline: float) -> None:
        self.stream, self.deadline = stream, deadline

    def _timeout(self, timeout: float | None, error: type[Exception]) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise error("the fetch deadline passed")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.stream.read(max_bytes, self._timeout(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.stream.write(buffer, self._timeout(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self.stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        tls = self.stream.start_tls(ssl_context, server_hostname, self._timeout(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(tls, self.deadline)

    def get_extra_info(self, info: str) -> Any:
        return self.stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, deadline: float) -> None:
        self.backend, self.deadline = httpcore.SyncBackend(), deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise httpcore.ConnectTimeout("the fetch deadline passed")
        timeout = left if timeout is None else min(timeout, left)
        return _DeadlineStream(
            self.backend.connect_tcp(host, port, timeout, local_address, socket_options), self.deadline
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not fetched")

    def sleep(self, seconds: float) -> None:
        time.sleep(max(min(seconds, self.deadline - time.monotonic()), 0))


def deadline_client(timeout_s: float) -> httpx.Client:
    """An httpx client whose requests all end within ``timeout_s`` from now, connect, TLS, headers and
    body included: httpx's own timeouts apply per socket operation, so a server that drips one byte
    a second would otherwise hold a request for ever."""
    transport = httpx.HTTPTransport()
    transport._pool = httpcore.ConnectionPool(  # the public constructor does not take a network backend
        ssl_context=httpx.create_ssl_context(), network_backend=_DeadlineBackend(time.monotonic() + timeout_s)
    )
    return httpx.Client(transport=transport, timeout=timeout_s, follow_redirects=False)


@dataclass
class PageFetcher:
    """Fetches web pages for ``browser_get_page_text`` with an SSRF guard (private networks refused unless
    allowed), a time limit over all redirects and a size cap."""

    allow_private: bool = False
    timeout_s: float = 15.0  # the whole fetch, every redirect hop included
    max_bytes: int = 5 * 1024 * 1024
    max_redirects: int = 5
    user_agent: str = "vtb-gym/0.1 (+https://github.com/; research benchmark)"
    allow_networks: tuple[str, ...] = ()  # exceptions to the deny list (tests: ("127.0.0.1/32",))

    def page(self, url: str) -> dict[str, str]:
        """The page's text (the page-backend interface of ``browser_get_page_text``)."""
        try:
            return self._fetch(url)
        except FetchRefused:
            raise
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, ValueError, UnicodeError) as exc:
            raise FetchRefused(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None

    def _fetch(self, url: str) -> dict[str, str]:
        deadline = time.monotonic() + self.timeout_s
        with deadline_client(self.timeout_s) as client:
            for _ in range(self.max_redirects + 1):
                if time.monotonic() >= deadline:
                    raise FetchRefused(f"fetching took longer than {self.timeout_s}s")
                target, host, address = self._check(url)
                request = client.build_request(
                    "GET",
                    target,
                    headers={"Host": host, "User-Agent": self.user_agent},
                    extensions={"sni_hostname": urlsplit(url).hostname},
                )
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
            refusal = None if self.allow_private else self._refusal(address)
            if refusal is not None:
                raise FetchRefused(f"refusing {parts.hostname}: {refusal}")
        address = addresses[0]
        netloc = f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"
        host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, "")), host, str(address)

    def _refusal(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
        if any(address in ipaddress.ip_network(net) for net in self.allow_networks):
            return None
        return address_refusal(address)

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
            with deadline_client(self.timeout_s) as client:
                response = client.get(self.base_url, params=params)
            response.raise_for_status()
            organic = response.json().get("organic_results", [])[:num_results]
        except (httpx.HTTPError, ValueError) as exc:
            raise RuntimeError(f"search provider failed: {type(exc).__name__}: {exc}") from None
        return [
            {"title": r.get("title", ""), "url": r.get("link", ""), "snippet": r.get("snippet", "")} for r in organic
        ]

"""Online backends against real HTTP servers on 127.0.0.1 (imitating SerpAPI, web pages and Open-Meteo).

The SSRF guard refuses loopback by default; these tests turn on its allow-private switch.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from vtb_env.tools import ToolContext, default_tools
from vtb_env.tools.web_online import FetchRefused, PageFetcher

CTX = ToolContext(task_id="t")
ARCHIVE = {"2020-02-01": (8.5, 1.2, 0.4, 20.1, 3), "2020-02-02": (2.0, -4.5, 12.0, 41.0, 73)}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.server.requests.append((url.path, query, self.headers.get("Host")))
        route = {
            "/search.json": self._serpapi,
            "/page.html": self._page,
            "/redirect": self._redirect,
            "/big": self._big,
            "/v1/search": self._geocode,
            "/v1/archive": self._archive,
        }.get(url.path)
        if route is None:
            return self._send(404, "text/plain", b"not found")
        route(query)

    def _send(self, status, content_type, body, headers=()):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, payload, status=200):
        self._send(status, "application/json", json.dumps(payload).encode())

    def _serpapi(self, q):
        if q.get("api_key") != "test-key":
            return self._json({"error": "Invalid API key"}, 401)
        results = [
            {
                "position": i,
                "title": f"{q['q']} result {i}",
                "link": f"https://site{i}.example/",
                "snippet": f"snippet {i}",
            }
            for i in range(1, 11)
        ]
        self._json({"search_metadata": {"status": "Success"}, "organic_results": results})

    def _page(self, q):
        html = (
            "<html><head><title>Harbour news</title><style>p{}</style></head><body><nav>Home | About</nav>"
            "<article><p>The new pier opened on 3 May.</p><p>" + "More text. " * 1500 + "</p></article></body></html>"
        )
        self._send(200, "text/html; charset=utf-8", html.encode())

    def _redirect(self, q):
        self._send(302, "text/plain", b"", [("Location", "/page.html")])

    def _big(self, q):
        self._send(200, "text/plain", b"x" * (3 * 1024 * 1024))

    def _geocode(self, q):
        found = q["name"].lower() == "reykjavik"
        self._json(
            {"results": [{"name": "Reykjavík", "latitude": 64.14, "longitude": -21.9, "country": "Iceland"}]}
            if found
            else {"generationtime_ms": 0.1}
        )

    def _archive(self, q):
        if q["start_date"] not in ARCHIVE:
            return self._json({"error": True, "reason": "Parameter 'start_date' is out of allowed range"}, 400)
        tmax, tmin, rain, wind, code = ARCHIVE[q["start_date"]]
        assert q["daily"].startswith("temperature_2m_max") and q["end_date"] == q["start_date"]
        self._json(
            {
                "latitude": float(q["latitude"]),
                "longitude": float(q["longitude"]),
                "daily": {
                    "time": [q["start_date"]],
                    "temperature_2m_max": [tmax],
                    "temperature_2m_min": [tmin],
                    "precipitation_sum": [rain],
                    "wind_speed_10m_max": [wind],
                    "weather_code": [code],
                },
            }
        )


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.requests = []
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    httpd.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def online(server, **extra):
    config = {
        "tools": ("web_search", "browser_get_page_text", "historical_weather"),
        "backend": "online",
        "allow_private_urls": True,
        "serpapi_key": "test-key",
        "serpapi_url": f"{server.base}/search.json",
        "geocoding_url": f"{server.base}/v1/search",
        "archive_url": f"{server.base}/v1/archive",
    }
    return default_tools({**config, **extra})


def test_search_through_serpapi(server):
    result = online(server).call("web_search", {"query": "pier opening", "num_results": 3}, CTX)
    assert result.ok, result.text
    hits = json.loads(result.text)["results"]
    assert [h["title"] for h in hits] == [f"pier opening result {i}" for i in (1, 2, 3)]
    assert set(hits[0]) == {"title", "url", "snippet"}
    bad_key = online(server, serpapi_key="wrong").call("web_search", {"query": "x"}, CTX)
    assert not bad_key.ok and "401" in bad_key.error


def test_page_text_is_extracted_and_paged(server):
    tools = online(server)
    page = json.loads(tools.call("browser_get_page_text", {"url": f"{server.base}/page.html"}, CTX).text)
    assert page["title"] == "Harbour news" and page["text"].startswith("The new pier opened on 3 May.")
    assert "Home | About" not in page["text"] and page["pages"] == 3 and "next_page" in page
    redirected = json.loads(tools.call("browser_get_page_text", {"url": f"{server.base}/redirect"}, CTX).text)
    assert redirected["url"].endswith("/page.html") and redirected["title"] == "Harbour news"


def test_fetcher_caps_bytes_and_reports_http_errors(server):
    with pytest.raises(FetchRefused, match="larger than"):
        PageFetcher(allow_private=True, max_bytes=1024 * 1024).page(f"{server.base}/big")
    result = online(server).call("browser_get_page_text", {"url": f"{server.base}/missing"}, CTX)
    assert not result.ok and "HTTP 404" in result.error


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/page.html",
        "http://localhost:{port}/page.html",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[::1]/",
        "file:///etc/passwd",
        "ftp://example.com/",
    ],
)
def test_ssrf_guard_refuses_private_addresses_by_default(server, url):
    url = url.format(port=server.server_address[1])
    before = len(server.requests)
    result = default_tools({"tools": ("browser_get_page_text",), "backend": "online"}).call(
        "browser_get_page_text", {"url": url}, CTX
    )
    assert not result.ok and ("not a public address" in result.error or "only http(s)" in result.error)
    assert len(server.requests) == before  # nothing reached the server


def test_weather_from_open_meteo_depends_on_the_date(server):
    tools = online(server)
    first = json.loads(tools.call("historical_weather", {"location": "Reykjavik", "date": "2020-02-01"}, CTX).text)
    second = json.loads(tools.call("historical_weather", {"location": "Reykjavik", "date": "2020-02-02"}, CTX).text)
    assert (first["temperature_max_c"], first["conditions"]) == (8.5, "overcast")
    assert (second["temperature_min_c"], second["conditions"]) == (-4.5, "snow")
    assert first["location"] == "Reykjavík, Iceland"
    by_coordinates = json.loads(
        tools.call("historical_weather", {"location": "64.1,-21.9", "date": "2020-02-01"}, CTX).text
    )
    assert by_coordinates["lat"] == 64.1
    assert (
        "no place named" in tools.call("historical_weather", {"location": "Atlantis", "date": "2020-02-01"}, CTX).error
    )
    assert (
        "out of allowed range"
        in tools.call("historical_weather", {"location": "Reykjavik", "date": "1800-01-01"}, CTX).error
    )


def test_recorded_online_run_replays_offline(server, tmp_path):
    cache = str(tmp_path / "tools.sqlite")
    recorder = online(server, cache_path=cache, cache_mode="record")
    calls = [
        ("web_search", {"query": "harbour", "num_results": 2}),
        ("browser_get_page_text", {"url": f"{server.base}/page.html#page=2"}),
        ("historical_weather", {"location": "Reykjavik", "date": "2020-02-02"}),
    ]
    recorded = [recorder.call(name, args, CTX).text for name, args in calls]
    before = len(server.requests)
    replayer = online(server, cache_path=cache, cache_mode="replay", serpapi_url="http://127.0.0.1:9/none")
    assert [replayer.call(name, args, CTX).text for name, args in calls] == recorded
    assert len(server.requests) == before  # answered from the cache alone
    miss = replayer.call("web_search", {"query": "never recorded"}, CTX)
    assert not miss.ok and "no recorded" in miss.error


# ---- one deadline per fetch, refused redirects, the explicit deny list (issue 11, item 13) ----

import ipaddress  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402

from vtb_env.tools.web_online import DENIED_NETWORKS, address_refusal  # noqa: E402

LOOPBACK_ONLY = ("127.0.0.1/32",)


class RawServer:
    """A raw TCP server on 127.0.0.1; ``handler(conn, path)`` answers each connection (set by the test)."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.handler = None
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn) -> None:
        with conn:
            try:
                request = conn.recv(65536).decode("latin-1")
                self.handler(conn, request.split(" ")[1] if " " in request else "/")
            except OSError:
                pass


@pytest.fixture
def raw_server():
    server = RawServer()
    yield server
    server.listener.close()


def _drip_headers(conn, path):
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    for _ in range(100):  # one header byte every 0.2 s: 20 s if nothing cuts it off
        conn.sendall(b"X")
        time.sleep(0.2)


def _slow_redirects(conn, path):
    hop = int(path.strip("/") or 0)
    time.sleep(0.4)  # each hop alone is well inside any per-operation timeout
    conn.sendall(f"HTTP/1.1 302 Found\r\nLocation: /{hop + 1}\r\nContent-Length: 0\r\n\r\n".encode())


def test_headers_dripped_byte_by_byte_hit_the_fetch_deadline(raw_server):
    raw_server.handler = _drip_headers
    fetcher = PageFetcher(timeout_s=1.0, allow_networks=LOOPBACK_ONLY)
    start = time.monotonic()
    with pytest.raises(FetchRefused, match="Timeout"):
        fetcher.page(f"{raw_server.base}/")
    assert time.monotonic() - start < 3.0  # was held for the whole 20 s drip


def test_one_deadline_covers_every_redirect_hop(raw_server):
    raw_server.handler = _slow_redirects
    fetcher = PageFetcher(timeout_s=1.0, max_redirects=5, allow_networks=LOOPBACK_ONLY)
    start = time.monotonic()
    with pytest.raises(FetchRefused, match="Timeout|longer than"):
        fetcher.page(f"{raw_server.base}/0")
    assert time.monotonic() - start < 2.0  # six hops of 0.4 s would take 2.4 s


@pytest.mark.parametrize(
    "location", ["http://127.0.0.1:99999/", "//" + "a" * 300 + "/", "http://[::1/", "/a\x01b", "http://127.0.0.1:x/"]
)
def test_unusable_redirect_targets_are_refused_fetches(raw_server, server, location):
    raw_server.handler = lambda conn, path: conn.sendall(
        f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n".encode("latin-1")
    )
    fetcher = PageFetcher(timeout_s=5.0, allow_networks=LOOPBACK_ONLY)
    with pytest.raises(FetchRefused):
        fetcher.page(f"{raw_server.base}/")
    assert fetcher.page(f"{server.base}/page.html")["title"] == "Harbour news"  # the next fetch works


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::7f00:1",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::a00:1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "::127.0.0.1",
        "::a00:1",
        "fec0::1",
        "2002:7f00:1::1",
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        "fd00::1",
        "fe80::1",
        "::1",
        "::",
        "ff02::1",
        "100::1",
        "127.0.0.1",
        "10.1.2.3",
        "100.64.0.1",
        "169.254.169.254",
        "172.16.0.1",
        "192.168.1.1",
        "198.18.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "255.255.255.255",
    ],
)
def test_deny_list_refuses_addresses_that_reach_private_ones(address):
    assert address_refusal(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "2a00:1450:4001:82a::200e"])
def test_deny_list_lets_public_addresses_through(address):
    assert address_refusal(ipaddress.ip_address(address)) is None


def test_nat64_address_is_refused_before_connecting(raw_server):
    """A redirect from an allowed server to NAT64/mapped forms of loopback: refused, nothing connects."""
    hits = []

    def handler(conn, path):
        hits.append(path)
        target = {"/": "http://[64:ff9b::7f00:1]:{port}/", "/mapped": "http://[::ffff:127.0.0.1]:{port}/"}[path]
        conn.sendall(
            (
                f"HTTP/1.1 302 Found\r\nLocation: {target.format(port=raw_server.port)}\r\nContent-Length: 0\r\n\r\n"
            ).encode()
        )

    raw_server.handler = handler
    fetcher = PageFetcher(timeout_s=5.0, allow_networks=LOOPBACK_ONLY)
    for path in ("/", "/mapped"):
        with pytest.raises(FetchRefused, match="denied range"):
            fetcher.page(f"{raw_server.base}{path}")
    assert hits == ["/", "/mapped"] and len(DENIED_NETWORKS) > 20


def test_search_and_weather_clients_share_the_deadline(raw_server):
    from vtb_env.tools.weather import OpenMeteo, WeatherUnavailable
    from vtb_env.tools.web_online import SerpApiSearch

    raw_server.handler = _drip_headers
    start = time.monotonic()
    with pytest.raises(WeatherUnavailable, match="Timeout"):
        OpenMeteo(geocoding_url=f"{raw_server.base}/v1/search", timeout_s=1.0).lookup("Reykjavik", "2020-02-01")
    with pytest.raises(RuntimeError, match="Timeout"):
        SerpApiSearch("key", base_url=f"{raw_server.base}/search.json", timeout_s=1.0).search("q", 3)
    assert time.monotonic() - start < 5.0  # two 20 s drips, each cut at 1 s

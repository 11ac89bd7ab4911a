"""Offline backends: the local BM25 corpus and page store, the weather archive, and replay from a cache."""

from __future__ import annotations

import json

import pytest

from vtb_env.tools import ReplayCache, ToolContext, default_tools
from vtb_env.tools.web_offline import LocalCorpus

CTX = ToolContext(task_id="t")


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("mydocs")
    docs = [
        {"url": "https://ex.org/kiwi", "title": "Kiwi fruit", "text": "The kiwi fruit is rich in vitamin C. " * 3},
        {
            "url": "https://ex.org/kiwi-bird",
            "title": "Kiwi bird",
            "text": "The kiwi is a flightless bird of New Zealand.",
        },
        {
            "url": "https://ex.org/long",
            "title": "A long report",
            "text": "chapter " + "lorem ipsum " * 2000 + "THE END",
        },
    ]
    (root / "docs.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n")
    (root / "notes.txt").write_text("Ferry timetable\nThe harbour ferry leaves at 07:45 every weekday.\n")
    (root / "page.html").write_text(
        "<html><head><title>Lighthouse</title><script>var secret=1;</script></head>"
        "<body><nav>menu menu</nav><p>The lighthouse was built in 1874.</p></body></html>"
    )
    return root


@pytest.fixture(scope="module")
def weather_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("weather")
    rows = [
        {
            "location": "Springfield",
            "aliases": ["Springfield, IL"],
            "lat": 39.8,
            "lon": -89.65,
            "date": d,
            "temperature_max_c": t,
            "temperature_min_c": t - 8,
            "precipitation_mm": 0.0,
            "wind_speed_max_kmh": 12.0,
            "conditions": c,
        }
        for d, t, c in (("2021-07-04", 31.0, "clear sky"), ("2021-07-05", 24.5, "rain"))
    ]
    (root / "w.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return root


@pytest.fixture(scope="module")
def tools(corpus_dir, weather_dir):
    return default_tools(
        {
            "tools": ("web_search", "browser_get_page_text", "historical_weather"),
            "corpus_dirs": [str(corpus_dir)],
            "weather_dirs": [str(weather_dir)],
        }
    )


def search(tools, query, n=5):
    result = tools.call("web_search", {"query": query, "num_results": n}, CTX)
    assert result.ok, result.text
    return json.loads(result.text)["results"]


def test_bm25_ranks_the_relevant_document_first(tools):
    assert search(tools, "flightless bird")[0]["url"] == "https://ex.org/kiwi-bird"
    assert search(tools, "vitamin in kiwis")[0]["url"] == "https://ex.org/kiwi"  # stemming: kiwis -> kiwi
    hits = search(tools, "kiwi", n=1)
    assert len(hits) == 1 and set(hits[0]) == {"title", "url", "snippet"}


def test_text_and_html_user_files_are_indexed(tools):
    ferry = search(tools, "harbour ferry")[0]
    assert ferry["url"] == f"local://mydocs{ferry['url'].split('mydocs')[1]}" and ferry["title"] == "Ferry timetable"
    page = json.loads(tools.call("browser_get_page_text", {"url": search(tools, "lighthouse")[0]["url"]}, CTX).text)
    assert page["title"] == "Lighthouse" and "1874" in page["text"]
    assert "secret" not in page["text"] and "menu" not in page["text"]


def test_search_handles_odd_queries(tools):
    assert isinstance(search(tools, 'NEAR( "kiwi * OR'), list)  # FTS5 syntax is quoted away, not an error
    assert search(tools, "zzzzqqq") == []
    assert "between 1 and 10" in tools.call("web_search", {"query": "kiwi", "num_results": 50}, CTX).error
    assert "num_results" in tools.call("web_search", {"query": "kiwi", "num_results": "3"}, CTX).error


def test_long_pages_are_paged(tools):
    first = json.loads(tools.call("browser_get_page_text", {"url": "https://ex.org/long"}, CTX).text)
    assert first["page"] == 1 and first["pages"] == 4 and len(first["text"]) == 8000
    last = json.loads(tools.call("browser_get_page_text", {"url": "https://ex.org/long#page=4"}, CTX).text)
    assert last["text"].endswith("THE END") and "next_page" not in last
    assert first["next_page"] == "https://ex.org/long#page=2"
    assert "has 4 page(s)" in tools.call("browser_get_page_text", {"url": "https://ex.org/long#page=9"}, CTX).error


def test_unknown_page_is_an_honest_error(tools):
    result = tools.call("browser_get_page_text", {"url": "https://nowhere.example/x"}, CTX)
    assert not result.ok and "offline corpus" in result.error


def test_weather_depends_on_the_date(tools):
    def weather(location, date):
        return tools.call("historical_weather", {"location": location, "date": date}, CTX)

    july4 = json.loads(weather("Springfield, IL", "2021-07-04").text)
    july5 = json.loads(weather("springfield", "2021-07-05").text)
    assert (july4["temperature_max_c"], july4["conditions"]) == (31.0, "clear sky")
    assert (july5["temperature_max_c"], july5["conditions"]) == (24.5, "rain")
    assert json.loads(weather("39.78,-89.64", "2021-07-04").text)["location"] == "Springfield"
    assert "2021-07-04 to 2021-07-05" in weather("Springfield", "2021-08-01").error
    assert "no place named" in weather("Atlantis", "2021-07-04").error
    assert "YYYY-MM-DD" in weather("Springfield", "July 4 2021").error
    assert "not in the past" in weather("Springfield", "2999-01-01").error


def test_bundled_corpus_loads_every_document():
    from vtb_env.tools.web_offline import DEFAULT_CORPUS

    lines = sum(1 for path in DEFAULT_CORPUS.glob("*.jsonl") for line in path.open() if line.strip())
    assert len(LocalCorpus()) == lines


def test_offline_run_replays_a_recorded_answer_first(tmp_path, corpus_dir):
    path = str(tmp_path / "cache.sqlite")
    recorded = ReplayCache(path, "record")
    recorded.through(  # what an online run records
        "web_search",
        {"query": "kiwi", "num_results": 2},
        lambda: [{"title": "Recorded", "url": "https://recorded.example", "snippet": "from an online run"}],
    )
    recorded.close()
    tools = default_tools({"tools": ("web_search",), "corpus_dirs": [str(corpus_dir)], "cache_path": path})
    assert search(tools, "kiwi", n=2)[0]["title"] == "Recorded"
    assert search(tools, "flightless bird")[0]["url"] == "https://ex.org/kiwi-bird"  # a miss falls back offline

"""Building the tool registry from configuration (the tool sets are in ``vtb_env.toolsets``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from vtb_env.sandbox import Sandbox
from vtb_env.tools.base import Tool, ToolRegistry
from vtb_env.tools.cache import ReplayCache
from vtb_env.tools.calculator import Calculator
from vtb_env.tools.python_tools import PythonImageProcessing, PythonInterpreter
from vtb_env.tools.weather import DEFAULT_ARCHIVE, HistoricalWeather, OpenMeteo, WeatherArchive
from vtb_env.tools.web import BrowserGetPageText, WebSearch
from vtb_env.tools.web_offline import DEFAULT_CORPUS, LocalCorpus
from vtb_env.tools.web_online import PageFetcher, SerpApiSearch
from vtb_env.toolsets import ALL_TOOLS, TOOL_SETS


@dataclass
class ToolsConfig:
    """How to build the tools. Offline by default: no network, no key."""

    tools: str | tuple[str, ...] = "all"  # a TOOL_SETS name or tool names
    backend: str = "offline"  # "offline" (bundled data) or "online" (SerpAPI, the web, Open-Meteo)
    corpus_dirs: tuple[str, ...] = ()  # user folders added to the bundled corpus (.jsonl/.txt/.html)
    weather_dirs: tuple[str, ...] = ()  # user folders of weather JSONL added to the bundled archive
    cache_path: str | None = None  # record/replay cache (SQLite file)
    cache_mode: str | None = None  # default: "auto" online, "prefer" offline
    allow_private_urls: bool = False  # SSRF guard switch (tests with 127.0.0.1 servers)
    serpapi_key: str | None = None  # else $SERPAPI_API_KEY
    serpapi_url: str | None = None
    geocoding_url: str | None = None
    archive_url: str | None = None
    code_timeout_s: float | None = None  # per python call; default: the sandbox's limit (20 s)
    sandbox: Sandbox | None = field(default=None, repr=False)  # a custom pool (default: the shared one)

    @classmethod
    def coerce(cls, config: "ToolsConfig | Mapping[str, Any] | None") -> "ToolsConfig":
        if config is None:
            return cls()
        if isinstance(config, cls):
            return config
        unknown = set(config) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown tool config keys: {sorted(unknown)}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in config.items()})


def default_tools(config: ToolsConfig | Mapping[str, Any] | None = None) -> ToolRegistry:
    """The registry of the configured tool set (all six, offline, by default)."""
    cfg = ToolsConfig.coerce(config)
    names = TOOL_SETS[cfg.tools] if isinstance(cfg.tools, str) and cfg.tools in TOOL_SETS else cfg.tools
    if isinstance(names, str):
        raise ValueError(f"unknown tool set {names!r}; choose from {sorted(TOOL_SETS)} or list tool names")
    unknown = [n for n in names if n not in ALL_TOOLS]
    if unknown:
        raise ValueError(f"unknown tools {unknown}; tools: {', '.join(ALL_TOOLS)}")
    if cfg.backend not in ("offline", "online"):
        raise ValueError(f"backend must be 'offline' or 'online', got {cfg.backend!r}")
    online = cfg.backend == "online"
    cache = None
    if cfg.cache_path:
        cache = ReplayCache(cfg.cache_path, cfg.cache_mode or ("auto" if online else "prefer"))
    builders = {
        "python_image_processing": lambda: PythonImageProcessing(cfg.sandbox, timeout_s=cfg.code_timeout_s),
        "python_interpreter": lambda: PythonInterpreter(cfg.sandbox, timeout_s=cfg.code_timeout_s),
        "calculator": Calculator,
        "historical_weather": lambda: HistoricalWeather(_weather_backend(cfg), cache),
    }
    web = [n for n in ("web_search", "browser_get_page_text") if n in names]
    if web:
        corpus = None if online else LocalCorpus([DEFAULT_CORPUS, *cfg.corpus_dirs])
        builders["web_search"] = lambda: WebSearch(_search_backend(cfg) if online else corpus, cache)
        builders["browser_get_page_text"] = lambda: BrowserGetPageText(
            PageFetcher(allow_private=cfg.allow_private_urls) if online else corpus, cache
        )
    tools: list[Tool] = [builders[name]() for name in names]
    return ToolRegistry(tools)


def _search_backend(cfg: ToolsConfig) -> SerpApiSearch:
    return SerpApiSearch(cfg.serpapi_key, **({"base_url": cfg.serpapi_url} if cfg.serpapi_url else {}))


def _weather_backend(cfg: ToolsConfig) -> OpenMeteo | WeatherArchive:
    if cfg.backend == "online":
        urls = {k: v for k, v in (("geocoding_url", cfg.geocoding_url), ("archive_url", cfg.archive_url)) if v}
        return OpenMeteo(**urls)
    return WeatherArchive([DEFAULT_ARCHIVE, *cfg.weather_dirs])

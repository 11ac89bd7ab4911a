"""The benchmark's six tools, their registry and backends.

from vtb_env.tools import default_tools
tools = default_tools()                      # all six, offline backends
tools = default_tools({"tools": "no_vision"})  # ablation sets: "all", "no_vision", "none"
"""

from vtb_env.tools.base import NamedImage, Tool, ToolContext, ToolRegistry, ToolResult
from vtb_env.tools.cache import ReplayCache
from vtb_env.tools.calculator import Calculator
from vtb_env.tools.factory import ALL_TOOLS, TOOL_SETS, ToolsConfig, default_tools
from vtb_env.tools.python_tools import PythonImageProcessing, PythonInterpreter
from vtb_env.tools.weather import HistoricalWeather, OpenMeteo, WeatherArchive
from vtb_env.tools.web import BrowserGetPageText, WebSearch
from vtb_env.tools.web_offline import LocalCorpus
from vtb_env.tools.web_online import PageFetcher, SerpApiSearch

__all__ = [
    "ALL_TOOLS",
    "BrowserGetPageText",
    "Calculator",
    "HistoricalWeather",
    "LocalCorpus",
    "NamedImage",
    "OpenMeteo",
    "PageFetcher",
    "PythonImageProcessing",
    "PythonInterpreter",
    "ReplayCache",
    "SerpApiSearch",
    "TOOL_SETS",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "ToolsConfig",
    "WeatherArchive",
    "WebSearch",
    "default_tools",
]

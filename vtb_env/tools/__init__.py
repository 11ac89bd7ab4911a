"""The benchmark's six tools, their registry and backends."""

from vtb_env.tools.base import NamedImage, Tool, ToolContext, ToolRegistry, ToolResult

__all__ = ["NamedImage", "Tool", "ToolContext", "ToolRegistry", "ToolResult"]

"""The benchmark's six tools, their registry and backends."""

from vtb_env.tools.base import NamedImage, Tool, ToolContext, ToolRegistry, ToolResult
from vtb_env.tools.calculator import Calculator
from vtb_env.tools.python_tools import PythonImageProcessing, PythonInterpreter

__all__ = ["Calculator", "NamedImage", "PythonImageProcessing", "PythonInterpreter", "Tool", "ToolContext",
           "ToolRegistry", "ToolResult"]

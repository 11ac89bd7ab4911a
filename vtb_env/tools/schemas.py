"""The six tools' function schemas, exactly as the paper prints them (appendix D.4).

Two deliberate, documented departures (docs/tools.md):
- ``python_interpreter`` no longer advertises ``requests`` and ``yfinance``: the sandbox has no
  network, so the description says so instead of promising packages that cannot work.
- ``calculator``'s ``parameters`` is an object (the paper prints it wrapped in a list, which is
  not a valid function schema).
The vision tool's description is a template: ``{image_list}`` and ``{processed_image_save_path}``
are filled in per turn (``python_image_processing_schema``).
"""

from __future__ import annotations

import copy
from typing import Any

_CODE_PARAMETERS = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "Python code to run.", "minLength": 1, "maxLength": 5000}},
    "required": ["code"],
}

PYTHON_IMAGE_PROCESSING_DESCRIPTION = (
    "Generate arbitrary Python code for image manipulation and save the transformed image as PNG.\n"
    "--Read one source image (your choice) from the working-directory file list: {image_list}.\n"
    "--Perform any image processing with PIL, NumPy, or OpenCV. You cannot use matplotlib to show the image.\n"
    "--You **must** save** the transformed image as PNG to {processed_image_save_path} using the filename pattern "
    '"transformed_image_i.png", where the counter **i starts at 0 and increments on each invocation** '
    "so files are never overwritten. Example:\n"
    '    img.save(f"{processed_image_save_path}/transformed_image_{i}.png", "PNG")\n'
)

PYTHON_IMAGE_PROCESSING = {
    "type": "function",
    "function": {
        "name": "python_image_processing",
        "description": PYTHON_IMAGE_PROCESSING_DESCRIPTION,
        "parameters": _CODE_PARAMETERS,
    },
}

PYTHON_INTERPRETER = {
    "type": "function",
    "function": {
        "name": "python_interpreter",
        "description": (
            "General-purpose Python interpreter. Run arbitrary Python code and capture stdout via print(). "
            "Any exceptions are returned in stderr.\n\n"
            "Pre-installed packages:\n"
            "    • numpy\n"
            "    • pandas\n"
            "    • scipy\n"
            "    • scikit-learn\n"
            "    • sympy\n"
            "    • tabulate\n"
            "    • beautifulsoup4\n\n"
            "The code runs without network access."
        ),
        "parameters": _CODE_PARAMETERS,
    },
}

WEB_SEARCH = {
    "type": "function",
    "function": {
        "name": "web_search",
        "description": (
            "Perform a Google search and return relevant results. "
            "Useful for finding current information, news, or facts about topics."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "The search query to look up"},
                "num_results": {"type": "integer", "description": "Number of results to return (1-10)", "default": 5},
            },
            "required": ["query"],
        },
    },
}

BROWSER_GET_PAGE_TEXT = {
    "type": "function",
    "function": {
        "name": "browser_get_page_text",
        "description": (
            "Fetch a web page and extract its text content. "
            "Useful for reading articles, documentation, or any web page content."
        ),
        "parameters": {
            "type": "object",
            "properties": {"url": {"type": "string", "description": "The URL of the web page to fetch"}},
            "required": ["url"],
        },
    },
}

HISTORICAL_WEATHER = {
    "type": "function",
    "function": {
        "name": "historical_weather",
        "description": (
            "Get historical weather data for a specific location and date. "
            "Useful for analyzing past weather patterns or events."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "City name or coordinates (e.g., 'New York, NY' or '40.7128,-74.0060')",
                },
                "date": {"type": "string", "description": "Date in YYYY-MM-DD format"},
            },
            "required": ["location", "date"],
        },
    },
}

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": (
            "A calculator tool that can perform basic arithmetic operations including +, -, *, /, %, ^, sqrt, "
            "sin, cos, tan, log, exp, and parentheses."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "expression": {"type": "string", "description": 'The expression to evaluate, e.g. "2 * 3.14 * 5".'}
            },
            "required": ["expression"],
        },
    },
}

ALL_SCHEMAS = {
    s["function"]["name"]: s
    for s in (
        PYTHON_IMAGE_PROCESSING,
        PYTHON_INTERPRETER,
        WEB_SEARCH,
        BROWSER_GET_PAGE_TEXT,
        HISTORICAL_WEATHER,
        CALCULATOR,
    )
}


def python_image_processing_schema(image_list: list[str], save_path: str) -> dict[str, Any]:
    """The vision tool's schema for one turn: the files the code can read and where it must save."""
    schema = copy.deepcopy(PYTHON_IMAGE_PROCESSING)
    listing = ", ".join(image_list) if image_list else "(no images yet)"
    schema["function"]["description"] = PYTHON_IMAGE_PROCESSING_DESCRIPTION.replace("{image_list}", listing).replace(
        "{processed_image_save_path}", save_path
    )
    return schema

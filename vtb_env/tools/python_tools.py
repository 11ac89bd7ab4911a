"""``python_image_processing`` and ``python_interpreter``: model-written code in the sandbox.

The vision tool's work dir holds exactly the images of the ToolContext (``image_<k>.png``,
``transformed_image_<i>.png``); every ``transformed_image_<i>.png`` the code writes (new or
overwritten) comes back as an image in index order, then any other image file it wrote. The tool
returns the files' raw bytes: the environment alone checks, names and decodes tool images
(``vtb_env.tool_images``).
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from vtb_env.image_names import TOOL_IMAGE_NAME
from vtb_env.sandbox import ExecResult, Sandbox, SandboxError, shared_sandbox
from vtb_env.sandbox.limits import capped_listing
from vtb_env.tools.base import NamedImage, Tool, ToolContext, ToolResult
from vtb_env.tools.schemas import PYTHON_IMAGE_PROCESSING, PYTHON_INTERPRETER, python_image_processing_schema
from vtb_env.toolsets import VISION_TOOL

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
MAX_TEXT_CHARS = 10_000  # stdout/stderr shown to the model, per stream


class _SandboxedPython(Tool):
    profile: str

    def __init__(self, sandbox: Sandbox | None = None, *, timeout_s: float | None = None):
        self._sandbox = sandbox
        self.timeout_s = timeout_s

    @property
    def sandbox(self) -> Sandbox:
        return self._sandbox or shared_sandbox(self.profile)

    def _execute(self, code: str, files: Mapping[str, bytes], collect: bool) -> ExecResult | ToolResult:
        try:
            return self.sandbox.run(code, files, timeout_s=self.timeout_s, collect_files=collect)
        except SandboxError as exc:
            return ToolResult.failure(f"{self.name}: sandbox failure: {exc}", kind="sandbox")

    @staticmethod
    def _report(result: ExecResult, **extra: Any) -> tuple[dict[str, Any], str | None]:
        """The JSON body for the model and the error (if the run failed)."""
        body = {
            "stdout": _clip(result.stdout, result.stdout_truncated),
            "stderr": _clip(result.stderr, result.stderr_truncated),
            "exit_code": result.exit_code,
            **extra,
        }
        error = None
        if result.timed_out:
            error = f"timed out after {result.duration_s:.1f}s"
        elif result.setup_failed:
            error = "sandbox setup failed: " + result.stderr.strip()[-300:]
        elif result.exit_code != 0:
            lines = result.stderr.strip().splitlines()
            error = lines[-1] if lines else f"exit code {result.exit_code}"
        if error:
            body["error"] = error
        return body, error


class PythonInterpreter(_SandboxedPython):
    """``python_interpreter``: runs the code in the ``interpreter`` sandbox profile (numpy, pandas,
    scipy, sympy, ...; no network) and returns its stdout, stderr and exit code as JSON."""

    name = "python_interpreter"
    schema = PYTHON_INTERPRETER
    profile = "interpreter"

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        result = self._execute(arguments["code"], {}, collect=False)
        if isinstance(result, ToolResult):
            return result
        body, error = self._report(result)
        return ToolResult(text=json.dumps(body), error=error, meta={"duration_s": result.duration_s})


class PythonImageProcessing(_SandboxedPython):
    """``python_image_processing``: runs the code in the ``image`` sandbox profile with the episode's
    images in its work dir, and returns its output as JSON plus the image files it wrote (raw bytes)."""

    name = VISION_TOOL
    schema = PYTHON_IMAGE_PROCESSING
    profile = "image"

    def schema_for(self, context: ToolContext) -> dict[str, Any]:
        return python_image_processing_schema([image.name for image in context.images], Sandbox.work_dir)

    def run(self, arguments: Mapping[str, Any], context: ToolContext) -> ToolResult:
        files = {image.name: image.data for image in context.images}
        result = self._execute(arguments["code"], files, collect=True)
        if isinstance(result, ToolResult):
            return result
        images = _returned_images(result.files)
        body, error = self._report(
            result, images=[image.name for image in images], skipped_files=capped_listing(result.skipped_files)
        )
        if error is None and not images:
            body["note"] = "no image was saved; save results as transformed_image_<i>.png to get them back"
        meta = {"duration_s": result.duration_s}
        return ToolResult(text=json.dumps(body), images=images, error=error, meta=meta)


def _returned_images(files: Mapping[str, bytes]) -> list[NamedImage]:
    """The image files the code wrote: transformed images in index order, then the others by name."""

    def order(name: str) -> tuple[int, int, str]:
        match = TOOL_IMAGE_NAME.fullmatch(name)
        return (0, int(match.group(1)), name) if match else (1, 0, name)

    names = sorted((name for name in files if name.lower().endswith(IMAGE_SUFFIXES)), key=order)
    return [NamedImage(os.path.basename(name), files[name]) for name in names]


def _clip(text: str, truncated: bool) -> str:
    if len(text) > MAX_TEXT_CHARS or truncated:
        return text[:MAX_TEXT_CHARS] + "\n[output truncated]"
    return text

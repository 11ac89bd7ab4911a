"""``python_image_processing`` and ``python_interpreter``: model-written code in the sandbox.

The vision tool's work dir holds exactly the images of the ToolContext (``image_<k>.png``,
``transformed_image_<i>.png``); every ``transformed_image_<i>.png`` the code writes (new or
overwritten) comes back as an image in index order, then any other image file it wrote. Each is
checked inside the sandbox call, within its timeout and memory limit (``vtb_env.sandbox.normalize``:
decoded, converted, re-encoded as a plain PNG unless it already is a plain PNG/JPEG, compared with the
inputs); the environment names and budgets them (``vtb_env.tool_images``).

The call's ``image_work`` (in its JSON body and ``ToolResult.meta``) is what the sandbox saw, not what
the code says: ``read``, the input images whose bytes the code read (the kernel's inotify record, kept
by the fork server); ``new_images``, the images it returned that are not a pixel-for-pixel copy of an
input; ``printed``, whether it printed anything. The reward's mode and tool-success credit count a
vision call only when it read an image and returned something (``ToolCallRecord.did_image_work``).
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from vtb_env.image_names import TOOL_IMAGE_NAME
from vtb_env.sandbox import ExecResult, ImageRequest, Sandbox, SandboxError, shared_sandbox
from vtb_env.sandbox.limits import capped_listing
from vtb_env.tools.base import NamedImage, Tool, ToolContext, ToolResult
from vtb_env.tools.schemas import PYTHON_IMAGE_PROCESSING, PYTHON_INTERPRETER, python_image_processing_schema
from vtb_env.toolsets import VISION_TOOL

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")
MAX_TEXT_CHARS = 10_000  # stdout/stderr shown to the model, per stream
# transformed images in index order, then the others by name; budgets as vtb_env.tool_images applies them
RETURNED_IMAGES = ImageRequest(IMAGE_SUFFIXES, order=TOOL_IMAGE_NAME.pattern)


class _SandboxedPython(Tool):
    profile: str

    def __init__(self, sandbox: Sandbox | None = None, *, timeout_s: float | None = None):
        self._sandbox = sandbox
        self.timeout_s = timeout_s

    @property
    def sandbox(self) -> Sandbox:
        return self._sandbox or shared_sandbox(self.profile)

    def _execute(
        self, code: str, files: Mapping[str, bytes], images: ImageRequest | None = None
    ) -> ExecResult | ToolResult:
        try:
            return self.sandbox.run(code, files, timeout_s=self.timeout_s, images=images)
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
        result = self._execute(arguments["code"], {})
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
        result = self._execute(arguments["code"], files, RETURNED_IMAGES)
        if isinstance(result, ToolResult):
            return result
        images = [
            NamedImage(os.path.basename(i.name), i.data, True, i.notes + _copy_note(i.copy_of), i.refusal)
            for i in result.images
        ]
        work = {
            "read": list(result.read_inputs or []),
            "new_images": sum(i.refusal is None and i.copy_of is None for i in result.images),
            "printed": bool(result.stdout.strip()),
        }
        body, error = self._report(
            result,
            images=[image.name for image in images],
            skipped_files=capped_listing(result.skipped_files),
            image_work=work,
        )
        if error is None and not images:
            body["note"] = "no image was saved; save results as transformed_image_<i>.png to get them back"
        meta = {"duration_s": result.duration_s, "image_work": work}
        return ToolResult(text=json.dumps(body), images=images, error=error, meta=meta)


def _copy_note(copy_of: str | None) -> tuple[str, ...]:
    return () if copy_of is None else (f"its pixels repeat {copy_of} exactly",)


def _clip(text: str, truncated: bool) -> str:
    if len(text) > MAX_TEXT_CHARS or truncated:
        return text[:MAX_TEXT_CHARS] + "\n[output truncated]"
    return text

"""A fast sandbox for model-written Python: pre-forked fork servers with every isolation layer the host allows.

from vtb_env.sandbox import shared_sandbox
result = shared_sandbox("image").run("print(1)")
"""

from vtb_env.sandbox.limits import Limits
from vtb_env.sandbox.normalize import CheckedImage, ImageRequest
from vtb_env.sandbox.pool import ExecResult, Sandbox, SandboxError
from vtb_env.sandbox.shared import shared_sandbox

__all__ = ["CheckedImage", "ExecResult", "ImageRequest", "Limits", "Sandbox", "SandboxError", "shared_sandbox"]

"""What crosses ``vtb serve``'s wire (``vtb_app.openenv_server``): the action, the observation, the session's
state and the closed set of reset parameters, as OpenEnv's pydantic models."""

from __future__ import annotations

import json
from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

MAX_ACTION_CHARS = 200_000  # one assistant reply; longer ones are refused, not truncated


class VTBAction(Action):
    """The policy's reply: raw text (any tool-call format the env parses) or an OpenAI assistant message."""

    text: str | None = Field(default=None, max_length=MAX_ACTION_CHARS, description="raw model text")
    message: dict[str, Any] | None = Field(default=None, description="OpenAI assistant message (content, tool_calls)")

    @model_validator(mode="after")
    def _exactly_one(self) -> "VTBAction":
        # PydanticCustomError, not ValueError: openenv 0.3 serialises e.errors() into its error reply, and a
        # ValueError in the error's context fails that serialisation and ends the session.
        if (self.text is None) == (self.message is None):
            raise PydanticCustomError("vtb_action", 'an action is {"text": "..."} or {"message": {...}}, exactly one')
        if self.message is not None and len(json.dumps(self.message, default=str)) > MAX_ACTION_CHARS:
            raise PydanticCustomError("vtb_action", f"the message is longer than {MAX_ACTION_CHARS} characters")
        return self

    def env_action(self) -> str | dict[str, Any]:
        """What ``VisualToolBenchEnv.step`` takes."""
        return self.text if self.text is not None else {**(self.message or {}), "role": "assistant"}


class VTBObservation(Observation):
    """One step's view: the whole dialogue so far (OpenAI format) and, at the end, the reward and its components."""

    messages: list[dict[str, Any]] = Field(default_factory=list, description="the dialogue, images as data URLs")
    image_names: list[str] = Field(default_factory=list, description="the images' file names, in part order")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="function schemas offered now")
    task_id: str = ""
    turn: int = Field(default=0, description="index of the task turn in progress")
    terminated: bool = False
    truncated: bool = False
    reward_components: dict[str, float] = Field(default_factory=dict, description="set at the episode's end")
    reward_error: str | None = Field(default=None, description="why the reward could not be computed, if so")
    parse_errors: list[str] = Field(default_factory=list, description="tool-call parse errors of this step")


class VTBState(State):
    """The session's episode: task, turn, whether it ended."""

    task_id: str | None = None
    turn: int = 0
    done: bool = False


MAX_SEED = 2**63 - 1


class ResetParams(BaseModel):
    """What ``reset`` takes from a client: a closed set of fields, each checked (a bad one is a 422 naming it
    over HTTP, OpenEnv's VALIDATION_ERROR over the WebSocket; never a 500)."""

    model_config = ConfigDict(extra="forbid")

    seed: StrictInt | None = Field(default=None, ge=0, le=MAX_SEED)
    episode_id: str | None = Field(default=None, max_length=255)
    task_id: str | None = Field(default=None, min_length=1, max_length=512)
    index: StrictInt | None = Field(default=None, ge=0)

    @field_validator("task_id")
    @classmethod
    def _known_task(cls, task_id: str | None, info: ValidationInfo) -> str | None:
        known = (info.context or {}).get("task_ids", ())
        if task_id is not None and task_id not in known:
            raise PydanticCustomError("unknown_task", "no task '{task_id}' on this server", {"task_id": task_id})
        return task_id

    @field_validator("index")
    @classmethod
    def _in_range(cls, index: int | None, info: ValidationInfo) -> int | None:
        count = len((info.context or {}).get("task_ids", ()))
        if index is not None and index >= count:
            raise PydanticCustomError("index_range", "index must be below {count}", {"count": count})
        return index

"""The one message format shared by every model backend and by the agent loop.

Wire formats (OpenAI JSON, chat templates, ...) live only inside the backends; everything
else speaks these small frozen models.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "length", "tool_calls"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Frozen):
    """A request from the model to run one tool."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class InvalidToolCall(_Frozen):
    """A tool call the model attempted that cannot be run; `reason` is meant for the model."""

    id: str
    name: str | None
    raw: str
    reason: str


class Message(_Frozen):
    """One chat message. `tool_calls` only on assistant messages, `tool_call_id` on tool ones."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: tuple[ToolCall, ...] = ()) -> Message:
        return cls(role="assistant", content=content, tool_calls=tool_calls)

    @classmethod
    def tool(cls, content: str, *, tool_call_id: str, name: str | None = None) -> Message:
        return cls(role="tool", content=content, tool_call_id=tool_call_id, name=name)


class ToolSpec(_Frozen):
    """A tool offered to the model; `parameters` is a JSON schema of its arguments object."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class NamedToolChoice(_Frozen):
    """Force the model to call this one tool."""

    name: str


ToolChoice = Literal["auto", "none", "required"] | NamedToolChoice


class ModelParams(_Frozen):
    """Per-request generation options, grouped so backends take one object."""

    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """0 means greedy decoding."""
    max_tokens: int = Field(default=512, ge=1)
    """Upper bound on generated (completion) tokens."""
    tool_choice: ToolChoice = "auto"
    """"auto": model decides; "none": no tool calls; "required"/named: must call a tool."""
    timeout_s: float = Field(default=60.0, gt=0)
    """Wall-clock limit for the whole request, queueing included."""
    stop: tuple[str, ...] = ()
    """Generation ends as soon as the output contains one of these strings."""


class Usage(_Frozen):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class AssistantTurn(_Frozen):
    """What a model returns for one request."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    invalid_tool_calls: tuple[InvalidToolCall, ...] = ()
    """Calls the model attempted but got wrong (unknown tool, bad arguments)."""
    finish_reason: FinishReason = "stop"
    usage: Usage = Usage()

    def to_message(self) -> Message:
        """The assistant message to append to the history."""
        return Message.assistant(self.text, self.tool_calls)


class TextDelta(_Frozen):
    """A piece of answer text, streamed as it is generated."""

    type: Literal["text_delta"] = "text_delta"
    text: str


class ToolCallDone(_Frozen):
    """A complete, validated tool call."""

    type: Literal["tool_call"] = "tool_call"
    call: ToolCall


class TurnDone(_Frozen):
    """The last event of a stream: the whole turn, as `request` would have returned it."""

    type: Literal["turn_done"] = "turn_done"
    turn: AssistantTurn


StreamEvent = TextDelta | ToolCallDone | TurnDone

"""A tool as data: its name, the description the model reads, typed arguments (their JSON
schema is what the model may write), and its result: compact JSON for the model, the
sources the answer may footnote, the charts of the answer card."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from crow.chat.agent.charts import Chart
from crow.chat.agent.context import ToolContext
from crow.chat.agent.sources import Source
from crow.chat.agent.tool_args import ToolArgs
from models.messages import ToolSpec


@dataclass(frozen=True)
class ToolOutput:
    content: dict[str, Any]
    sources: list[Source] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)  # for the answer card, not the model

    def for_model(self) -> str:
        return json.dumps(self.content, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    args: type[ToolArgs]
    fn: Callable[[Any, ToolContext], Awaitable[ToolOutput]]

    @property
    def spec(self) -> ToolSpec:
        schema = self.args.model_json_schema()
        params = {
            "type": "object",
            "properties": {
                name: _plain(prop) for name, prop in schema.get("properties", {}).items()
            },
        }
        if schema.get("required"):
            params["required"] = schema["required"]
        return ToolSpec(name=self.name, description=self.description, parameters=params)

    async def invoke(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        return await self.fn(self.args.model_validate(arguments), ctx)


def _plain(prop: dict[str, Any]) -> dict[str, Any]:
    """A property schema without pydantic's anyOf-null wrapping, for small models."""
    out = {k: v for k, v in prop.items() if k not in {"title", "default", "anyOf"}}
    for option in prop.get("anyOf", []):
        if option.get("type") != "null":
            out.update(option)
    return out

"""How the agent loop runs: its limits, timeouts and whether a small model gets hints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crow.settings import AppSettings


@dataclass(frozen=True)
class AgentConfig:
    max_iterations: int = 5
    tool_timeout_s: float = 15.0
    model_timeout_s: float = 90.0
    max_tokens: int = 512
    hints: bool = False
    """Guidance for small models: examples and a routing hint the model reads, no decisions."""

    @classmethod
    def from_settings(cls, s: AppSettings) -> AgentConfig:
        return cls(
            max_iterations=s.limits.max_iterations,
            tool_timeout_s=s.timeouts.tool_s,
            model_timeout_s=s.timeouts.model_s,
            max_tokens=s.llm.max_tokens,
            hints=s.agent_guidance == "hints",
        )

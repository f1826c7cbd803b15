"""The five CROW tools as JSON schemas, for model-layer tests (the real ones live in crow/)."""

from __future__ import annotations

from models.messages import ToolSpec

_DATE = {"type": "string", "description": "ISO date (YYYY-MM-DD) or datetime"}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": 50, "description": "Max results"}
_CHANNEL = {"type": "string", "enum": ["web", "cctv", "social"], "description": "Channel"}


def _object(properties: dict[str, object], required: list[str]) -> dict[str, object]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


SEARCH_PRODUCTS = ToolSpec(
    name="search_products",
    description="Search the product catalog by meaning.",
    parameters=_object(
        {
            "query": {"type": "string", "description": "What to look for"},
            "limit": _LIMIT,
            "sort": {"type": "string", "enum": ["relevance", "popularity"]},
        },
        ["query"],
    ),
)
SEARCH_INTERACTIONS = ToolSpec(
    name="search_interactions",
    description="Search customer interactions (web, CCTV, social) by meaning.",
    parameters=_object(
        {
            "query": {"type": "string", "description": "What to look for"},
            "channel": _CHANNEL,
            "since": _DATE,
            "until": _DATE,
            "limit": _LIMIT,
        },
        ["query"],
    ),
)
SEARCH_PATTERNS = ToolSpec(
    name="search_patterns",
    description="Search detected behavioral patterns and trends.",
    parameters=_object(
        {
            "query": {"type": "string", "description": "What to look for"},
            "type": {"type": "string", "description": "Pattern type, e.g. trend or anomaly"},
            "since": _DATE,
            "limit": _LIMIT,
        },
        ["query"],
    ),
)
SEARCH_ORG_CONTEXT = ToolSpec(
    name="search_org_context",
    description="Search the organization's knowledge base (profile, goals, markets).",
    parameters=_object(
        {"query": {"type": "string", "description": "What to look for"}, "limit": _LIMIT},
        ["query"],
    ),
)
GET_INTERACTION_SUMMARY = ToolSpec(
    name="get_interaction_summary",
    description="Count customer interactions, optionally by channel and time range.",
    parameters=_object({"channel": _CHANNEL, "since": _DATE, "until": _DATE}, []),
)

TOOLS = (
    SEARCH_PRODUCTS,
    SEARCH_INTERACTIONS,
    SEARCH_PATTERNS,
    SEARCH_ORG_CONTEXT,
    GET_INTERACTION_SUMMARY,
)

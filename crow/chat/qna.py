"""Q&A: answers from the organization's knowledge base only, with footnotes.

Retrieval first (the question is always searched in the knowledge base), then one model call
that sees only those documents: no tool choice for the model to get wrong.
"""

from __future__ import annotations

import time

from crow.chat.agent.answer import AgentAnswer
from crow.chat.agent.context import ToolContext
from crow.chat.agent.sources import select_sources, with_footnotes
from crow.chat.agent.tool_args import OrgContextArgs
from crow.chat.agent.tools import search_org_context
from models.chat import ChatModel
from models.messages import Message, ModelParams

QNA_PROMPT = (
    "You are CROW AI answering questions about {org} from its knowledge base. Use only the "
    "documents below; if they do not answer the question, say that the knowledge base does "
    "not cover it. Be concise. Do not write a sources list.\n\nDocuments:\n{documents}"
)


QNA_DOCUMENT_CHARS = 800
"""Of each document, what a Q&A answer reads: its prompt holds the documents alone."""


async def answer_from_kb(
    model: ChatModel,
    ctx: ToolContext,
    org_name: str,
    history: list[Message],
    question: str,
    *,
    top_k: int = 4,
    params: ModelParams | None = None,
) -> AgentAnswer:
    started = time.perf_counter()
    found = await search_org_context(
        OrgContextArgs(query=question, limit=top_k), ctx, chars=QNA_DOCUMENT_CHARS
    )
    tools_s = time.perf_counter() - started
    docs = "\n\n".join(
        f"## {d['title']} ({d['type']})\n{d['text']}" for d in found.content["documents"]
    )
    messages = [
        Message.system(QNA_PROMPT.format(org=org_name, documents=docs or "(none found)")),
        *history,
        Message.user(question),
    ]
    turn = await model.request(messages, [], params or ModelParams(tool_choice="none"))
    sources = select_sources(turn.text, found.sources)
    step = {
        "id": "kb",
        "name": "search_org_context",
        "arguments": {"query": question, "limit": top_k},
        "ok": True,
        "error": None,
        "results": len(found.sources),
        "ms": round(tools_s * 1000, 1),
    }
    total = time.perf_counter() - started
    return AgentAnswer(
        content=with_footnotes(turn.text, sources),
        sources=sources,
        tool_steps=[step],
        timings={
            "model_s": round(total - tools_s, 3),
            "tools_s": round(tools_s, 3),
            "total_s": round(total, 3),
        },
        iterations=1,
        tokens=turn.usage.total,
    )

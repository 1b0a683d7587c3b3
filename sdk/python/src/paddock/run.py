"""A run as a context manager: bootstrapped on entry, rejected on exit
unless it was submitted by then (an orchestrator that fails half-way
leaves no run behind waiting for a decision)."""

from __future__ import annotations

import time
from typing import Any, Optional

from . import types as t
from .errors import Conflict, NotFound, PaddockError

#: The event a submission records.
SUBMITTED = "changeset.submitted"


def _needs_reject(run: t.Run) -> bool:
    # review is set from the submission on (submitted, approved, applied,
    # rejected); a run without one was never submitted.
    return run.review is None


class RunSession:
    """A bootstrapped run: id, token, run (as bootstrapped), client (the
    orchestrator's) and agent (a client with the run's own token, for what
    the agent does). Leaving the with block rejects the run unless it was
    submitted; rejected says whether it did."""

    def __init__(self, client: Any, boot: t.BootstrapResult) -> None:
        self.client = client
        self.boot = boot
        self.run: t.Run = boot.run
        self.id: str = boot.run.id
        self.token: str = boot.token
        self.agent = client.with_token(boot.token)
        self.rejected = False

    # What an orchestrator does with its run most.
    def refresh(self) -> t.Run:
        self.run = self.client.get_run(self.id)
        return self.run

    def events(self, *, after: int = 0):
        return self.client.stream_events(self.id, after=after)

    def submit(self, **fields: Any) -> t.ChangeSet:
        """Submit as the agent would (with the run's token)."""
        return self.agent.submit(self.id, **fields)

    def wait_for_submission(self, *, after: int = 0, timeout: Optional[float] = None) -> t.Event:
        """Follow the run's events until it is submitted; the event."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for ev in self.client.stream_events(self.id, after=after):
            if ev.type == SUBMITTED:
                return ev
            if deadline is not None and time.monotonic() > deadline:
                break
        raise TimeoutError(f"run {self.id} was not submitted in {timeout}s")

    def close(self) -> None:
        try:
            if _needs_reject(self.client.get_run(self.id)):
                self.client.reject_run(self.id)
                self.rejected = True
        except (Conflict, NotFound):
            pass  # decided or gone meanwhile
        finally:
            self.agent.close()

    def __enter__(self) -> "RunSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AsyncRunSession(RunSession):
    """RunSession for AsyncClient: async with, and coroutines."""

    async def refresh(self) -> t.Run:  # type: ignore[override]
        self.run = await self.client.get_run(self.id)
        return self.run

    async def submit(self, **fields: Any) -> t.ChangeSet:  # type: ignore[override]
        return await self.agent.submit(self.id, **fields)

    async def wait_for_submission(self, *, after: int = 0, timeout: Optional[float] = None) -> t.Event:  # type: ignore[override]
        import asyncio

        async def follow() -> t.Event:
            async for ev in self.client.stream_events(self.id, after=after):
                if ev.type == SUBMITTED:
                    return ev
            raise PaddockError("internal", "the event stream ended")

        try:
            return await asyncio.wait_for(follow(), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"run {self.id} was not submitted in {timeout}s") from None

    async def close(self) -> None:  # type: ignore[override]
        try:
            if _needs_reject(await self.client.get_run(self.id)):
                await self.client.reject_run(self.id)
                self.rejected = True
        except (Conflict, NotFound):
            pass
        finally:
            await self.agent.aclose()

    async def __aenter__(self) -> "AsyncRunSession":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class _AsyncRunStarter:
    """What AsyncClient.run gives: bootstraps on async with."""

    def __init__(self, client: Any, request: Any, fields: Any) -> None:
        self._client, self._request, self._fields = client, request, fields
        self._session: Optional[AsyncRunSession] = None

    async def __aenter__(self) -> AsyncRunSession:
        boot = await self._client.bootstrap(self._request, **self._fields)
        self._session = AsyncRunSession(self._client, boot)
        return self._session

    async def __aexit__(self, *exc: Any) -> None:
        if self._session is not None:
            await self._session.close()

"""Dynamic batching: concurrent requests are gathered into one vectorized ranker call.

A single worker takes the first waiting request, then everything already queued, then waits at most ``max_wait``
seconds for more, until ``max_batch`` histories are gathered; it ranks them in one call on its own thread (so the
event loop keeps accepting requests meanwhile) and hands each request its rows back. Two rules keep it from idling:
it does not wait when the previous call served a single request and nothing else is queued (without load, a request
is not delayed, however many histories it holds), and it stops waiting as soon as as many requests are gathered as
the previous call served (under a steady load the same clients come back; waiting out ``max_wait`` for more would
only leave the cores idle: 8% fewer requests/s at concurrency 32 in ``benchmarks/bench_serve.py``).
``max_batch=1`` ranks every history alone: the one-request-per-call reference the benchmark compares against.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from crabrec.data.dataset import Ragged, Samples

RankFn = Callable[[Samples], tuple[np.ndarray, np.ndarray]]


@dataclass
class Pending:
    rows: Samples
    done: asyncio.Future = field(repr=False)


def concat(parts: list[Samples]) -> Samples:
    """The rows of ``parts``, one after the other (all padded to the same history width)."""
    if len(parts) == 1:
        return parts[0]
    keys = ("user", "history", "length", "target")
    seen = None
    if any(p.seen is not None for p in parts):  # a row that excludes nothing gets an all-PAD row
        seen = Ragged([r for p in parts for r in (p.seen if p.seen is not None else [[]] * len(p))])
    return Samples(*(np.concatenate([getattr(p, k) for p in parts]) for k in keys), seen=seen)


MAX_WAIT_MS = 10_000.0  # a batch that waits longer for company than this would hold its first request too long


def check_limits(max_batch: int, max_wait_ms: float) -> None:
    """A one-line error unless ``max_batch`` ≥ 1 and ``max_wait_ms`` is a number of milliseconds in [0, 10 000]."""
    from crabrec.errors import CrabError

    if not isinstance(max_batch, int) or isinstance(max_batch, bool) or max_batch < 1:
        raise CrabError(f"max_batch={max_batch!r}: expected a whole number ≥ 1")
    if not isinstance(max_wait_ms, int | float) or not 0 <= max_wait_ms <= MAX_WAIT_MS:  # NaN fails too
        raise CrabError(f"max_wait_ms={max_wait_ms!r}: expected milliseconds from 0 to {MAX_WAIT_MS:,.0f}")


class DynamicBatcher:
    """Ranks the rows of concurrent :meth:`submit` calls together; ``stats`` counts calls and histories."""

    def __init__(self, rank: RankFn, max_batch: int = 64, max_wait_ms: float = 5.0) -> None:
        check_limits(max_batch, max_wait_ms)
        self.rank, self.max_batch, self.max_wait = rank, max_batch, max_wait_ms / 1000.0
        self.queue: asyncio.Queue[Pending] = asyncio.Queue()
        self.worker: asyncio.Task | None = None
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crabrec-rank")
        self.stats = {"calls": 0, "histories": 0, "largest": 0}
        self.last = 0  # requests served by the previous call

    def start(self) -> None:
        """Start ranking on the running event loop (a server's one loop; again on a new loop, as a test client
        without its lifespan runs each request on one of its own: the old loop's worker and queue are gone)."""
        loop = asyncio.get_running_loop()
        if self.worker is None or self.worker.get_loop() is not loop:
            self.queue = asyncio.Queue()
            self.worker = loop.create_task(self._run())

    async def stop(self) -> None:
        if self.worker is not None and self.worker.get_loop() is asyncio.get_running_loop():
            self.worker.cancel()
            await asyncio.gather(self.worker, return_exceptions=True)
        self.worker = None  # (a worker on another loop ended with it)
        self.pool.shutdown(wait=True)

    async def submit(self, rows: Samples) -> tuple[np.ndarray, np.ndarray]:
        """``(items, scores)`` of ``rows``, ranked in whatever batch they joined."""
        self.start()
        done = asyncio.get_running_loop().create_future()
        await self.queue.put(Pending(rows, done))
        return await done

    async def _gather(self) -> list[Pending]:
        batch = [await self.queue.get()]
        size = len(batch[0].rows)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.max_wait if self.last > 1 or not self.queue.empty() else 0.0)
        while size < self.max_batch:
            try:
                nxt = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                if len(batch) >= self.last > 1:  # as many requests as the previous call: the clients are back
                    break
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    nxt = await asyncio.wait_for(self.queue.get(), left)
                except asyncio.TimeoutError:
                    break
            batch.append(nxt)
            size += len(nxt.rows)
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [p for p in await self._gather() if not p.done.cancelled()]
            if not batch:
                continue
            rows = concat([p.rows for p in batch])
            self.stats["calls"] += 1
            self.stats["histories"] += len(rows)
            self.stats["largest"] = max(self.stats["largest"], len(rows))
            self.last = len(batch)
            try:
                items, scores = await loop.run_in_executor(self.pool, self.rank, rows)
            except Exception as exc:  # handed to the requests that were in the batch
                for p in batch:
                    if not p.done.done():
                        p.done.set_exception(exc)
                continue
            start = 0
            for p in batch:
                end = start + len(p.rows)
                if not p.done.done():
                    p.done.set_result((items[start:end], scores[start:end]))
                start = end

"""Dynamic batching: concurrent predict calls merged into one signature call.

Calls to the same model version and signature whose shared (scalar) inputs are equal —
``k`` of ``next_tokens``, say — join one batch. A batch runs when it holds
``max_batch_size`` rows or ``batch_timeout_ms`` after its first call arrived, whichever
comes first (TF Serving's ``max_batch_size`` / ``batch_timeout_micros``); batches run on a
pool of ``num_batch_threads`` worker threads, never on the event loop.

With ``eager`` (off by default) a batch also starts at once when no signature call is
running, so a lone caller skips the timeout. Measured on 2 shared CPUs it cost throughput
under load (batches of 2-3 instead of ~13: each signature call has a fixed cost that holds
the GIL against the event loop), so TF Serving's behaviour is the default.

Each caller gets its own rows back, trimmed to what it would have got alone (``score``
pads its per-token outputs to the longest text of the batch; they are cut back to the
caller's ``lengths``).
If a merged batch fails, its calls are retried one by one so that one bad request cannot
fail its neighbours.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from keras_seq.serving.codec import PredictRequest
from keras_seq.serving.errors import ServingError


@dataclass
class _Pending:
    servable: object
    signature: str
    items: list = field(default_factory=list)  # (PredictRequest, Future)
    rows: int = 0
    timer: asyncio.TimerHandle | None = None


def _key(servable, request: PredictRequest) -> tuple:
    sig = request.signature
    parts = []
    for name, spec in sorted(sig.inputs.items()):
        arr = request.inputs[name]
        if spec.is_scalar:
            parts.append((name, arr.dtype.str, arr.tobytes() if arr.dtype != object else
                          repr(arr.item())))
        else:
            parts.append((name, arr.shape[1:]))
    return (servable.name, servable.version, sig.name, tuple(parts))


def _trim(request: PredictRequest, outputs: dict) -> dict:
    """Cut per-token outputs padded by a longer neighbour back to this request's length."""
    lengths = outputs.get("lengths")
    if lengths is None or lengths.ndim != 1:
        return outputs
    longest = int(lengths.max()) if lengths.size else 0
    out = {}
    for name, arr in outputs.items():
        spec = request.signature.outputs.get(name)
        if spec is not None and len(spec.shape) >= 2 and spec.shape[1] is None:
            arr = arr[:, :longest]
        out[name] = arr
    return out


class Batcher:
    """Merge concurrent :class:`PredictRequest` s into batched signature calls."""

    def __init__(self, max_batch_size: int = 32, batch_timeout_ms: float = 2.0,
                 num_batch_threads: int = 2, batch_signatures=("score", "next_tokens",
                                                                 "serving_default"),
                 eager: bool = False):
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be ≥ 1, got {max_batch_size}")
        if batch_timeout_ms < 0:
            raise ValueError(f"batch_timeout_ms must be ≥ 0, got {batch_timeout_ms}")
        self.max_batch_size = max_batch_size
        self.timeout_s = batch_timeout_ms / 1000.0
        self.batch_signatures = set(batch_signatures)
        self.workers = max(1, num_batch_threads)
        self.eager = eager
        self.executor = ThreadPoolExecutor(self.workers, thread_name_prefix="keras-seq-batch")
        self._running = 0  # signature calls submitted to the executor and not yet done
        self._pending: dict[tuple, _Pending] = {}
        self._tasks: set = set()
        self.batches = 0  # batches run
        self.batched_requests = 0  # requests that went through a batch
        self.requests = 0  # every predict request
        self.max_seen = 0  # most requests in one batch

    async def submit(self, servable, request: PredictRequest) -> dict:
        """The outputs (numpy) of ``request`` on ``servable``."""
        loop = asyncio.get_running_loop()
        sig = request.signature
        if (sig.name not in self.batch_signatures or not sig.batchable
                or request.rows >= self.max_batch_size):
            self.requests += 1
            return await self._call(servable, sig.name, request.inputs)
        key = _key(servable, request)
        future = loop.create_future()
        pending = self._pending.get(key)
        if pending is not None and pending.rows + request.rows > self.max_batch_size:
            self._flush(key, pending)
            pending = None
        if pending is None:
            pending = self._pending[key] = _Pending(servable, sig.name)
            if self.timeout_s > 0:
                pending.timer = loop.call_later(self.timeout_s, self._flush, key, pending)
        pending.items.append((request, future))
        pending.rows += request.rows
        if (pending.rows >= self.max_batch_size or self.timeout_s == 0
                or (self.eager and self._running == 0)):
            self._flush(key, pending)
        return await future

    async def _call(self, servable, signature: str, inputs: dict) -> dict:
        """One signature call on the worker pool; when it ends, start a waiting batch if
        workers are free (eager mode)."""
        loop = asyncio.get_running_loop()
        self._running += 1
        try:
            return await loop.run_in_executor(self.executor, servable.run, signature, inputs)
        finally:
            self._running -= 1
            if self.eager and self._pending and self._running == 0:
                key, pending = next(iter(self._pending.items()))
                self._flush(key, pending)

    def _flush(self, key, pending: _Pending) -> None:
        if self._pending.get(key) is pending:
            del self._pending[key]
        if pending.timer is not None:
            pending.timer.cancel()
            pending.timer = None
        if not pending.items:
            return
        items, pending.items = pending.items, []
        task = asyncio.get_running_loop().create_task(self._run(pending, items))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, pending: _Pending, items: list) -> None:
        servable, signature = pending.servable, pending.signature
        self.batches += 1
        self.requests += len(items)
        self.batched_requests += len(items)
        self.max_seen = max(self.max_seen, len(items))
        if len(items) == 1:
            request, future = items[0]
            try:
                result = await self._call(servable, signature, request.inputs)
            except Exception as err:  # noqa: BLE001 — handed to the caller
                if not future.done():
                    future.set_exception(err)
                return
            if not future.done():
                future.set_result(result)
            return
        first = items[0][0]
        merged = {}
        for name, spec in first.signature.inputs.items():
            if spec.is_scalar:
                merged[name] = first.inputs[name]
            else:
                merged[name] = np.concatenate([r.inputs[name] for r, _ in items], axis=0)
        try:
            result = await self._call(servable, signature, merged)
        except ServingError:
            # One bad request must not fail the others: run each on its own.
            for request, future in items:
                try:
                    one = await self._call(servable, signature, request.inputs)
                except Exception as err:  # noqa: BLE001
                    if not future.done():
                        future.set_exception(err)
                    continue
                if not future.done():
                    future.set_result(one)
            return
        except Exception as err:  # noqa: BLE001
            for _, future in items:
                if not future.done():
                    future.set_exception(err)
            return
        start = 0
        for request, future in items:
            stop = start + request.rows
            part = {k: v[start:stop] for k, v in result.items()}
            start = stop
            if not future.done():
                future.set_result(_trim(request, part))

    async def drain(self) -> None:
        """Run every pending batch now and wait for all running ones."""
        for key, pending in list(self._pending.items()):
            self._flush(key, pending)
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def close(self) -> None:
        self.executor.shutdown(wait=True)

    def stats(self) -> dict:
        return {"max_batch_size": self.max_batch_size,
                "batch_timeout_ms": self.timeout_s * 1000, "eager": self.eager,
                "num_batch_threads": self.workers, "batches": self.batches,
                "requests": self.requests, "batched_requests": self.batched_requests,
                "mean_requests_per_batch":
                    self.batched_requests / self.batches if self.batches else 0.0,
                "max_requests_per_batch": self.max_seen}

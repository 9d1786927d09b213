"""Dynamic batching without TensorFlow: a fake servable records the batches it runs."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from keras_seq.serving.codec import Limits, parse_predict
from keras_seq.serving.dynamic_batching import Batcher
from keras_seq.serving.errors import ServingError
from keras_seq.serving.servable import InputSpec, SignatureInfo

SCORE = SignatureInfo("score", {"text": InputSpec("text", "string", (None,))}, {
    "lengths": InputSpec("lengths", "int32", (None,)),
    "tokens": InputSpec("tokens", "string", (None, None))})
NEXT = SignatureInfo("next_tokens", {"text": InputSpec("text", "string", (None,)),
                                     "k": InputSpec("k", "int32", ())},
                     {"ids": InputSpec("ids", "int32", (None, None))})


class FakeServable:
    name, version = "fake", 1

    def __init__(self, delay=0.02):
        self.delay = delay
        self.batches = []
        self.lock = threading.Lock()
        self.signatures = {"score": SCORE, "next_tokens": NEXT}

    def signature(self, name):
        return self.signatures[name or "score"]

    def run(self, signature, inputs):
        time.sleep(self.delay)
        texts = [t.decode() for t in inputs["text"]]
        with self.lock:
            self.batches.append(texts)
        if "boom" in texts:
            raise ServingError(400, "boom")
        if signature == "next_tokens":
            k = int(inputs["k"])
            return {"ids": np.array([[len(t)] * k for t in texts], dtype="int32")}
        words = [t.split() for t in texts]
        width = max((len(w) for w in words), default=0)
        tokens = np.array([[w.encode() for w in ws] + [b""] * (width - len(ws))
                           for ws in words], dtype=object).reshape(len(texts), width)
        return {"lengths": np.array([len(w) for w in words], dtype="int32"), "tokens": tokens}


def _run(batcher, servable, bodies):
    async def go():
        reqs = [parse_predict(b, servable, Limits()) for b in bodies]
        return await asyncio.gather(*(batcher.submit(servable, r) for r in reqs),
                                    return_exceptions=True)
    try:
        return asyncio.run(go())
    finally:
        batcher.close()


def test_concurrent_calls_merge_and_are_trimmed():
    fake = FakeServable()
    batcher = Batcher(max_batch_size=8, batch_timeout_ms=50)
    out = _run(batcher, fake, [{"instances": ["a b c d"]}, {"instances": ["x"]},
                               {"instances": ["p q", "r"]}])
    assert fake.batches == [["a b c d", "x", "p q", "r"]]  # one call
    assert out[1]["tokens"].tolist() == [[b"x"]]  # not padded to the longest neighbour
    assert out[2]["tokens"].tolist() == [[b"p", b"q"], [b"r", b""]]
    assert batcher.stats()["max_requests_per_batch"] == 3


def test_different_scalars_do_not_share_a_batch_and_size_caps():
    fake = FakeServable()
    batcher = Batcher(max_batch_size=2, batch_timeout_ms=50)
    bodies = [{"signature_name": "next_tokens", "inputs": {"text": [t], "k": k}}
              for t, k in [("a", 1), ("bb", 2), ("cc", 1), ("d", 1)]]
    out = _run(batcher, fake, bodies)
    assert [o["ids"].tolist() for o in out] == [[[1]], [[2, 2]], [[2]], [[1]]]
    assert sorted(map(sorted, fake.batches)) == [["a", "cc"], ["bb"], ["d"]]


def test_a_failing_request_does_not_fail_its_neighbours():
    fake = FakeServable()
    out = _run(Batcher(max_batch_size=8, batch_timeout_ms=50), fake,
               [{"instances": ["ok"]}, {"instances": ["boom"]}, {"instances": ["fine"]}])
    assert isinstance(out[1], ServingError) and out[1].status == 400
    assert out[0]["lengths"].tolist() == [1] and out[2]["lengths"].tolist() == [1]


# An hour: a call that returns at all did not wait for the batch timer.
NEVER_MS = 3_600_000


def test_eager_mode_starts_a_lone_call_at_once():
    fake = FakeServable(delay=0.0)
    batcher = Batcher(max_batch_size=8, batch_timeout_ms=NEVER_MS, eager=True)

    async def go():
        request = parse_predict({"instances": ["a"]}, fake, Limits())
        # The 60 s bound only stops a broken batcher from hanging the test.
        return await asyncio.wait_for(batcher.submit(fake, request), 60)

    try:
        out = asyncio.run(go())
    finally:
        batcher.close()
    assert out["lengths"].tolist() == [1] and fake.batches == [["a"]]


def test_without_eager_a_lone_call_waits_for_its_batch():
    # The other side of the test above: TF Serving's default holds the call for the timer
    # (here an hour away), so nothing runs until the batch is flushed (drain).
    fake = FakeServable(delay=0.0)
    batcher = Batcher(max_batch_size=8, batch_timeout_ms=NEVER_MS)

    async def go():
        request = parse_predict({"instances": ["a"]}, fake, Limits())
        task = asyncio.ensure_future(batcher.submit(fake, request))
        for _ in range(50):  # let the loop run everything that is ready
            await asyncio.sleep(0)
        waiting = not task.done() and fake.batches == []
        await batcher.drain()
        return waiting, await asyncio.wait_for(task, 60)

    try:
        waiting, out = asyncio.run(go())
    finally:
        batcher.close()
    assert waiting and out["lengths"].tolist() == [1] and fake.batches == [["a"]]


@pytest.mark.parametrize("bad", [0, -1])
def test_batcher_arguments(bad):
    with pytest.raises(ValueError):
        Batcher(max_batch_size=bad)

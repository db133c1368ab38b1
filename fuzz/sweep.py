"""Every fixed-width field of every advertised request, one at a time, at each extreme:
sent alone through kcoord, each followed by a look at the broker behind it.

Where the random structured run (fuzz.live, mode "structured") says *that* a broker fell
over within some thousand frames, the sweep says *which* field and value did it, with no
bisection: one frame, one field changed, one verdict. A broker that dies, outgrows its
bound or stops answering is a finding; the target is then replaced (`confirm.Broker`).
"""
from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Iterator

from .confirm import Broker
from .health import alive, answers_api_versions, rss_mb
from .structured import _RAW_EXTREMES, RECORDS, StructuredFrames, _patched_batch

# The topic names fuzz.samples draws from that Kafka accepts: a sweep's target has them, as
# a random run's broker does once its first CreateTopics went through.
TOPICS = ("g", "group-1", "topic", "t-0", "member", "uniform", "range", "consumer", "rack-a", "x" * 40)


async def prepare(broker: Broker, partitions: int = 3) -> None:
    """Create TOPICS through kcoord, so that frames naming them meet existing topics."""
    import datetime

    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

    from coordinator.protocol.apis import CREATE_TOPICS

    from .structured import _encode_frame
    body = CreateTopicsRequest(topics=tuple(CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                                           assignments=(), configs=()) for name in TOPICS),
                               timeout=datetime.timedelta(seconds=10), validate_only=False)
    await _send(broker, _encode_frame(CREATE_TOPICS, 7, body), 10.0)


def frames(structured: StructuredFrames, values: tuple[int, ...] | None = None) -> Iterator[tuple[str, bytes]]:
    """(label, frame): each template's each slot at each extreme of its type (or ``values``
    where they fit the type); a record batch slot at each header extreme."""
    import random
    rng = random.Random(0)
    for template in structured.templates:
        for path, offset, fmt in dict.fromkeys(template.slots):
            if fmt == RECORDS:
                for _ in range(12):
                    batch, label = _patched_batch(rng)
                    out = bytearray(template.frame)
                    out[offset:offset + len(batch)] = batch
                    yield f"{template.label}: {path}.{label}", bytes(out)
                continue
            for value in values if values is not None else _RAW_EXTREMES[fmt]:
                out = bytearray(template.frame)
                try:
                    struct.pack_into(fmt, out, offset, value)
                except struct.error:
                    continue        # does not fit this field's type
                yield f"{template.label}: {path}={value}", bytes(out)


async def _send(broker: Broker, frame: bytes, answer_s: float) -> None:
    """One frame on its own connection; wait for the answer up to ``answer_s`` (a Produce
    with acks=0 gets none, a JoinGroup is held for its rebalance)."""
    try:
        reader, writer = await asyncio.open_connection(broker.host, broker.port)
    except OSError:
        return
    try:
        writer.write(frame)
        await asyncio.wait_for(reader.read(4), answer_s)
    except (TimeoutError, OSError):
        pass
    finally:
        writer.close()


def _state(broker: Broker, rss_limit_mb: float) -> str | None:
    if not alive(broker.pid):
        return "died"
    try:
        rss = rss_mb(broker.pid)
    except (OSError, RuntimeError):
        return "died"
    return f"reached {rss:.0f} MB RSS" if rss > rss_limit_mb else None


async def _run(broker: Broker, items: list[tuple[str, bytes]], *, rss_limit_mb: float, answer_s: float,
               window: int, probe_every: int) -> tuple[int, str | None]:
    """Send ``items`` ``window`` at a time until one harms the broker: (index past the last
    frame sent, harm or None)."""
    sent = 0
    while sent < len(items):
        batch = items[sent:sent + window]
        await asyncio.gather(*(_send(broker, frame, answer_s) for _, frame in batch))
        sent += len(batch)
        await asyncio.sleep(0.02)        # an allocation that kills takes a moment to show
        harm = _state(broker, rss_limit_mb)
        if harm is None and sent // probe_every != (sent - len(batch)) // probe_every:
            problem = await answers_api_versions(broker.broker_host, broker.broker_port, 5.0)
            harm = None if problem is None else "stopped answering"
        if harm is not None:
            return sent, harm
    return sent, None


async def sweep(items: list[tuple[str, bytes]], start: Callable[[], Broker], *, rss_limit_mb: float = 1024,
                answer_s: float = 0.3, window: int = 32, probe_every: int = 256,
                progress: Callable[[int, int], None] | None = None) -> list[str]:
    """'label: what it did' for every frame that harms the broker on its own. Frames go
    ``window`` at a time; when a window harms the broker, its frames are sent again one by
    one, each to a fresh target, to name the one(s) that did it. Every target first gets the
    topics frames name (`prepare`)."""
    found: list[str] = []
    done = 0

    async def fresh() -> Broker:
        broker = start()
        await prepare(broker)
        return broker
    broker = await fresh()
    try:
        while done < len(items):
            sent, harm = await _run(broker, items[done:], rss_limit_mb=rss_limit_mb, answer_s=answer_s,
                                    window=window, probe_every=probe_every)
            suspects = items[done + max(0, sent - window):done + sent] if harm is not None else []
            done += sent
            if progress is not None:
                progress(done, len(found))
            if harm is None:
                break
            broker.stop()
            broker = await fresh()
            for label, frame in suspects:
                _, alone = await _run(broker, [(label, frame)], rss_limit_mb=rss_limit_mb, answer_s=1.0,
                                      window=1, probe_every=1)
                if alone is not None:
                    found.append(f"{label}: {alone}")
                    broker.stop()
                    broker = await fresh()
            if not any(f.split(": ")[0] in {label for label, _ in suspects} for f in found):
                found.append(f"(one of {len(suspects)} frames together, from {suspects[0][0]}): {harm}")
    finally:
        broker.stop()
    return found

"""The lean state-topic writer: one idempotent producer per process, every shard's batch in
one ProduceRequest per broker (the `PartitionWriter` port of partition_writer.py, for the
state topic without fencing; docs/measurements/cpu-per-commit.md has why and what it saves).

Rules:
- One producer id for the process: InitProducerId without a transactional id (an idempotent
  producer, as Kafka's with enable.idempotence and no transactional.id). Each partition
  counts its own sequence under it; a batch takes its sequence when it is sent.
- One batch per partition in flight (`max_inflight` 1: the shard's writer sends its next
  batch once this one is acknowledged). Batches of different partitions led by one broker
  that are waiting when a send runs go into one ProduceRequest (acks=all); at most
  `MAX_REQUESTS_IN_FLIGHT` (1) request per broker is in flight on its link. A Kafka broker
  serves one request of a connection at a time (it mutes the connection until the answer is
  sent), so a second request in flight would gain only its transit; held back, every batch
  that arrives meanwhile joins the next request, and a request's fixed cost (kcoord's and the
  broker's) is paid once for all of them. Kafka's idempotent window (five batches per
  producer and partition) is not the bound here: a partition has one batch in flight anyway.
- A shard's batch closes as late as it can (`flush_before_send`): its writer's flush runs in
  the turn of the send that can carry it (its leader has no request in flight), before that
  send takes the waiting appends, not on a loop turn of its own. While a request is in
  flight, the operations that arrive meanwhile therefore join their shard's open batch, and
  go in the next request; closed at once, the batch would wait there with the shard's next
  one stuck behind it (one batch per partition in flight) for a request more. A partition
  batch costs the broker about as much as ~19 records (bench/bench_broker_produce_cost.py).
- An append completes with its batch's base offset only once the broker acknowledged it with
  acks=all, so a response is released only after its records are replicated.
- A retry resends the same bytes (same producer id, epoch and sequence), so a batch that
  landed the first time is deduplicated by the broker, which answers its original offset.
  Retried: a link that failed (outcome unknown), and a leader that moved (REFRESH answers:
  nothing was appended), until the append's delivery deadline.
- Anything else fails the append (the shard reloads from the log: writer.py), and the next
  send starts a new producer id, every sequence from 0: after a failed batch the partition's
  next sequence is in doubt (a refused batch did not take its sequences; after
  OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, DUPLICATE_SEQUENCE_NUMBER without an
  offset as Tansu answers it, or a deadline run out after a lost link, nobody knows).
- TLS and SASL come with the links (fenced_links.UpstreamLinks over kcoord's one upstream
  client, coordinator/upstream/client.py); the record batch is records/batch.py's.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId
from kio.static.primitive import i16

from records.batch import build_batch

from ..protocol.framing import write_uvarint
from ..upstream.client import EncodedRequest
from .fenced_links import (
    INIT_PRODUCER_ID,
    PRODUCE,
    REFRESH,
    VERSIONS,
    StateLogError,
    UpstreamLinks,
    duration_ms,
    make_request,
)
from .partition_writer import Written
from .state_log import TopicAuthorizationFailed

log = logging.getLogger("kcoord.state_topic")

# docs/measurements/write-path-cost.md ("requests in flight"): with 5, the closed loop of
# bench/bench_commit_cpu.py kept ~3 requests in flight of ~12 commits each; 1 took 9 % off
# kcoord's CPU per commit there, and 18 % off the server side's (kcoord and the broker on one
# core) in bench/bench_side_by_side.py, with lower latency: that loop is bound by CPU.
MAX_REQUESTS_IN_FLIGHT = 1
RETRY_BACKOFF_S = 0.05
_ACKS_TIMEOUT = struct.Struct(">hi")
_I32 = struct.Struct(">i")
_INIT_RETRIABLE = frozenset({ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
                             ErrorCode.not_coordinator, ErrorCode.concurrent_transactions})


class _Append:
    __slots__ = ("partition", "records", "timestamp_ms", "future", "then", "deadline", "batch", "producer")

    def __init__(self, partition: int, records: Sequence[tuple[bytes, bytes | None]], timestamp_ms: int,
                 future: asyncio.Future[int] | None, deadline: float,
                 then: Written | None = None) -> None:
        self.partition = partition
        self.records = records
        self.timestamp_ms = timestamp_ms
        # Completed with the base offset or the failure: the future (`append`), or `then`,
        # called once and then cleared (`append_then`).
        self.future = future
        self.then = then
        self.deadline = deadline
        self.batch: bytes | None = None       # built once, at its first send; resent as is
        self.producer = (-1, -1)


class LeanWriter:
    """`PartitionWriter` of the state topic: `append(partition, records, timestamp_ms)`."""

    max_inflight = 1

    def __init__(self, links: UpstreamLinks, topic: str, *, delivery_timeout_s: float = 30.0) -> None:
        self.links = links
        self.topic = topic
        self.delivery_timeout_s = delivery_timeout_s
        self.producer_id = -1
        self.epoch = -1
        self.sequences: dict[int, int] = {}
        self._waiting: list[_Append] = []       # not sent yet, in arrival order
        self._sending: set[int] = set()         # partitions with a batch in flight
        self._sent: set[_Append] = set()        # the appends in flight
        self._requests: dict[tuple[str, int], int] = defaultdict(int)   # in flight per broker
        self._scheduled = False
        self._flushes: list[tuple[int, Callable[[], None]]] = []   # flush_before_send's, in order
        self._preparing: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._answers: set[asyncio.Future[Any]] = set()     # the requests' answers awaited
        self._requests_of = _ProduceRequests()
        # Called as on_failure(partition, error) when an append fails (the StateTopic's
        # on_write_error), at once: nobody needs to await the append for it to be reported.
        self.on_failure: Callable[[int, BaseException], None] | None = None
        self.requests_sent = self.batches_sent = 0      # figures for benchmarks
        self._closed = False                    # close(): nothing is sent or retried after it

    async def start(self) -> None:
        await self._init_producer()

    def close(self) -> None:
        self._closed = True
        for task in (*self._tasks, self._preparing, *self._answers):
            if task is not None:
                task.cancel()
        error = StateLogError(f"state topic {self.topic}: writer closed")
        # Taken before any is failed: an append's `then` may append again meanwhile.
        sent, waiting, flushes = self._sent, self._waiting, self._flushes
        self._sent, self._waiting, self._flushes = set(), [], []
        for a in (*sent, *waiting):     # nobody will hear their requests' answers
            _fail(a, self.on_failure, self.topic, error)
        for _, flush in flushes:        # their appends are refused: the shards' writes fail
            asyncio.get_running_loop().call_soon(flush)

    def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]],
               timestamp_ms: int) -> asyncio.Future[int]:
        """The future of the batch's base offset (awaited by the shard's write): a future, not
        a coroutine awaiting it, so a batch costs no coroutine of its own here."""
        if not records:
            raise ValueError("an append needs at least one record")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        self._waiting.append(_Append(partition, records, timestamp_ms, future,
                                     time.monotonic() + self.delivery_timeout_s))
        self._schedule()
        return future

    def append_then(self, partition: int, records: Sequence[tuple[bytes, bytes | None]], timestamp_ms: int,
                    then: Written) -> None:
        """`append`, its outcome handed to ``then(base_offset, None)`` or ``then(-1, error)``
        once, from the callback that reads the answer (partition_writer.py): no future, and
        no loop turn between the answer and the shard's writer (a batch often holds one
        commit end to end)."""
        if not records:
            raise ValueError("an append needs at least one record")
        self._waiting.append(_Append(partition, records, timestamp_ms, None,
                                     time.monotonic() + self.delivery_timeout_s, then))
        if not self._scheduled:
            self._schedule()

    def flush_before_send(self, partition: int, flush: Callable[[], None]) -> None:
        """Call ``flush`` (a shard's writer's, which appends its batch) in the turn of the next
        send that can carry `partition`'s batch, before that send takes its waiting appends
        (module rules); a send is scheduled unless the partition's leader has a request in
        flight, whose answer schedules one."""
        if self._closed:    # no send will come: the flush's appends are refused at once
            asyncio.get_running_loop().call_soon(flush)
            return
        self._flushes.append((partition, flush))
        if self._scheduled:
            return
        address = self.links.brokers.get(self.links.leaders.get(partition, -1))
        if address is None or self._requests.get(address, 0) < MAX_REQUESTS_IN_FLIGHT:
            self._schedule()

    # ------------------------------------------------------------------ sending
    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            # After the operations already queued on the loop had their turn: their batches
            # join this request.
            asyncio.get_running_loop().call_soon(self._send)

    def _send(self) -> None:
        self._scheduled = False
        if self._flushes and not self._closed:
            _flush_shards(self)
        if self._closed:
            # Appended after close(), or answered in its turn: nobody sends them any more.
            waiting, self._waiting = self._waiting, []
            for a in waiting:
                _fail(a, self.on_failure, self.topic, StateLogError(f"state topic {self.topic}: writer closed"))
            return
        if not self._waiting or self._preparing is not None:
            return
        brokers, leaders = self.links.brokers, self.links.leaders
        # Each append's leader looked up once (a list, not a generator per send: a send per write).
        waiting = self._waiting
        addresses = [brokers.get(leaders.get(a.partition, -1)) for a in waiting]
        if self.producer_id < 0 or None in addresses:
            self._preparing = self._spawn(self._prepare())
            return
        # Taken: an expired append's `then` may append again meanwhile (kept after these).
        self._waiting = []
        now = time.monotonic()
        by_broker: dict[tuple[str, int], list[_Append]] = defaultdict(list)
        keep = []
        for a, address in zip(waiting, addresses):
            if a.deadline < now:
                self._expired(a)
                continue
            assert address is not None
            if a.partition in self._sending or self._requests[address] >= MAX_REQUESTS_IN_FLIGHT:
                keep.append(a)
                continue
            self._sending.add(a.partition)
            self._sent.add(a)
            by_broker[address].append(a)
        later, self._waiting = self._waiting, keep      # appended by a `then` meanwhile
        requests = list(by_broker.items())
        if self.producer_id < 0:
            # An expired append sent under this producer id put its sequences in doubt
            # (`_failed`): none of these may be built under producer id -1, so they wait for
            # the next producer id with the rest.
            self._put_back(waiting, [a for _, appends in requests for a in appends])
            requests = []
        self._waiting.extend(later)
        for i, (address, appends) in enumerate(requests):
            if self.producer_id < 0:    # a request before this one failed to build and reset it
                self._put_back(waiting, [a for _, rest in requests[i:] for a in rest])
                return
            self._requests[address] += 1
            try:
                self._produce(address, appends)
            except Exception as e:      # building the request (a bug, a value out of range)
                self._requests[address] -= 1
                error = StateLogError(f"produce to {self.topic}: the request could not be built: {e!r}")
                for a in appends:
                    self._sending.discard(a.partition)
                    self._sent.discard(a)
                    self._failed(a, error)
                if self._flushes:       # the broker is free again: its shards' flushes
                    self._schedule()

    def _put_back(self, taken: list[_Append], appends: list[_Append]) -> None:
        """Appends placed in a send that will not go out now: back to the waiting ones, in
        the order they arrived (``taken``, the send's waiting list): a partition's later
        append may wait there already, and a partition's appends land in arrival order."""
        for a in appends:
            self._sending.discard(a.partition)
            self._sent.discard(a)
        order = {id(a): i for i, a in enumerate(taken)}
        self._waiting = sorted(self._waiting + appends, key=lambda a: order.get(id(a), len(order)))
        self._schedule()

    def _spawn(self, coro: Any) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _prepare(self) -> None:
        """A producer id, and the leaders of the waiting appends' partitions."""
        try:
            if self.producer_id < 0:
                await self._init_producer()
            await self.links.refresh_metadata()
            missing = {a.partition for a in self._waiting} - {
                p for p, leader in self.links.leaders.items() if leader in self.links.brokers}
            if missing:
                raise StateLogError(f"state topic {self.topic}: no leader for partitions {sorted(missing)}")
        except Exception as e:
            error = e if isinstance(e, StateLogError) else StateLogError(f"state topic {self.topic}: {e!r}")
            waiting, self._waiting = self._waiting, []
            for a in waiting:
                self._failed(a, error)
        finally:
            self._preparing = None
        self._schedule()

    async def _init_producer(self) -> None:
        self.producer_id, self.epoch = await _init_idempotent_producer(self.links, self.topic,
                                                                       self.delivery_timeout_s)
        self.sequences.clear()
        log.info("state topic %s: writing as idempotent producer %d epoch %d", self.topic, self.producer_id,
                 self.epoch)

    def _batch(self, a: _Append) -> bytes:
        if a.batch is None:
            sequence = self.sequences.get(a.partition, 0)
            a.batch = build_batch(a.records, timestamp_ms=a.timestamp_ms, producer_id=self.producer_id,
                                  producer_epoch=self.epoch, base_sequence=sequence)
            a.producer = (self.producer_id, self.epoch)
            # Sequences wrap at 2^31 (Kafka's DefaultRecordBatch.incrementSequence).
            self.sequences[a.partition] = (sequence + len(a.records)) % 2**31
        return a.batch

    def _produce(self, address: tuple[str, int], appends: list[_Append]) -> None:
        """One ProduceRequest of `appends`; its answer is taken by `_produced`, a callback on
        the link's future (no Task and coroutine per request: write-path-cost.md)."""
        request = self._requests_of.build(self.topic, self.links.request_timeout_s, appends, self._batch)
        self.requests_sent += 1
        self.batches_sent += len(appends)
        answer = self.links.send(address, request)
        self._answers.add(answer)
        answer.add_done_callback(partial(self._produced, address, appends, request))

    def _produced(self, address: tuple[str, int], appends: list[_Append], request: Any,
                  answer: asyncio.Future[Any]) -> None:
        self._answers.discard(answer)
        retry: list[_Append] = []
        try:
            if answer.cancelled():      # close(): its appends failed there
                return
            error = answer.exception()
            if error is not None:
                e = self.links.failed(address, request, error)
                # Outcome unknown: the same bytes again (a batch that landed is deduplicated).
                log.debug("state topic %s: produce to %s:%d failed (%s); retrying", self.topic, *address, e)
                self.links.leaders.clear()
                retry = appends
                return
            response = answer.result()
            answers = {int(p.index): p for t in response.responses for p in t.partition_responses}
            for a in appends:
                self._answered(a, answers.get(a.partition), retry)
        finally:
            self._requests[address] -= 1
            for a in appends:
                self._sending.discard(a.partition)
                self._sent.discard(a)
            if self._closed:
                # Answered in close()'s turn, before this callback ran: close() failed these
                # appends; nothing is queued again or sent after it.
                for a in retry:
                    _fail(a, self.on_failure, self.topic, StateLogError(f"state topic {self.topic}: writer closed"))
            elif retry:
                now = time.monotonic()
                for a in retry:
                    if a.deadline < now:
                        self._expired(a)
                    else:
                        self._waiting.insert(0, a)
                asyncio.get_running_loop().call_later(RETRY_BACKOFF_S, self._schedule)
            elif self._waiting or self._flushes:
                self._schedule()

    def _answered(self, a: _Append, answer: Any, retry: list[_Append]) -> None:
        if answer is None:
            self._failed(a, StateLogError(f"produce to {self.topic}-{a.partition}: no answer for the partition"))
            return
        code = answer.error_code
        base = int(answer.base_offset)
        if code == ErrorCode.none or (code == ErrorCode.duplicate_sequence_number and base >= 0):
            then = a.then
            if then is not None:
                a.then = None
                try:
                    then(base, None)
                except Exception:
                    # Logged; the other appends of this answer are still completed (as a
                    # future's failed callback is reported and the others run).
                    log.exception("state topic %s: an append's completion callback failed", self.topic)
            elif a.future is not None and not a.future.done():
                a.future.set_result(base)
        elif code in REFRESH:
            self.links.forget_leader(a.partition)    # nothing appended: resent to the new leader
            retry.append(a)
        elif code == ErrorCode.topic_authorization_failed:
            self._failed(a, TopicAuthorizationFailed(
                f"produce to {self.topic}-{a.partition}: TOPIC_AUTHORIZATION_FAILED"))
        else:
            self._failed(a, StateLogError(f"produce to {self.topic}-{a.partition}: {code.name} "
                                          f"(producer {a.producer[0]} epoch {a.producer[1]})"))

    def _expired(self, a: _Append) -> None:
        self._failed(a, StateLogError(f"write to {self.topic}-{a.partition} not acknowledged within "
                                      f"{self.delivery_timeout_s:.0f}s"))

    def _failed(self, a: _Append, error: BaseException) -> None:
        """An append fails. Once sent, its batch took sequences it may or may not hold: the
        partition's sequence under this producer id is in doubt, so the next send starts a
        new producer id (every partition from sequence 0)."""
        if a.batch is not None and a.producer == (self.producer_id, self.epoch) and self.producer_id >= 0:
            log.warning("state topic %s partition %d: sequence of producer %d in doubt; a new producer id "
                        "follows", self.topic, a.partition, self.producer_id)
            self.producer_id = -1
        _fail(a, self.on_failure, self.topic, error)


def _fail(a: _Append, on_failure: Callable[[int, BaseException], None] | None, topic: str,
          error: BaseException) -> None:
    """The append's failure handed over: reported to `on_failure` (the writer's), then its
    `then` called or its future failed."""
    then = a.then
    if then is not None:
        a.then = None
        # Reported first, as with a future (whose callbacks run on a later turn); the
        # outcome is handed over even if the report fails (one batch in flight per shard).
        try:
            if on_failure is not None:
                on_failure(a.partition, error)
        except Exception:
            log.exception("state topic %s: reporting a failed append failed", topic)
        try:
            then(-1, error)
        except Exception:
            log.exception("state topic %s: an append's completion callback failed", topic)
    elif a.future is not None and not a.future.done():
        a.future.set_exception(error)
        if on_failure is not None:
            on_failure(a.partition, error)


def _flush_shards(writer: LeanWriter) -> None:
    """Runs the shards' flushes whose batches this send can carry (`flush_before_send`), their
    appends joining it; the others wait for their leader's answer."""
    flushes, writer._flushes = writer._flushes, []
    brokers, leaders, requests = writer.links.brokers, writer.links.leaders, writer._requests
    left = []
    writer._scheduled = True        # the appends they make join this send: none of their own
    try:
        for partition, flush in flushes:
            address = brokers.get(leaders.get(partition, -1))
            if address is not None and requests.get(address, 0) >= MAX_REQUESTS_IN_FLIGHT:
                left.append((partition, flush))
                continue
            try:
                flush()
            except Exception:
                log.exception("state topic %s: a shard's flush failed", writer.topic)
    finally:
        writer._scheduled = False
        writer._flushes[:0] = left


async def _init_idempotent_producer(links: UpstreamLinks, topic: str, delivery_timeout_s: float) -> tuple[int, int]:
    """InitProducerId without a transactional id: (producer id, epoch); retried while the
    upstream's transaction coordinator loads or moves (a broker just started answers
    COORDINATOR_LOAD_IN_PROGRESS), up to the delivery timeout."""
    deadline = time.monotonic() + delivery_timeout_s
    delay = 0.05
    while True:
        response = await links.bootstrap_call(make_request(
            INIT_PRODUCER_ID, transactional_id=None, transaction_timeout=duration_ms(60_000),
            producer_id=ProducerId(-1), producer_epoch=i16(-1)))
        code = response.error_code
        if code == ErrorCode.none:
            return int(response.producer_id), int(response.producer_epoch)
        if code not in _INIT_RETRIABLE or time.monotonic() + delay > deadline:
            raise StateLogError(f"InitProducerId for the state topic {topic}: {code.name}")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)


class _EncodedProduce(EncodedRequest):
    """The lean writer's ProduceRequest v9, its body written by `_ProduceRequests`."""

    __slots__ = ()
    __api_key__ = PRODUCE
    __version__ = VERSIONS[PRODUCE]


class _ProduceRequests:
    """The lean writer's ProduceRequest v9 (acks=all, one topic) of a list of appends, its
    body written in one pass from the batches' bytes (the partition's index, the batch as
    compact bytes, no tags), the head (transactional id, acks, timeout, the topic's name)
    written once per topic and timeout: no kio object per partition, a request per write.
    The bytes are kio's (tests/unit/runtime/test_lean_writer.py)."""

    __slots__ = ("_key", "_head")

    def __init__(self) -> None:
        self._key: tuple[str, int] = ("", -1)
        self._head = b""

    def build(self, topic: str, timeout_s: float, appends: list[_Append],
              batch_of: Callable[[_Append], bytes]) -> _EncodedProduce:
        timeout_ms = int(timeout_s * 1000)
        if self._key != (topic, timeout_ms):
            name = topic.encode()
            # transactional id null, acks -1, timeout, one topic, its compact name
            self._head = b"".join((b"\x00", _ACKS_TIMEOUT.pack(-1, timeout_ms), b"\x02",
                                   write_uvarint(len(name) + 1), name))
            self._key = (topic, timeout_ms)
        pack = _I32.pack
        parts = [self._head, write_uvarint(len(appends) + 1)]
        for a in appends:
            batch = batch_of(a)
            parts += (pack(a.partition), write_uvarint(len(batch) + 1), batch, b"\x00")
        parts.append(b"\x00\x00")        # the topic's tags, the request's
        return _EncodedProduce(b"".join(parts))

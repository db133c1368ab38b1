"""In front of Kafka, a ListOffsets answer for a partition of a topic kcoord just created whose
log does not exist yet is held, and asked again, until the log exists.

Why (docs/measurements/streams-rebalance.md, "2026-11-30, twelfth: the start, step by step"):
kcoord validates a streams topology once the upstream's Metadata lists its internal topics,
before the broker has created their logs; a Streams instance restoring such a changelog then
gets an error and retries after its admin client's backoff (100 ms up to 1 s): 0.48 s late in
one measured start. Held here, it gets the offset a few tens of ms after the log exists.

Which errors (Kafka 4.4 ReplicaManager.getPartitionOrError, which ListOffsets goes through): a
partition the broker does not host yet is NOT_LEADER_OR_FOLLOWER when the broker's metadata
cache has the topic (its log is created after the metadata image is published) and
UNKNOWN_TOPIC_OR_PARTITION when it has not (a broker whose metadata lags the one the client
asked). Those two only; LEADER_NOT_AVAILABLE is not answered on this path.

Rules:
- Only in front of Apache Kafka (upstream_facts.is_kafka), where that window exists; in front
  of Tansu a ListOffsets takes the LATEST path (tansu_list_offsets.py) and never this one, so a
  request carries at most one of the two extra requests.
- Only while the process's registry of fresh topics (fresh_topics.py) is not empty: otherwise
  ListOffsets is forwarded and answered byte for byte, as before, for one check. Only answers in
  which a partition of a fresh topic the client asked carries one of the two errors are held;
  every other answer passes byte for byte.
- The retry goes to the same upstream node on the client's own link (the same principal), with
  the client's own request header (its correlation id and client id) and body, reduced to the
  partitions still unanswered, every ``RETRY_INTERVAL_S``, one at a time. A partition is done
  once a retry answers it with any other error code (no error, or another error, answered as is).
- Bounds: one chain per client request, at most min(``MAX_HOLD_S``, the request's timeout_ms
  (v10+)); a retry's frame is never larger than the client's, and one is upstream at a time, so
  the slot counts twice the request's bytes in the process-wide queue (the LATEST path counts
  its Fetch so). The client's answer queue keeps its place (answers stay in request order).
- Release: when every partition answered, the retried partitions' answers replace theirs in the
  original answer (re-encoded); when the bound passes, the original with what was answered; a
  retry that does not decode releases the original unchanged. Counted by outcome
  (kcoord_gateway_list_offsets_held_total). A closed link (the client gone, or upstream broken)
  cancels the chain; a retry answered after its chain ended is read and dropped.
- Throttling (KIP-219): the released answer carries the largest throttle_time_ms of the
  original and its retries, and a retry answered with a throttle ends the chain there (the
  client backs off, as Kafka asks; kcoord does not keep asking a broker that throttles it).
  A first answer with a throttle is not held.
- Partitions: only an index the topic has (0 <= index < its partition count, recorded by the
  creator in fresh_topics.py) is held; an index beyond it stays UNKNOWN_TOPIC_OR_PARTITION
  for good, and asking it again would only make kcoord send the request ~40 times.
- SASL (KIP-368): a client re-authenticating sends SaslHandshake with requests in flight. Kafka's
  SaslServerAuthenticator closes the connection on any other request between SaslHandshake and
  the end of SaslAuthenticate (IllegalSaslStateException), so before a SASL frame goes up on
  the link (``settle``), every chain ends as at its bound and every ListOffsets still
  upstream is answered as it comes: no retry follows a SASL frame.
"""
from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

from kio.schema.errors import ErrorCode

from ..metrics import GATEWAY_LIST_OFFSETS_HELD
from ..protocol.apis import LIST_OFFSETS, request_class
from ..protocol.codec import BodyError, decode_body, decode_response_frame, encode_body, encode_response_frame
from ..protocol.framing import SIZE, HeaderError
from .forward import Pending
from .fresh_topics import FreshTopics
from .routes import Route

HELD_ERRORS = frozenset({int(ErrorCode.not_leader_or_follower), int(ErrorCode.unknown_topic_or_partition)})
RETRY_INTERVAL_S = 0.025
MAX_HOLD_S = 1.0
_NO_THROTTLE = timedelta(0)

_ANSWERED = GATEWAY_LIST_OFFSETS_HELD.labels(outcome="answered")
_GAVE_UP = GATEWAY_LIST_OFFSETS_HELD.labels(outcome="gave_up")
_CANCELLED = GATEWAY_LIST_OFFSETS_HELD.labels(outcome="cancelled")

Key = tuple[str, int]      # (topic, partition)


def throttle_of(response: Any) -> timedelta:
    """An answer's throttle_time_ms (v2+; v1 has none)."""
    return getattr(response, "throttle_time", None) or _NO_THROTTLE


def unready(route: Route, answer: bytes, fresh: FreshTopics) -> set[Key]:
    """The partitions of fresh topics, within their partition count, a ListOffsets answer gives
    one of HELD_ERRORS; empty when there are none, when it is throttled, or when it does not
    decode (then it passes as it is)."""
    try:
        _, response = decode_response_frame(LIST_OFFSETS, route.api_version, answer)
    except (BodyError, HeaderError, ValueError):
        return set()
    if throttle_of(response) > _NO_THROTTLE:
        return set()
    return {(topic.name, partition.partition_index)
            for topic in response.topics if (count := fresh.partitions(topic.name))
            for partition in topic.partitions
            if partition.error_code in HELD_ERRORS and 0 <= partition.partition_index < count}


def retry_answers(route: Route, frame: bytes) -> tuple[dict[Key, Any], timedelta] | None:
    """(topic, partition) -> its partition answer in a retry's answer, and the answer's
    throttle; None if it does not decode."""
    try:
        _, response = decode_response_frame(LIST_OFFSETS, route.api_version, frame)
    except (BodyError, HeaderError, ValueError):
        return None
    return ({(topic.name, partition.partition_index): partition
             for topic in response.topics for partition in topic.partitions}, throttle_of(response))


def merged(route: Route, answer: bytes, answered: dict[Key, Any], throttle: timedelta = _NO_THROTTLE) -> bytes:
    """``answer`` with each partition in ``answered`` replaced by its retried answer and the
    larger of its throttle and ``throttle`` (a retry's); ``answer`` itself when that changes
    nothing or it does not decode."""
    if not answered and throttle <= _NO_THROTTLE:
        return answer
    try:
        correlation_id, response = decode_response_frame(LIST_OFFSETS, route.api_version, answer)
    except (BodyError, HeaderError, ValueError):
        return answer
    changes: dict[str, Any] = {}
    if hasattr(response, "throttle_time") and throttle > max(_NO_THROTTLE, throttle_of(response)):
        changes["throttle_time"] = throttle
    if answered:
        changes["topics"] = tuple(dataclasses.replace(topic, partitions=tuple(
            answered.get((topic.name, partition.partition_index), partition) for partition in topic.partitions))
            for topic in response.topics)
    if not changes:
        return answer
    return encode_response_frame(LIST_OFFSETS, route.api_version, correlation_id,
                                 dataclasses.replace(response, **changes))


def settle(link: Any) -> None:
    """A SASL frame is about to go up on ``link`` (module rules, SASL): every chain ends as at
    its bound, and every ListOffsets still upstream is answered as it comes."""
    for pending in link.waiting:
        if pending.__class__ is HoldablePending:
            pending.fresh = None
    for chain in list(link.holds):
        chain.settle()


def hold_bound(request: Any) -> float:
    """How long an answer to ``request`` may be held: MAX_HOLD_S, less under a shorter timeout_ms."""
    timeout = getattr(request, "timeout", None)
    if timeout is None:
        return MAX_HOLD_S
    return max(0.0, min(MAX_HOLD_S, timeout.total_seconds()))


def retry_frame(route: Route, header: bytes, request: Any, wanted: set[Key]) -> bytes:
    """The client's request (``header``: its header bytes, size prefix excluded) asking only
    the partitions in ``wanted``."""
    topics = []
    for topic in request.topics:
        partitions = tuple(p for p in topic.partitions if (topic.name, p.partition_index) in wanted)
        if partitions:
            topics.append(dataclasses.replace(topic, partitions=partitions))
    body = encode_body(dataclasses.replace(request, topics=tuple(topics)))
    return SIZE.pack(len(header) + len(body)) + header + body


class HoldablePending(Pending):
    """A client's ListOffsets sent while some topic is fresh: its answer is checked, and held
    (HeldListOffsets) when a fresh topic's partition has no log yet."""

    __slots__ = ("frame", "body_offset", "fresh", "link")

    def __init__(self, correlation_id: int, route: Route, frame: bytes, body_offset: int, fresh: FreshTopics) -> None:
        super().__init__(correlation_id, route, 2 * len(frame))
        self.frame = frame
        self.body_offset = body_offset
        self.fresh: FreshTopics | None = fresh      # None: answered as it comes (``settle``)
        self.link: Any = None           # the client's UpstreamLink, set once forwarded

    def completed(self, frame: bytes) -> tuple[Pending, bytes] | None:
        """Upstream's answer: the client's at once (None: held, a retry chain started)."""
        fresh = self.fresh
        wanted = unready(self.route, frame, fresh) if fresh else set()
        link = self.link
        if not wanted or link is None:
            return self, frame
        try:
            request = decode_body(request_class(LIST_OFFSETS, self.route.api_version), self.frame, self.body_offset)
        except (BodyError, ValueError):
            return self, frame
        # Only what the client asked: an upstream naming a partition it was not asked for
        # (hostile, or broken) would have it asked again for nothing until the bound.
        wanted &= {(topic.name, p.partition_index) for topic in request.topics for p in topic.partitions}
        bound = hold_bound(request)
        if not wanted or bound < RETRY_INTERVAL_S:
            return self, frame
        HeldListOffsets(self, link, frame, request, wanted).start(bound)
        self.frame = b""                 # kept by the chain as the header and decoded request only
        return None


class RetryPending(Pending):
    """A retry of a held ListOffsets; in the link's waiting list only."""

    __slots__ = ("chain",)
    to_client = False       # its answer is kcoord's own, not the client's (forward.py's byte count)

    def __init__(self, chain: HeldListOffsets) -> None:
        super().__init__(chain.slot.correlation_id, chain.slot.route)
        self.chain = chain

    def completed(self, frame: bytes) -> tuple[Pending, bytes] | None:
        return self.chain.retried(frame)


class HeldListOffsets:
    """One held answer and its retries (module rules)."""

    __slots__ = ("slot", "link", "answer", "request", "header", "wanted", "answered", "throttle", "done",
                 "_deadline", "_next")

    def __init__(self, slot: HoldablePending, link: Any, answer: bytes, request: Any, wanted: set[Key]) -> None:
        self.slot = slot
        self.link = link
        self.answer = answer
        self.request = request
        self.header = slot.frame[4:slot.body_offset]
        self.wanted = wanted              # partitions still unanswered
        self.answered: dict[Key, Any] = {}
        self.throttle = _NO_THROTTLE      # the largest of the retries' answers
        self.done = False
        self._deadline: asyncio.TimerHandle | None = None
        self._next: asyncio.TimerHandle | None = None

    def start(self, bound: float) -> None:
        loop = asyncio.get_running_loop()
        self.link.holds.add(self)
        self._deadline = loop.call_later(bound, self._give_up)
        self._next = loop.call_later(RETRY_INTERVAL_S, self._send)

    def _send(self) -> None:
        self._next = None
        link = self.link
        if self.done or link.closed:     # closed: the client's end cancels the chain (link.close)
            return
        link.send([retry_frame(self.slot.route, self.header, self.request, self.wanted)])
        link.waiting.append(RetryPending(self))

    def retried(self, frame: bytes) -> tuple[Pending, bytes] | None:
        """A retry's answer: (the client's slot, its answer) once released, else None."""
        if self.done:
            return None                   # its chain ended while it was upstream: dropped
        decoded = retry_answers(self.slot.route, frame)
        if decoded is None:
            return self._end(_GAVE_UP), self.answer
        found, throttle = decoded
        for key in list(self.wanted):
            partition = found.get(key)
            if partition is not None and partition.error_code not in HELD_ERRORS:
                self.answered[key] = partition
                self.wanted.discard(key)
        self.throttle = max(self.throttle, throttle)
        if not self.wanted:
            return self._end(_ANSWERED), self._released()
        if throttle > _NO_THROTTLE:        # the broker throttles: the client is told, and backs off
            return self._end(_GAVE_UP), self._released()
        self._next = asyncio.get_running_loop().call_later(RETRY_INTERVAL_S, self._send)
        return None

    def _released(self) -> bytes:
        return merged(self.slot.route, self.answer, self.answered, self.throttle)

    def _give_up(self) -> None:
        self._deadline = None
        self.settle()

    def settle(self) -> None:
        """End as at the bound: the original released with what was answered."""
        if self.done:
            return
        slot = self._end(_GAVE_UP)
        self.link.deliver(slot, self._released())

    def cancel(self) -> None:
        """The link closed: nothing is released."""
        if not self.done:
            self._end(_CANCELLED)

    def _end(self, outcome: Any) -> Pending:
        self.done = True
        outcome.inc()
        for handle in (self._deadline, self._next):
            if handle is not None:
                handle.cancel()
        self._deadline = self._next = None
        self.link.holds.discard(self)
        return self.slot

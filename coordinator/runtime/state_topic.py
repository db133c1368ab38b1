"""The state topic on the upstream cluster of one kcoord process (no fencing): the
`state_log.StateLog` port over kcoord's one upstream client (coordinator/upstream/client.py).

One compacted topic (default `__kcoord_offsets`, 50 partitions) holds every group's
records in Kafka's `__consumer_offsets` format; each coordinator shard owns one partition.

Rules:
- Writes go through lean_writer.LeanWriter: one idempotent producer of the process, every
  shard's batch in one ProduceRequest per broker, acks=all, on links of their own.
- Reads (loads, a tail, the markers reads of exactly-once offsets) and clients'
  transactional appends (`call_leader`) go over the fenced log's parts without the fence
  (fenced_reads.LogReads over fenced_links.UpstreamLinks): read_uncommitted with control
  batches visible; a plain batch is replayed at once, a transactional one at its COMMIT
  marker, an aborted one never. So an open client transaction never stalls a load (a
  read_committed consumer stops at the last stable offset behind it). A load reads to the
  high watermark of the Fetch answers (not ListOffsets, which Tansu answers wrongly for
  multi-record batches). With ``enable_txn_offsets`` a load replays through the
  marker-aware TxnLogReader (`readers`).
- A batch that does not read (CRC, a codec, records overrunning it: records/batch.py)
  fails its partition only (`on_corrupt`), naming the offset where it starts.
- Every link brings kcoord's TLS and SASL (``security``) and reconnects before its KIP-368
  session lifetime ends (fenced_links.py); a refused credential or certificate fails at once,
  naming it.
- kcoord never creates the topic by accident: its Metadata requests never ask for
  auto-creation (Tansu would oblige with 4 partitions and no compaction after a memory-store
  upstream restarted). Creation is explicit (``ensure_topic``: CreateTopics with Kafka's
  `__consumer_offsets` settings; and the cluster view's recreation of a missing topic).
  While the cluster view cannot vouch for the topic (upstream down, topic missing or
  replaced) it ``suspend``s writes and loads here, so nothing lands in or is read from a log
  kcoord has not checked (Tansu 0.6 even acknowledges a Produce to a partition of a topic
  that no longer exists).
- A missing topic, a link that fails, a leader that does not come back: loads raise
  `StateTopicUnavailable` naming the topic, and their callers retry.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32

from ..upstream.client import opener, parse_bootstrap
from .fenced_links import CREATE_TOPICS, StateLogError, UpstreamLinks, make_request, request_module
from .fenced_reads import LogReads
from .lean_writer import LeanWriter
from .partition_writer import Written
from .state_log import (
    OFFSETS_TOPIC_SEGMENT_BYTES,
    TOPIC_CONFIGS,
    CorruptBatchError,
    RecordSink,
    StateTopicUnavailable,
)

if TYPE_CHECKING:
    from ..security.upstream import UpstreamSecurity

__all__ = ["OFFSETS_TOPIC_SEGMENT_BYTES", "TOPIC_CONFIGS", "CorruptBatchError", "StateTopic",
           "StateTopicUnavailable"]

log = logging.getLogger("kcoord.state_topic")

_TOPIC_ALREADY_EXISTS = ErrorCode.topic_already_exists
_MIN_FETCH_BYTES = 8 * 1024 * 1024


class StateTopic:
    """The `state_log.StateLog` port on the upstream cluster."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, *, replication_factor: int = -1,
                 max_batch_bytes: int = 8 * 1024 * 1024, client_id: str = "kcoord",
                 security: UpstreamSecurity | None = None) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.topic = topic
        self.partitions = partitions
        # -1: the cluster's default.replication.factor (CreateTopics v4+, KIP-464).
        self.replication_factor = replication_factor
        self.max_batch_bytes = max_batch_bytes
        self.client_id = client_id
        self.fetch_max_bytes = max(_MIN_FETCH_BYTES, max_batch_bytes)
        self._lean: LeanWriter | None = None
        self._suspended: str | None = None
        self._txn_offsets = False
        # Called as on_write_error(partition, exception) when an append fails: the cluster
        # view counts it and checks the topic at once. No write error by itself means the
        # topic is gone; the metadata says.
        self.on_write_error: Callable[[int, BaseException], None] | None = None
        self.reads = LogReads(self._links("loader"), topic)

    def _links(self, role: str) -> UpstreamLinks:
        """Links of their own for one role: a long Fetch on a link delays whatever follows it
        there (a broker answers one connection's requests in order)."""
        return UpstreamLinks(parse_bootstrap(self.bootstrap), self.topic,
                             opener(self.security, f"{self.client_id}-{role}"),
                             request_timeout_s=30.0, fetch_max_bytes=self.fetch_max_bytes)

    # --- exactly-once offsets: the raw links (module rules) ------------------------------------

    def enable_txn_offsets(self, open_link: Callable[..., Any] | None = None) -> None:
        """Loads replay through the caller's marker-aware readers from now on; `open_link`,
        when given, opens the read links (the service's, with the same TLS and SASL)."""
        self._txn_offsets = True
        if open_link is not None:
            self.reads.links.open = open_link

    @property
    def txn_offsets_supported(self) -> bool:
        return self._txn_offsets

    async def call_leader(self, partition: int, request: Any) -> Any:
        self._check_usable(f"transactional append to partition {partition}")
        return await self.reads.links.call_leader(partition, request)

    async def call_transaction_coordinator(self, transactional_id: str, request: Any) -> Any:
        return await self.reads.links.call_transaction_coordinator(transactional_id, request)

    def forget_coordinator(self, transactional_id: str) -> None:
        self.reads.links.forget_coordinator(transactional_id)

    async def read_partition(self, partition: int, offset: int) -> tuple[bytes, int]:
        self._check_usable(f"read of partition {partition}")
        return await self.reads.read_partition(partition, offset)

    # --- suspension (the cluster view's word on whether the log can be trusted) ----

    @property
    def suspended(self) -> str | None:
        """Why writes and loads are refused now, or None."""
        return self._suspended

    def suspend(self, reason: str) -> None:
        if self._suspended is None:
            log.warning("state topic %s: writes and loads suspended: %s", self.topic, reason)
        self._suspended = reason

    def resume(self) -> None:
        if self._suspended is not None:
            log.info("state topic %s: writes and loads resumed", self.topic)
        self._suspended = None

    def _check_usable(self, what: str) -> None:
        if self._suspended is not None:
            raise StateTopicUnavailable(f"{what} of state topic {self.topic} refused: {self._suspended}")

    # --- lifecycle ------------------------------------------------------------------

    async def start(self) -> None:
        await self.ensure_topic()
        lean = LeanWriter(self._links("writer"), self.topic)
        lean.on_failure = self._write_failed
        try:
            await lean.start()
        except BaseException:
            lean.links.close()
            raise
        self._lean = lean

    async def stop(self) -> None:
        self.reads.links.close()
        if self._lean is not None:
            self._lean.close()
            self._lean.links.close()
            self._lean = None

    async def ensure_topic(self) -> None:
        """CreateTopics with `TOPIC_CONFIGS`; a topic that exists is fine (its settings are
        the cluster view's to check). Raises RuntimeError naming the topic and the error."""
        m = request_module(CREATE_TOPICS)
        request = make_request(CREATE_TOPICS, topics=(m.CreatableTopic(
            name=TopicName(self.topic), num_partitions=i32(self.partitions),
            replication_factor=i16(self.replication_factor if self.replication_factor > 0 else -1),
            assignments=(), configs=tuple(m.CreatableTopicConfig(name=k, value=v)
                                          for k, v in sorted(TOPIC_CONFIGS.items()))),),
            timeout=timedelta(seconds=30), validate_only=False)
        links = self._links("admin")      # closed at once: tools call this without start/stop
        try:
            response = await links.bootstrap_call(request)
        except StateLogError as e:
            raise StateTopicUnavailable(f"cannot create state topic {self.topic}: {e}") from e
        finally:
            links.close()
        for result in response.topics:
            if result.error_code not in (ErrorCode.none, _TOPIC_ALREADY_EXISTS):
                raise RuntimeError(f"cannot create state topic {self.topic}: {result.error_code.name.upper()} "
                                   f"{result.error_message or ''}".rstrip())

    # --- the port -------------------------------------------------------------------

    def append(self, partition: int, records: Iterable[tuple[bytes, bytes | None]],
               timestamp_ms: int) -> Awaitable[int]:
        """Append records as ONE batch (Kafka writes a result atomically): awaited, its base
        offset once the upstream acknowledged it. The lean writer's future itself, not a
        coroutine awaiting it (one coroutine fewer per write); a failure is raised where it
        is awaited, and reported to `on_write_error` when it happens (the writer's
        `on_failure` for a batch that failed upstream)."""
        lean = self._lean
        if self._suspended is not None:      # the message built only when refused: a write per commit
            return _failed(StateTopicUnavailable(f"write to partition {partition} of state topic {self.topic} "
                                                 f"refused: {self._suspended}"))
        try:
            if lean is None:
                raise StateTopicUnavailable(f"state topic {self.topic}: writer not started")
            return lean.append(partition, records if isinstance(records, (list, tuple)) else list(records),
                               timestamp_ms)
        except Exception as e:
            self._write_failed(partition, e)
            return _failed(e)

    def append_then(self, partition: int, records: Sequence[tuple[bytes, bytes | None]], timestamp_ms: int,
                    then: Written) -> None:
        """`append` with its outcome handed to ``then`` (partition_writer.py): the lean
        writer's `append_then`; a refusal is handed over on the next loop turn."""
        lean = self._lean
        if self._suspended is not None:
            _refuse(then, StateTopicUnavailable(f"write to partition {partition} of state topic {self.topic} "
                                                f"refused: {self._suspended}"))
            return
        try:
            if lean is None:
                raise StateTopicUnavailable(f"state topic {self.topic}: writer not started")
            lean.append_then(partition, records, timestamp_ms, then)
        except Exception as e:
            self._write_failed(partition, e)
            _refuse(then, e)

    def flush_before_send(self, partition: int, flush: Callable[[], None]) -> None:
        """`flush` called in the lean writer's next send that can carry the partition's batch
        (lean_writer.py); with no writer, or suspended, on the next loop turn (its append is
        refused there). Nothing is sent here: the lease gate passes it through."""
        lean = self._lean
        if lean is None or self._suspended is not None:
            asyncio.get_running_loop().call_soon(flush)
        else:
            lean.flush_before_send(partition, flush)

    def _write_failed(self, partition: int, error: BaseException) -> None:
        if self.on_write_error is not None:
            try:
                self.on_write_error(partition, error)
            except Exception:
                log.exception("state topic %s: write-error callback failed", self.topic)

    async def load(self, partitions: Iterable[int], sink: RecordSink,
                   on_loaded: Callable[[int, int], None],
                   progress: Callable[[int, int], None] | None = None,
                   on_corrupt: Callable[[int, CorruptBatchError], None] | None = None,
                   abandoned: Callable[[int], bool] | None = None,
                   readers: Callable[[int], Any] | None = None) -> None:
        """Replay partitions from their first offset until each reaches its high watermark.
        `on_loaded(partition, log_end_offset)` fires as each one completes.

        One partition's bad data stops only that partition, as a record that does not
        decode fails only its own shard: a batch that cannot be read calls
        `on_corrupt(partition, CorruptBatchError)` and that partition is no longer read
        (without `on_corrupt` the error is raised once the others are loaded). A partition
        for which `abandoned(partition)` is true (its shard failed on a record) stops being
        fetched. `readers` (exactly-once offsets enabled): partition p replays through
        `readers(p)` instead of `sink`."""
        parts = sorted(set(partitions))
        if not parts:
            return
        self._check_usable(f"load of {len(parts)} partition(s)")
        try:
            await self.reads.load(parts, sink, on_loaded, progress, on_corrupt, abandoned,
                                  readers if self._txn_offsets else None)
        except StateLogError as e:
            # A missing topic, a leader moving, the upstream down: the callers retry.
            raise StateTopicUnavailable(str(e) if self.topic in str(e) else f"state topic {self.topic}: {e}") from e

    async def tail(self, partition: int, from_offset: int, sink: RecordSink, *, poll_ms: int = 200) -> None:
        """Follow one partition from ``from_offset``: every committed record at or after it
        goes to ``sink`` as it arrives, in offset order, until the caller cancels the task
        (the load's rules: aborted transactional records and markers never reach sink). On
        links of its own, as its Fetches wait for new records."""
        self._check_usable(f"tail of partition {partition}")
        reads = LogReads(self._links("tail"), self.topic)
        try:
            await reads.tail(partition, from_offset, sink, poll_ms=poll_ms)
        finally:
            reads.links.close()


def _failed(error: BaseException) -> asyncio.Future[int]:
    """A refused append: raised where it is awaited, as a failure upstream is."""
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    future.set_exception(error)
    return future


def _refuse(then: Written, error: BaseException) -> None:
    """A refused `append_then`: handed over on the next loop turn, never from inside the
    call (partition_writer.py)."""
    asyncio.get_running_loop().call_soon(then, -1, error)

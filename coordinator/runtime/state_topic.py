"""The state topic on the upstream cluster, read and written with aiokafka.

One compacted topic (default `__kcoord_offsets`, 50 partitions) holds every group's
records in Kafka's `__consumer_offsets` format; each coordinator shard owns one
partition. Loading reads a partition from its start to the high watermark taken from
Fetch responses (not ListOffsets, which Tansu answers wrongly for multi-record
batches, environment.md §3.4.1).

kcoord's clients never create the topic by accident. Kafka clients ask for auto-creation
in every Metadata request, and Tansu obliges with 4 partitions and no compaction: after a
memory-store upstream restarted, a reloading shard would have created a wrong state
topic. Creation is explicit (``ensure_topic``, and the cluster view's recreation of a
missing topic), and while the cluster view cannot vouch for the topic (upstream down,
topic missing or replaced) it ``suspend``s writes and loads here, so nothing lands in or
is read from a log kcoord has not checked (Tansu 0.6 even acknowledges a Produce to a
partition of a topic that no longer exists).

Security: ``security=UpstreamSecurity`` gives every aiokafka client here (admin,
writer, loader, tail) its TLS context and SASL settings (``aiokafka_kwargs``). aiokafka does
not re-authenticate (KIP-368): a broker with ``connections.max.reauth.ms`` closes an expired
connection at its next request and aiokafka reconnects, authenticating again; a write in
flight then is retried by the producer.

The writer: ``writer="lean"`` (the default) appends through lean_writer.LeanWriter, one
idempotent producer of the process on kcoord's own upstream links (TLS and SASL from
``security``, coordinator/upstream/client.py), every shard's batch in one ProduceRequest per
broker; ``writer="aiokafka"`` keeps aiokafka's producer (acks=all, not idempotent).

Transactional offset commits: once ``enable_txn_offsets(open_link)`` was called,
loads read the log raw (fenced_state_log's reader with ``take_on_load=False``: no fence,
read_uncommitted, markers visible) through txn_log_reader.TxnLogReader, and the same links
append clients' batches (``call_leader``) and read markers (``read_partition``). aiokafka's
read_committed consumer cannot serve that: it stops at the last stable offset, i.e. behind the
first open client transaction, so a load would wait for it to end, and it hides the producer
ids that make a client's offsets pending.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gzip
import logging
import struct
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import aiokafka.client
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    CorruptRecordException,
    KafkaConnectionError,
    TopicAlreadyExistsError,
    UnsupportedCodecError,
)
from aiokafka.protocol.metadata import MetadataRequest

from ..upstream.client import opener
from .fenced_links import UpstreamLinks
from .lean_writer import LeanWriter
from .state_log import CorruptBatchError, RecordSink, StateTopicUnavailable

if TYPE_CHECKING:
    from ..security.upstream import UpstreamSecurity

log = logging.getLogger("kcoord.state_topic")

try:  # the snappy/lz4/zstd codecs aiokafka uses raise their own error type
    from cramjam import DecompressionError as _CodecError
except ImportError:  # pragma: no cover - cramjam is a dependency of aiokafka's codecs
    class _CodecError(Exception):  # type: ignore[no-redef]
        pass

# What aiokafka's fetcher raises from getmany() for a batch it cannot read: a CRC that does
# not match (CorruptRecordException), a codec it lacks, or a payload that does not
# decompress or whose records overrun the batch (the same set records/batch.py handles).
CORRUPT_BATCH_ERRORS = (CorruptRecordException, UnsupportedCodecError, _CodecError, zlib.error,
                        gzip.BadGzipFile, EOFError, struct.error, IndexError, ValueError, SystemError)


# The state topic's configuration, for creation and for recreation by the cluster view: what
# Kafka gives __consumer_offsets (GroupCoordinatorService.groupMetadataTopicConfigs). Compacted,
# the producer's compression kept, and 100 MiB segments (offsets.topic.segment.bytes) instead of
# the cluster's 1 GiB: only closed segments are cleaned, so smaller segments let the cleaner
# reclaim superseded commits sooner and keep a reload short. Segment time and the dirty ratio
# stay the cluster's (7 days, 0.5), as they do for __consumer_offsets.
OFFSETS_TOPIC_SEGMENT_BYTES = 100 * 1024 * 1024
TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer",
                 "segment.bytes": str(OFFSETS_TOPIC_SEGMENT_BYTES)}


# aiokafka builds its Metadata requests in AIOKafkaClient._metadata_update with no way to
# turn auto-creation off per client. Its module-level MetadataRequest is replaced by one
# whose default comes from a context variable: the tasks of kcoord's state-topic clients
# (started inside ``_no_auto_create``) ask for no auto-creation, every other aiokafka user
# in the process keeps the library's default.
_AUTO_CREATE: contextvars.ContextVar[bool | None] = contextvars.ContextVar("kcoord_auto_create", default=None)


class _MetadataRequest(MetadataRequest):
    def __init__(self, topics=None, allow_auto_topic_creation=None):
        if allow_auto_topic_creation is None:
            allow_auto_topic_creation = _AUTO_CREATE.get()
        super().__init__(topics, allow_auto_topic_creation)


if getattr(aiokafka.client, "MetadataRequest", None) is MetadataRequest:
    aiokafka.client.MetadataRequest = _MetadataRequest


def _no_auto_create() -> None:
    """In the current task (and the tasks it creates from now on), aiokafka clients ask
    Metadata without auto-creation."""
    _AUTO_CREATE.set(False)


class _BootstrapCauses(logging.Handler):
    """Collects why aiokafka could not connect: its bootstrap error names only the hosts
    ("Unable to bootstrap from [...]"); the cause (SASL authentication failed, TLS
    certificate verification failed) is only in its log line before."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.causes: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("Unable connect to") and len(self.causes) < 8:
            try:
                self.causes.append(record.getMessage())
            except Exception:   # a record that does not format: keep the rest
                pass


@contextlib.contextmanager
def _explained(where: str) -> Iterator[None]:
    """aiokafka's bootstrap failure re-raised with its cause (the SASL or TLS error)."""
    handler = _BootstrapCauses()
    logger = logging.getLogger("aiokafka")     # aiokafka/client.py logs under this name
    logger.addHandler(handler)
    try:
        yield
    except KafkaConnectionError as e:
        if not handler.causes:
            raise
        raise KafkaConnectionError(f"{where}: {e}: {handler.causes[-1]}") from e
    finally:
        logger.removeHandler(handler)


class StateTopic:
    """The `state_log.StateLog` port on the upstream cluster."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, *, replication_factor: int = -1,
                 max_batch_bytes: int = 8 * 1024 * 1024, client_id: str = "kcoord",
                 security: UpstreamSecurity | None = None, writer: str = "lean") -> None:
        if writer not in ("lean", "aiokafka"):
            raise ValueError(f"state topic writer {writer!r}: lean or aiokafka")
        self.writer = writer
        self.bootstrap = bootstrap
        self.security = security
        # TLS/SASL for every aiokafka client of the state topic ({} for PLAINTEXT).
        self._client_kwargs: dict[str, Any] = security.aiokafka_kwargs() if security is not None else {}
        self.topic = topic
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.max_batch_bytes = max_batch_bytes
        self.client_id = client_id
        self._producer: AIOKafkaProducer | None = None
        self._lean: LeanWriter | None = None
        self._suspended: str | None = None
        # Called as on_write_error(partition, exception) when an append fails: the cluster
        # view counts it and checks the topic at once. No write error by itself means the
        # topic is gone (aiokafka marks UnknownTopicOrPartition retriable); the metadata says.
        self.on_write_error: Callable[[int, BaseException], None] | None = None
        self._raw: Any = None     # FencedStateLog used as a raw reader

    # --- exactly-once offsets: the raw links (module rules) ------------------------------------

    def enable_txn_offsets(self, open_link: Callable[..., Any] | None = None) -> None:
        from .fenced_state_log import FencedStateLog
        self._raw = FencedStateLog(self._addresses(), self.topic, self.partitions, open_link, take_on_load=False,
                                   fetch_max_bytes=max(8 * 1024 * 1024, self.max_batch_bytes))

    @property
    def txn_offsets_supported(self) -> bool:
        return self._raw is not None

    async def call_leader(self, partition: int, request: Any) -> Any:
        self._check_usable(f"transactional append to partition {partition}")
        return await self._raw.call_leader(partition, request)

    async def call_transaction_coordinator(self, transactional_id: str, request: Any) -> Any:
        return await self._raw.call_transaction_coordinator(transactional_id, request)

    def forget_coordinator(self, transactional_id: str) -> None:
        self._raw.forget_coordinator(transactional_id)

    async def read_partition(self, partition: int, offset: int) -> tuple[bytes, int]:
        self._check_usable(f"read of partition {partition}")
        return await self._raw.read_partition(partition, offset)

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

    def _addresses(self) -> list[tuple[str, int]]:
        return [(h, int(port)) for h, _, port in (a.strip().rpartition(":") for a in self.bootstrap.split(","))]

    async def start(self) -> None:
        _no_auto_create()
        await self.ensure_topic()
        if self.writer == "lean":
            links = UpstreamLinks(self._addresses(), self.topic, opener(self.security, f"{self.client_id}-writer"),
                                  request_timeout_s=30.0, fetch_max_bytes=self.max_batch_bytes)
            lean = LeanWriter(links, self.topic)
            await lean.start()
            self._lean = lean
            return
        # acks=all: a coordinator response is released only once the write is replicated,
        # as Kafka releases it at the high watermark.
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, client_id=f"{self.client_id}-writer", acks="all",
            # A coordinator write is one batch (Kafka appends a result atomically): aiokafka
            # caps a batch at max_batch_size (16 KiB by default), not at max_request_size.
            linger_ms=0, max_request_size=self.max_batch_bytes, max_batch_size=self.max_batch_bytes,
            enable_idempotence=False,
            request_timeout_ms=30_000, **self._client_kwargs)
        with _explained(f"state topic {self.topic} writer"):
            await self._producer.start()

    async def stop(self) -> None:
        if self._raw is not None:
            await self._raw.stop()
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None
        if self._lean is not None:
            self._lean.close()
            self._lean.links.close()
            self._lean = None

    async def ensure_topic(self) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, client_id=f"{self.client_id}-admin",
                                    **self._client_kwargs)
        with _explained(f"state topic {self.topic} admin"):
            await admin.start()
        try:
            rf = self.replication_factor if self.replication_factor > 0 else await self._default_replication(admin)
            topic = NewTopic(self.topic, self.partitions, rf, topic_configs=dict(TOPIC_CONFIGS))
            try:
                resp = await admin.create_topics([topic])
                for t in getattr(resp, "topic_errors", ()):
                    if t[1] not in (0, TopicAlreadyExistsError.errno):
                        raise RuntimeError(f"cannot create state topic {self.topic}: error {t[1]} {t[2]}")
            except TopicAlreadyExistsError:
                pass
        finally:
            await admin.close()

    async def _default_replication(self, admin: AIOKafkaAdminClient) -> int:
        """The cluster's `default.replication.factor`, what -1 means in CreateTopics v4+
        (KIP-464). aiokafka speaks only CreateTopics v0-3, which need an explicit factor,
        so kcoord reads the broker's setting; a broker that does not say (Tansu) gets 1."""
        try:
            cluster = await admin.describe_cluster()
            broker = cluster["brokers"][0]["node_id"]
            resource = ConfigResource(ConfigResourceType.BROKER, str(broker),
                                      configs={"default.replication.factor": None})
            for response in await admin.describe_configs([resource]):
                for result in response.resources:
                    for entry in result[4]:          # (name, value, read_only, ...)
                        if entry[0] == "default.replication.factor" and entry[1]:
                            return max(1, int(entry[1]))
        except Exception as e:   # the factor is a best effort; creating the topic is not
            log.warning("cannot read the cluster's default.replication.factor (%s); the state topic "
                        "gets 1 replica: set state_topic_replication_factor", e)
        return 1

    async def append(self, partition: int, records: Iterable[tuple[bytes, bytes | None]],
                     timestamp_ms: int) -> int:
        """Append records as ONE batch (Kafka writes a result atomically) and return its base
        offset once the upstream acknowledged it."""
        self._check_usable(f"write to partition {partition}")
        try:
            if self._lean is not None:
                return await self._lean.append(partition, records if isinstance(records, (list, tuple))
                                               else list(records), timestamp_ms)
            return await self._aiokafka_append(partition, records, timestamp_ms)
        except Exception as e:
            if self.on_write_error is not None:
                try:
                    self.on_write_error(partition, e)
                except Exception:
                    log.exception("state topic %s: write-error callback failed", self.topic)
            raise

    async def _aiokafka_append(self, partition: int, records: Iterable[tuple[bytes, bytes | None]],
                               timestamp_ms: int) -> int:
        assert self._producer is not None, "state topic not started"
        batch = self._producer.create_batch()
        for key, value in records:
            if batch.append(key=key, value=value, timestamp=timestamp_ms) is None:
                raise ValueError(f"a coordinator write of more than {self.max_batch_bytes} bytes does "
                                 f"not fit in one batch of partition {partition}")
        batch.close()
        fut = await self._producer.send_batch(batch, self.topic, partition=partition)
        return (await fut).offset

    async def load(self, partitions: Iterable[int], sink: RecordSink,
                   on_loaded: Callable[[int, int], None],
                   progress: Callable[[int, int], None] | None = None,
                   on_corrupt: Callable[[int, CorruptBatchError], None] | None = None,
                   abandoned: Callable[[int], bool] | None = None,
                   readers: Callable[[int], Any] | None = None) -> None:
        """Replay partitions from their first offset until each reaches its high watermark.
        `on_loaded(partition, log_end_offset)` fires as each one completes.

        One partition's bad data stops only that partition, as a record that does not
        decode fails only its own shard: a batch aiokafka cannot read (CRC, decompression)
        calls `on_corrupt(partition, CorruptBatchError)` and that partition is no longer
        read (without `on_corrupt` the error is raised). A partition for which
        `abandoned(partition)` is true (its shard failed on a record) is paused too, rather
        than fetched to the end of its log for nothing."""
        tps = {TopicPartition(self.topic, p) for p in partitions}
        if not tps:
            return
        self._check_usable(f"load of {len(tps)} partition(s)")
        if readers is not None and self._raw is not None:
            from .fenced_state_log import StateLogError
            try:
                await self._raw.load([tp.partition for tp in tps], sink, on_loaded, progress,
                                     on_corrupt, abandoned, readers=readers)
            except StateLogError as e:
                # A missing topic, a leader moving, the upstream down: the callers retry.
                raise StateTopicUnavailable(f"state topic {self.topic}: {e}") from e
            return
        _no_auto_create()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, client_id=f"{self.client_id}-loader",
            enable_auto_commit=False, isolation_level="read_committed",
            max_partition_fetch_bytes=5 * 1024 * 1024, fetch_max_bytes=50 * 1024 * 1024,
            **self._client_kwargs)
        with _explained(f"state topic {self.topic} loader"):
            await consumer.start()
        try:
            # A missing topic would leave the loop below waiting for a high watermark that
            # never comes: fail at once, the caller retries (and the cluster view reports it).
            if self.topic not in await consumer.topics():
                raise StateTopicUnavailable(f"state topic {self.topic} does not exist upstream "
                                            f"({self.bootstrap}); nothing to load")
            consumer.assign(list(tps))
            await consumer.seek_to_beginning(*tps)
            pending = set(tps)
            # The next offset to replay per partition: every record before it went to `sink`.
            replayed = {tp: await consumer.position(tp) for tp in tps}
            # After a bad batch, partitions are read one at a time: aiokafka's getmany names
            # no partition in its error, and the records it had drained from the others in
            # the same call are lost with the exception (their positions already moved).
            one_by_one = False
            records = 0
            last_report = time.monotonic()

            def give_up(tp: TopicPartition) -> None:
                pending.discard(tp)
                consumer.pause(tp)

            while pending:
                if abandoned is not None:
                    for tp in [tp for tp in pending if abandoned(tp.partition)]:
                        give_up(tp)
                    if not pending:
                        break
                if not one_by_one:
                    try:
                        batches = await consumer.getmany(*pending, timeout_ms=200, max_records=50_000)
                    except CORRUPT_BATCH_ERRORS as e:
                        if on_corrupt is None:
                            raise
                        log.warning("state topic %s: a record batch cannot be read (%r); finding its "
                                    "partition by reading the %d unfinished partitions one at a time",
                                    self.topic, e, len(pending))
                        for tp in pending:
                            consumer.seek(tp, replayed[tp])
                        one_by_one = True
                        continue
                else:
                    batches = {}
                    for tp in sorted(pending, key=lambda t: t.partition):
                        try:
                            got = await consumer.getmany(tp, timeout_ms=200, max_records=50_000)
                        except CORRUPT_BATCH_ERRORS as e:
                            assert on_corrupt is not None
                            # aiokafka drops the good batches fetched before the bad one
                            # with the error and names no offset: what is certain is the
                            # first offset not replayed.
                            give_up(tp)
                            on_corrupt(tp.partition, CorruptBatchError(self.topic, tp.partition, replayed[tp], e))
                            continue
                        batches.update(got)
                for tp, recs in batches.items():
                    for r in recs:
                        sink(tp.partition, r.offset, r.key, r.value)
                    records += len(recs)
                for tp in list(pending):
                    position = replayed[tp] = await consumer.position(tp)
                    hw = consumer.highwater(tp)
                    if hw is None:
                        continue
                    if position >= hw:
                        give_up(tp)
                        on_loaded(tp.partition, position)
                if progress is not None and time.monotonic() - last_report > 1.0:
                    progress(records, len(tps) - len(pending))
                    last_report = time.monotonic()
                await asyncio.sleep(0)
        finally:
            await consumer.stop()

    async def tail(self, partition: int, from_offset: int, sink: RecordSink, *, poll_ms: int = 200) -> None:
        """Follow one partition from ``from_offset``: every record at or after it goes to
        ``sink`` as it arrives, in offset order, until the caller cancels the task. Read
        committed, as ``load``: aborted transactional records and markers never reach sink."""
        self._check_usable(f"tail of partition {partition}")
        _no_auto_create()
        tp = TopicPartition(self.topic, partition)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, client_id=f"{self.client_id}-tail",
            enable_auto_commit=False, isolation_level="read_committed",
            max_partition_fetch_bytes=5 * 1024 * 1024, **self._client_kwargs)
        with _explained(f"state topic {self.topic} tail"):
            await consumer.start()
        try:
            consumer.assign([tp])
            consumer.seek(tp, from_offset)
            while True:
                batches = await consumer.getmany(tp, timeout_ms=poll_ms, max_records=10_000)
                for record in batches.get(tp, ()):
                    sink(partition, record.offset, record.key, record.value)
        finally:
            await consumer.stop()


"""Transactional offsets (docs/design/transactions.md): TxnOffsetCommit, AddOffsetsToTxn, and the
markers read before OffsetFetch answers.

Rules of this module:
- Served only with a state log that reads its partitions raw with the marker-aware reader
  and can append as the client's producer (coordinator/runtime/fenced_state_log.py; the
  single-process log when `txn_offsets` is on). Without one, TxnOffsetCommit answers
  UNSUPPORTED_VERSION and is not advertised, and AddOffsetsToTxn is neither advertised nor
  answered: the gateway forwards it upstream. An offset is never applied outside its
  transaction.
- TxnOffsetCommit is the shard runtime's transactional write (`run_transactional`), appended
  as the client's producer (coordinator/runtime/txn_offsets_log.py); AddOffsetsToTxn becomes AddPartitionsToTxn v3
  of the group's state partition, sent to the client's transaction coordinator on kcoord's
  link (the upstream would add its own __consumer_offsets partition).
- OffsetFetch of a group with open transactions reads the markers written to its state
  partition first: after EndTxn returns, every OffsetFetch sees the outcome, as in Kafka,
  where the transaction completes only once the markers reached the group coordinator.
"""
from __future__ import annotations

import functools
import logging
from collections.abc import Collection
from typing import Any

from kio.schema.errors import ErrorCode

from ..config import CoordinatorConfig
from ..group.errors import ApiError
from ..group.offsets.txn_commit import add_offsets_to_txn_response
from ..group.shard import RequestContext
from ..protocol import error_responses
from ..runtime.shard_runtime import ShardRuntime
from ..runtime.state_log import StateLog
from ..runtime.txn_offsets_log import ClientTxnAppender, add_offsets_to_txn, txn_offset_commit_write
from .routing import ShardRouter

log = logging.getLogger("kcoord.service")


class Transactions:
    """TxnOffsetCommit and AddOffsetsToTxn, and the markers OffsetFetch waits for."""

    def __init__(self, config: CoordinatorConfig, state_topic: StateLog, router: ShardRouter,
                 runtimes: Collection[ShardRuntime]) -> None:
        self.state_topic = state_topic
        self.router = router
        self.timeout_ms = config.offsets_commit_timeout_ms
        self.appender: ClientTxnAppender | None = None
        # One process reads its log raw with the marker-aware loader TxnOffsetCommit needs
        # unless the operator falls back (`--config txn_offsets=false`: the plain reader,
        # committed transactions replayed at their marker and no client producer ids kept,
        # TxnOffsetCommit not served). The fenced log of several
        # processes (--instance-id) always reads raw.
        enable = getattr(state_topic, "enable_txn_offsets", None) if config.txn_offsets else None
        if enable is not None and not getattr(state_topic, "txn_offsets_supported", False):
            enable(functools.partial(_open_upstream, getattr(state_topic, "security", None), "kcoord-txn"))
        if getattr(state_topic, "txn_offsets_supported", False):
            self.appender = ClientTxnAppender(state_topic.topic, state_topic.call_leader,  # type: ignore[attr-defined]
                                              request_timeout_ms=config.offsets_commit_timeout_ms)
            for rt in runtimes:
                rt.txn_log = state_topic

    @property
    def served(self) -> bool:
        return self.appender is not None

    async def txn_offset_commit(self, ctx: RequestContext, req):
        appender = self.appender
        if appender is None:
            return error_responses.txn_offset_commit(ctx.api_version, ApiError(
                ErrorCode.unsupported_version,
                "TxnOffsetCommit needs the fenced state log (docs/design/transactions.md)"), req)
        rt = self.router.runtime_for(req.group_id)
        try:
            op, append = txn_offset_commit_write(appender, rt.partition, ctx, req, rt.write_timeout_s)
            return await rt.run_transactional(op, append)
        except ApiError as e:
            return error_responses.txn_offset_commit(ctx.api_version, e, req)

    async def add_offsets_to_txn(self, ctx: RequestContext, req):
        if self.appender is None:
            return add_offsets_to_txn_response(ctx.api_version, ErrorCode.unsupported_version)
        if not req.group_id:
            # Kafka adds __consumer_offsets-k for any group id; an empty one has no coordinator.
            return add_offsets_to_txn_response(ctx.api_version, ErrorCode.invalid_group_id)
        code = await add_offsets_to_txn(self.state_topic, req, self.state_topic.topic,  # type: ignore[arg-type]
                                        self.router.partition_for(req.group_id), ctx.api_version,
                                        self.timeout_ms / 1000)
        return add_offsets_to_txn_response(ctx.api_version, code)

    async def read_markers(self, group_ids: Collection[str]) -> None:
        """Before OffsetFetch answers a group with open transactions, read the markers written
        into its state partition since. Kafka's transaction coordinator completes a
        transaction only after WriteTxnMarkers reached the group coordinator, which applies
        the marker then: after EndTxn returns, every OffsetFetch sees the outcome. kcoord
        learns of markers by reading the partition, so it reads them here: the same
        read-your-writes, without a fetch loop per shard. If the read fails, the answer comes
        from memory (require_stable then answers UNSTABLE_OFFSET_COMMIT, which clients retry)."""
        if self.appender is None:
            return
        runtimes = {self.router.runtime_for(g) for g in group_ids}
        for rt in runtimes:
            if any(rt.shard.offsets.has_open_transactions(g) for g in group_ids):
                try:
                    await rt.read_markers()
                except Exception as e:
                    log.debug("shard %d: markers not read before OffsetFetch: %s", rt.partition, e)


async def _open_upstream(security: Any, client_id: str, addresses):
    """A kio link to the upstream with kcoord's TLS/SASL (the state topic's raw reads and
    clients' transactional appends); the runtime may not import the gateway, so the service
    hands it this opener."""
    from ..upstream.client import UpstreamClient
    return await UpstreamClient.connect(addresses, client_id=client_id, security=security)

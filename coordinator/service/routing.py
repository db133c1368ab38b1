"""Routing: which shard owns a group, and requests split by shard.

Rules of this module:
- A group belongs to the state-topic partition its `Partitioner` names: Kafka's mapping
  (`GroupCoordinatorService.partitionFor`; coordinator/group/hashing.py), or the legacy one
  on a topic an earlier kcoord wrote (service/partitioner.py). Fixed for the router's life.
  The answer is remembered (bounded): Java's String.hashCode in Python costs ~1 µs per
  character, and every request asks.
- A single-group request runs on its shard; a shard-level failure (loading, not the
  coordinator, a failed write) becomes the API's own error response (its row's,
  coordinator/protocol/error_responses.py), as Kafka's `GroupCoordinatorService` maps its
  exceptions.
- A multi-group request is split by shard, run shard by shard concurrently, and answered in
  the request's order; a failing shard answers only its own groups' entries. Groups the
  authorization stage denied answer GROUP_AUTHORIZATION_FAILED unread.
- ListGroups asks every shard and leaves out the ones that are not the coordinator
  (Kafka's listGroups asks only its active partitions).
"""
from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from ..group.errors import ApiError
from ..group.hashing import KAFKA, Partitioner
from ..group.result import Result
from ..group.shard import GroupCoordinatorShard, RequestContext
from ..protocol.error_responses import ErrorResponse
from ..runtime.shard_runtime import ShardRuntime

Operation = Callable[[GroupCoordinatorShard, int], Any]


class ShardRouter:
    """Routes groups to the shard runtimes of the state topic's partitions."""

    def __init__(self, runtimes: Sequence[ShardRuntime], partitions: int, partitioner: Partitioner = KAFKA) -> None:
        self.runtimes = runtimes
        self._count = partitions
        self.partitioner = partitioner
        self._place = partitioner.partition_for
        self._partitions: dict[str, int] = {}

    def partition_for(self, group_id: str) -> int:
        # Java's String.hashCode in Python costs ~1 µs per character: remember the answer.
        partition = self._partitions.get(group_id)
        if partition is None:
            if len(self._partitions) >= 100_000:
                self._partitions.clear()
            partition = self._partitions[group_id] = self._place(group_id, self._count)
        return partition

    def runtime_for(self, group_id: str) -> ShardRuntime:
        # partition_for's remembered answer read here: every request asks, one call less.
        partition = self._partitions.get(group_id)
        return self.runtimes[partition if partition is not None else self.partition_for(group_id)]

    def by_shard(self, group_ids) -> dict[ShardRuntime, list[str]]:
        out: dict[ShardRuntime, list[str]] = defaultdict(list)
        for gid in group_ids:
            out[self.runtime_for(gid)].append(gid)
        return out

    async def one_group(self, respond: ErrorResponse, ctx: RequestContext, req, op: Operation):
        """A single-group API: the shard's answer, or the API's error response ``respond``
        when the shard cannot serve it."""
        try:
            return await self.runtime_for(req.group_id).run(op)
        except ApiError as e:
            return respond(ctx.api_version, e, req)

    async def per_group(self, group_ids, describe, on_error, denied: frozenset[str] = frozenset()) -> list:
        """Run a read of several groups shard by shard; answers keep the request's order.
        Groups in ``denied`` (authorization) answer GROUP_AUTHORIZATION_FAILED unread."""
        answers: dict[str, Any] = {}
        order = list(group_ids)
        if denied:
            refused = ApiError(ErrorCode.group_authorization_failed)
            answers.update((g, on_error(g, refused)) for g in order if g in denied)
            group_ids = [g for g in order if g not in denied]

        async def read(rt: ShardRuntime, gids: list[str]) -> None:
            results = await rt.run(lambda shard, now: Result(response=[describe(shard, g) for g in gids]))
            answers.update(zip(gids, results))

        await self.per_shard(group_ids, read, lambda gids, e: answers.update((g, on_error(g, e)) for g in gids))
        return [answers[g] for g in order]

    async def per_shard(self, group_ids, run, on_error) -> None:
        """``run(runtime, group_ids)`` on each shard owning some of ``group_ids``, concurrently;
        ``on_error(group_ids, error)`` for a shard that cannot serve them."""
        async def one(rt: ShardRuntime, gids: list[str]) -> None:
            try:
                await run(rt, gids)
            except ApiError as e:
                on_error(gids, e)

        await asyncio.gather(*(one(rt, gids) for rt, gids in self.by_shard(group_ids).items()))

    async def every_shard(self, op: Operation) -> tuple[list, ErrorCode]:
        """``op``'s answer from every shard, in partition order, and the error to report: a
        shard that is not the coordinator is left out (Kafka's listGroups asks only its active
        partitions and maps NOT_COORDINATOR to an empty list); a loading one is reported,
        rather than a partial answer."""
        answers: list = []
        error = ErrorCode.none
        for rt in self.runtimes:
            try:
                answers.append(await rt.run(op))
            except ApiError as e:
                if e.code == ErrorCode.not_coordinator:
                    continue
                error = e.code
        return answers, error

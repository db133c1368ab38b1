"""The service's requests without a coroutine (GroupCoordinatorService.starters): the same
answers as `handle`, released only once durable, the API's error response for a shard-level
failure, and the membership lease checked when the answer leaves, not when it was computed."""
from __future__ import annotations

import asyncio
import uuid

from kio.schema.errors import ErrorCode

from coordinator.authz import ALLOW_ALL
from coordinator.config import CoordinatorConfig
from coordinator.group.image import MetadataImage, TopicImage
from coordinator.protocol import apis
from coordinator.runtime.answer import Answer
from coordinator.service import GroupCoordinatorService
from support import raw_client

from ..runtime.fakes import FakeStateTopic, group_in
from ..runtime.test_shard_failures import CLIENT

VERSION = 8


def _commit(group: str, offset: int):
    t = raw_client.request_types(apis.OFFSET_COMMIT, VERSION)
    return t.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=(t.OffsetCommitRequestTopic(name="t", partitions=(t.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""),)),))


def _code(response) -> ErrorCode:
    return response.topics[0].partitions[0].error_code


async def _service(log: FakeStateTopic) -> GroupCoordinatorService:
    svc = GroupCoordinatorService(CoordinatorConfig(state_topic_partitions=2), log)  # type: ignore[arg-type]
    await svc.start()
    svc.on_metadata_update(MetadataImage.of([TopicImage(topic_id=uuid.uuid4(), name="t", num_partitions=1)]))
    return svc


def test_a_commit_is_answered_once_its_write_is_acknowledged_with_handle_s_answer():
    async def main():
        log = FakeStateTopic(2)
        svc = await _service(log)
        start = svc.starters[apis.OFFSET_COMMIT]
        assert apis.CONSUMER_GROUP_HEARTBEAT in svc.starters and apis.HEARTBEAT not in svc.starters
        log.hold_writes = asyncio.Event()
        answer = start(VERSION, _commit("g", 5), CLIENT)
        assert isinstance(answer, Answer), "it waits: the runtime's answer of it, completed by its write"
        await asyncio.sleep(0.01)
        assert not answer.done(), "released only once the write is acknowledged"
        log.hold_writes.set()
        started = await asyncio.wait_for(answer, 5)
        handled = await svc.handle(apis.OFFSET_COMMIT, VERSION, _commit("g", 6), CLIENT)
        assert started == handled and _code(started) is ErrorCode.none
        svc.close()
    asyncio.run(main())


async def _commit_while_held(svc, log: FakeStateTopic, group: str, meanwhile=lambda: None):
    """A commit started while its write is held; ``meanwhile`` runs before the write goes on."""
    log.hold_writes = asyncio.Event()
    answer = svc.starters[apis.OFFSET_COMMIT](VERSION, _commit(group, 5), CLIENT)
    meanwhile()
    log.hold_writes.set()
    return await asyncio.wait_for(answer, 5)


def test_a_failed_write_answers_the_api_s_error_response():
    async def main():
        log = FakeStateTopic(2)
        svc = await _service(log)
        answer = await _commit_while_held(svc, log, "g", lambda: setattr(log, "fail_writes", RuntimeError("refused")))
        assert _code(answer) is ErrorCode.not_coordinator
        svc.close()
    asyncio.run(main())


def test_a_shard_that_cannot_serve_answers_at_once_and_the_lease_gates_the_release():
    async def main():
        log = FakeStateTopic(2)
        svc = await _service(log)
        gid = group_in(1, 2)
        svc.runtimes[1].unload("moved")
        refused = svc.starters[apis.OFFSET_COMMIT](VERSION, _commit(gid, 1), CLIENT)
        assert _code(refused) is ErrorCode.not_coordinator, "not a future: the error response at once"
        lease = {"valid": True}
        svc.serving = lambda: lease["valid"]
        # The lease runs out while the write is in flight.
        answer = await _commit_while_held(svc, log, group_in(0, 2), lambda: lease.update(valid=False))
        assert _code(answer) is ErrorCode.not_coordinator
        svc.close()
    asyncio.run(main())


def test_no_starters_under_an_authorizer():
    async def main():
        svc = await _service(FakeStateTopic(2))
        assert svc.authorizer is ALLOW_ALL and svc.starters
        svc.authorizer = object()   # type: ignore[assignment]
        assert not svc.starters, "the authorization stage is a coroutine: every API goes through handle"
        svc.close()
    asyncio.run(main())



def test_request_contexts_are_kept_per_client_and_version_and_bounded():
    from coordinator.protocol.service import ClientInfo
    from coordinator.service import wiring

    async def main():
        svc = await _service(FakeStateTopic(2))
        start = svc.starters[apis.OFFSET_COMMIT]
        start(VERSION, _commit("g", 1), CLIENT)
        client, ctx = svc._contexts[id(CLIENT)]
        start(VERSION, _commit("g", 2), CLIENT)
        assert client is CLIENT and svc._contexts[id(CLIENT)][1] is ctx, "one context per client and version"
        assert (ctx.api_version, ctx.client_id, ctx.client_host) == (VERSION, CLIENT.client_id, f"/{CLIENT.host}")
        start(VERSION - 1, _commit("g", 3), CLIENT)
        assert svc._contexts[id(CLIENT)][1].api_version == VERSION - 1
        for i in range(wiring._CONTEXTS_KEPT + 10):
            start(VERSION, _commit("g", 1), ClientInfo(f"c{i}", "10.0.0.1", i, "test"))
        assert 0 < len(svc._contexts) <= wiring._CONTEXTS_KEPT
        svc.close()
    asyncio.run(main())


def test_a_written_answer_is_counted_timed_and_audited_as_handle_s_is():
    """The written answer's release (wiring._release_written, which calls `_release`)
    counts, times and audits the request as `handle`'s release does."""
    async def main():
        from coordinator import metrics

        log = FakeStateTopic(2)
        svc = await _service(log)
        audited: list = []

        class Audit:
            def record(self, api_key, request, response, client):
                audited.append((api_key, request.topics[0].partitions[0].committed_offset, _code(response), client))

        svc.audit = Audit()  # type: ignore[assignment]
        name = svc.registry.names[apis.OFFSET_COMMIT]
        requests = metrics.REQUESTS.labels(api=name, error="none")
        seconds = metrics.REQUEST_SECONDS.labels(api=name)
        counted, timed, took = requests.value, sum(seconds.counts), seconds.sum
        written = await _commit_while_held(svc, log, "g")
        assert isinstance(svc.starters[apis.OFFSET_COMMIT](VERSION, _commit("g", 6), CLIENT), Answer)
        handled = await svc.handle(apis.OFFSET_COMMIT, VERSION, _commit("g", 7), CLIENT)
        assert written == handled and _code(written) is ErrorCode.none
        assert requests.value - counted >= 2 and sum(seconds.counts) - timed >= 2 and seconds.sum > took
        assert audited[0] == (apis.OFFSET_COMMIT, 5, ErrorCode.none, CLIENT)
        assert (apis.OFFSET_COMMIT, 7, ErrorCode.none, CLIENT) in audited
        svc.close()
    asyncio.run(main())

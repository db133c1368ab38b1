"""The fenced log's links (coordinator/runtime/fenced_links.py): a Metadata read right after
CreateTopics waits, bounded, for the topic to be listed and its partition led (Kafka's
brokers learn a new topic a moment after the controller committed it), never asks for
auto-creation, and fails naming the topic; a link due for KIP-368 re-authentication is
retired and replaced before the next request; callers that find no link share one open (a
failed open fails them all and the next call opens again; a link that lands after close() or
drop() is closed)."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode

from coordinator.runtime.fenced_links import StateLogError, UpstreamLinks

TOPIC = "__kcoord_links"
BROKER = ("127.0.0.1", 1)


def _answer(code: ErrorCode, leader: int = 1):
    partitions = () if code != ErrorCode.none else (SimpleNamespace(
        error_code=ErrorCode.none, partition_index=0, leader_id=leader, replica_nodes=(1,)),)
    return SimpleNamespace(brokers=(SimpleNamespace(node_id=1, host=BROKER[0], port=BROKER[1]),),
                           topics=(SimpleNamespace(name=TOPIC, error_code=code, partitions=partitions),))


class Link:
    def __init__(self, answers: list) -> None:
        self.answers = answers
        self.requests: list = []
        self.closed = False
        self.reauthentication_due = False
        self.retired = False

    async def request(self, request, timeout: float = 0):
        self.requests.append(request)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def retire(self) -> None:
        self.retired = self.closed = True

    def close(self) -> None:
        self.closed = True


def _links(link: Link, opened: list | None = None) -> UpstreamLinks:
    async def open_link(addresses):
        if opened is not None:
            opened.append(addresses)
        return link
    return UpstreamLinks([BROKER], TOPIC, open_link, request_timeout_s=1.0, fetch_max_bytes=1024)


def test_a_topic_not_listed_yet_is_asked_again_until_its_partition_has_a_leader():
    link = Link([_answer(ErrorCode.unknown_topic_or_partition), _answer(ErrorCode.leader_not_available),
                 _answer(ErrorCode.none, leader=-1), _answer(ErrorCode.none)])
    links = _links(link)
    assert asyncio.run(links.leader(0)) == BROKER
    assert len(link.requests) == 4
    assert all(r.allow_auto_topic_creation is False for r in link.requests)


def test_a_topic_that_never_appears_fails_within_the_bound_naming_it():
    link = Link([_answer(ErrorCode.unknown_topic_or_partition)])
    links = _links(link)
    links.metadata_wait_s = 0.3
    with pytest.raises(StateLogError, match=f"state topic {TOPIC} not ready in the upstream's metadata "
                                            f"after 0.3s: UNKNOWN_TOPIC_OR_PARTITION"):
        asyncio.run(links.refresh_metadata())
    assert 2 <= len(link.requests) <= 10


def test_a_link_due_for_reauthentication_is_retired_and_a_new_one_opened():
    link = Link([_answer(ErrorCode.none)])
    opened: list = []
    links = _links(link, opened)

    async def run():
        await links.refresh_metadata()
        link.reauthentication_due = True
        fresh = Link([_answer(ErrorCode.none)])

        async def open_fresh(addresses):
            opened.append(addresses)
            return fresh
        links.open = open_fresh
        await links.refresh_metadata()
        return fresh

    fresh = asyncio.run(run())
    assert link.retired and len(opened) == 2 and len(fresh.requests) == 1


class _Opener:
    """An `open_link` whose opens finish when the test says: each open waits on its own future."""

    def __init__(self) -> None:
        self.pending: list[asyncio.Future] = []
        self.links: list[Link] = []

    async def __call__(self, addresses):
        gate = asyncio.get_running_loop().create_future()
        self.pending.append(gate)
        await gate
        link = Link([_answer(ErrorCode.none)])
        self.links.append(link)
        return link


async def _until(condition) -> None:
    while not condition():
        await asyncio.sleep(0)


async def _one_open(opener: _Opener) -> None:
    """The first open started, and every other caller had its turns: one open only."""
    await _until(lambda: opener.pending)
    for _ in range(5):
        await asyncio.sleep(0)
    assert len(opener.pending) == 1


def _opener_links() -> tuple[UpstreamLinks, _Opener]:
    opener = _Opener()
    return UpstreamLinks([BROKER], TOPIC, opener, request_timeout_s=1.0, fetch_max_bytes=1024), opener


def test_two_callers_finding_no_link_share_one_open():
    links, opener = _opener_links()

    async def run():
        first = asyncio.ensure_future(links.call(BROKER, "first"))
        second = asyncio.ensure_future(links.call(BROKER, "second"))
        await _one_open(opener)
        opener.pending[0].set_result(None)
        await asyncio.gather(first, second)

    asyncio.run(run())
    assert len(opener.links) == 1
    link = opener.links[0]
    assert links.links == {BROKER: link} and not link.closed
    assert link.requests == ["first", "second"]
    links.close()
    assert all(opened.closed for opened in opener.links)


def test_a_failed_open_fails_every_caller_and_the_next_call_opens_again():
    links, opener = _opener_links()

    async def run():
        calls = [asyncio.ensure_future(links.call(BROKER, n)) for n in range(2)]
        await _one_open(opener)
        opener.pending[0].set_exception(OSError("connection refused"))
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(r, StateLogError) and "connection refused" in str(r) for r in results)
        again = asyncio.ensure_future(links.call(BROKER, "again"))
        await _until(lambda: len(opener.pending) == 2)
        opener.pending[1].set_result(None)
        return await again

    assert asyncio.run(run()) is not None
    assert len(opener.links) == 1 and opener.links[0].requests == ["again"]


@pytest.mark.parametrize("forget", ["close", "drop"])
def test_a_link_that_finishes_opening_after_close_or_drop_is_closed(forget):
    links, opener = _opener_links()

    async def run():
        call = asyncio.ensure_future(links.call(BROKER, "request"))
        await _until(lambda: opener.pending)
        links.close() if forget == "close" else links.drop(BROKER)
        opener.pending[0].set_result(None)
        with pytest.raises(StateLogError, match="closed while it was opened"):
            await call

    asyncio.run(run())
    assert len(opener.links) == 1 and opener.links[0].closed and opener.links[0].requests == []
    assert links.links == {}


def test_a_caller_cancelled_does_not_cancel_the_open_the_others_await():
    links, opener = _opener_links()

    async def run():
        first = asyncio.ensure_future(links.call(BROKER, "first"))
        second = asyncio.ensure_future(links.call(BROKER, "second"))
        await _one_open(opener)
        first.cancel()
        opener.pending[0].set_result(None)
        assert await second is not None
        assert first.cancelled()

    asyncio.run(run())
    assert len(opener.links) == 1 and opener.links[0].requests == ["second"]


class _SendingLink(Link):
    """A link with `send`: the future of each answer, completed by the test."""

    def __init__(self) -> None:
        super().__init__([_answer(ErrorCode.none)])
        self.sent: list[asyncio.Future] = []
        self.refuse: Exception | None = None

    def send(self, request, timeout: float = 0):
        if self.refuse is not None:
            raise self.refuse
        self.requests.append(request)
        self.sent.append(asyncio.get_running_loop().create_future())
        return self.sent[-1]


def test_send_on_an_open_link_is_its_future_and_a_failure_drops_the_link():
    link = _SendingLink()
    links = _links(link)

    async def run():
        await links.link(BROKER)
        answer = links.send(BROKER, "request")
        assert answer is link.sent[0]              # the link's own future, no Task between
        answer.set_exception(OSError("reset"))
        await asyncio.sleep(0)                     # the answer's callbacks: the link is dropped
        error = links.failed(BROKER, "request", answer.exception())
        assert isinstance(error, StateLogError) and "reset" in str(error)
        assert link.closed and BROKER not in links.links
        link.closed, link.refuse = False, OSError("session expired")
        links.links[BROKER] = link
        refused = links.send(BROKER, "again")
        assert isinstance(refused.exception(), StateLogError) and "session expired" in str(refused.exception())
        assert link.closed and BROKER not in links.links

    asyncio.run(run())


def test_send_without_an_open_link_opens_one_through_call():
    link = Link([_answer(ErrorCode.none)])       # no `send`: every request goes through `call`
    opened: list = []
    links = _links(link, opened)

    async def run():
        answer = links.send(BROKER, "request")
        assert await answer is not None
        assert links.failed(BROKER, "request", StateLogError("call's own")).args == ("call's own",)

    asyncio.run(run())
    assert len(opened) == 1 and link.requests == ["request"] and not link.closed


def test_a_failed_request_drops_only_its_own_link_not_a_newer_open():
    """Two callers share an open that fails; the first asks the same address again at once
    (bootstrap_call does, when a broker's address is also a bootstrap address), which starts
    a new open. The second caller's failure must not forget that open: the retry lands."""
    gate = asyncio.Event()
    opens = 0

    async def open_link(addresses):
        nonlocal opens
        opens += 1
        if opens == 1:
            await gate.wait()
            raise OSError("refused")
        await asyncio.sleep(0.01)
        return Link(["ok"])

    links = UpstreamLinks([BROKER], TOPIC, open_link, request_timeout_s=1.0, fetch_max_bytes=1024)

    async def first():
        try:
            await links.call(BROKER, "req")
        except StateLogError:
            return await links.call(BROKER, "req")

    async def second():
        with pytest.raises(StateLogError, match="refused"):
            await links.call(BROKER, "req")

    async def run():
        a = asyncio.create_task(first())
        b = asyncio.create_task(second())
        await asyncio.sleep(0)
        gate.set()
        async with asyncio.timeout(10):
            assert await a == "ok"
            await b
        assert opens == 2 and not links.links[BROKER].closed

    asyncio.run(run())


def test_a_failed_answer_does_not_drop_a_newer_link():
    """A request's answer fails after its link was replaced by a newer one (another caller
    opened it meanwhile): the newer link stays."""
    old, new = _SendingLink(), _SendingLink()
    links = _links(old)

    async def run():
        await links.link(BROKER)
        answer = links.send(BROKER, "request")
        links.links[BROKER] = new                  # the old link was replaced meanwhile
        answer.set_exception(OSError("reset"))
        await asyncio.sleep(0)
        assert old.closed and links.links[BROKER] is new and not new.closed

    asyncio.run(run())

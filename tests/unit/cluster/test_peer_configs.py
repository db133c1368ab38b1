"""Per-group config requests routed between kcoord instances (coordinator/cluster/peers.py,
coordinator/service/group_config_peers.py, coordinator/service/envelope.py): two real services
stand for two instances, each owning one of the two shards in the map; the link from one to the
other is a stand-in for the other's gateway: it hands the Envelope, through its wire bytes, to
the other service as a request from the link's principal, as the gateway would."""
from __future__ import annotations

import asyncio
import dataclasses

from kio.schema.envelope.v0.request import EnvelopeRequest
from kio.schema.envelope.v0.response import EnvelopeResponse
from kio.schema.errors import ErrorCode

from coordinator.cluster.peers import PEER_CLIENT_ID, Peers
from coordinator.cluster.protocol import Assignment, Endpoint
from coordinator.group.kio_util import schema
from coordinator.protocol import envelope
from coordinator.protocol.apis import response_header_version
from coordinator.protocol.codec import decode_body, encode_body
from coordinator.protocol.framing import response_frame

from ..runtime.test_shard_failures import CLIENT
from ..service.test_authz import DenyGroups, service_with
from ..service.test_group_configs_service import describe, incremental

KEY = "consumer.session.timeout.ms"
# The link's own principal, as the other instance's gateway sees it.
PEER = dataclasses.replace(CLIENT, client_id=PEER_CLIENT_ID, principal="User:kcoord")


class Instances(DenyGroups):
    """DenyGroups, and Cluster CLUSTER_ACTION for the instances' principal only."""

    def authorize(self, client, actions):
        verdicts = super().authorize(client, actions)
        return [ok or (a.operation == "CLUSTER_ACTION" and client.principal == "User:kcoord")
                for a, ok in zip(actions, verdicts)]


async def through_the_wire(service, envelope, sender=PEER):
    """``envelope`` as the other instance's gateway hands it to its service, and its answer
    as it comes back over the link."""
    received = decode_body(EnvelopeRequest, encode_body(envelope), 0)
    answer = await service.handle(58, 0, received, sender)
    return decode_body(EnvelopeResponse, encode_body(answer), 0)


class Node:
    def __init__(self, owners: dict[int, str]) -> None:
        self.assignment = Assignment(1, frozenset(), owners, {i: Endpoint("127.0.0.1", 9000 + n) for n, i in
                                                              enumerate(("a", "b"))})


class Link:
    """The other instance's gateway, in miniature; `answer` may rewrite its response."""

    def __init__(self, service, asked: list, answer=None) -> None:
        self.service, self.asked, self.answer, self.closed = service, asked, answer, False

    async def request(self, envelope, timeout=10.0):
        self.asked.append(envelope)
        response = await through_the_wire(self.service, envelope)
        return response if self.answer is None else self.answer(response)

    def close(self) -> None:
        self.closed = True


async def pair(authorizer=None, owners=None, answer=None, owner_authorizer=None):
    """Instance a (owns partition 0) with its Peers, instance b's service, and the Envelopes
    b was asked."""
    a = await service_with(authorizer or Instances())
    b = await service_with(owner_authorizer or Instances())
    asked: list = []
    links: list[Link] = []

    async def open_link(addresses):
        links.append(Link(b, asked, answer))
        return links[-1]
    a.group_config_peers = Peers("a", Node(owners if owners is not None else {0: "a", 1: "b"}), open_link, 5.0)
    return a, b, asked, links


def groups_on(service, partition: int, n: int, prefix: str = "g") -> list[str]:
    return [g for g in (f"{prefix}{i}" for i in range(100)) if service.partition_for(g) == partition][:n]


def values(response) -> dict[str, tuple[int, str | None]]:
    return {r.resource_name: (int(r.error_code), next((c.value for c in r.configs), None)) for r in response.results}


def carried(envelopes) -> list[str]:
    """The group names the Envelopes carried."""
    return [r.resource_name for e in envelopes for r in envelope.unwrap(e).request.resources]


def rewritten(api_key: int, version: int, change):
    """A link answer that rewrites the inner response the owner sent."""
    def answer(response):
        inner = change(envelope.opened(api_key, version, response))
        body = response_frame(0, encode_body(inner), response_header_version(api_key, version))[4:]
        return dataclasses.replace(response, response_data=body)
    return answer


LIST = schema("list_config_resources", 1, "request").ListConfigResourcesRequest(resource_types=(32,))


def test_a_group_of_the_other_instance_is_set_described_and_listed_there():
    async def main():
        a, b, asked, _ = await pair()
        mine, theirs = groups_on(a, 0, 1)[0], groups_on(a, 1, 1)[0]
        altered = await a.serve_group_configs(44, 1, incremental((mine, [(KEY, 0, "50000")]),
                                                                  (theirs, [(KEY, 0, "51000")])), CLIENT)
        assert [(r.resource_name, r.error_code) for r in altered.responses] == [(mine, 0), (theirs, 0)]
        assert carried(asked) == [theirs]    # only b's group travelled
        # In an Envelope carrying the client: its principal, client id and address.
        assert envelope.deserialize_principal(asked[0].request_principal) == CLIENT.principal
        assert envelope.unwrap(asked[0]).header.client_id == CLIENT.client_id
        assert envelope.host_of(asked[0].client_host_address) == CLIENT.host
        # Stored on the owner only: b's own shard has it, a's copy of that shard does not
        # (an enveloped request is served from the receiver's own shards).
        assert values(await b.serve_group_configs(32, 4, describe((theirs, (KEY,))), CLIENT))[theirs] == (0, "51000")
        own = await through_the_wire(a, envelope.wrap(describe((theirs, (KEY,))), "t", CLIENT.principal, "::1"))
        assert values(envelope.opened(32, 4, own))[theirs] == (0, "45000")
        both = await a.serve_group_configs(32, 4, describe((theirs, (KEY,)), (mine, (KEY,)), (theirs, None)), CLIENT)
        assert [(r.resource_name, r.configs[0].value) for r in both.results] == [
            (theirs, "51000"), (mine, "50000"), (theirs, "51000")]
        listed = await a.serve_group_configs(74, 1, LIST, CLIENT)
        assert listed.error_code == 0
        assert sorted(r.resource_name for r in listed.config_resources) == sorted([mine, theirs])
    asyncio.run(main())


def test_the_client_is_authorized_here_and_a_denied_group_never_travels():
    async def main():
        a, _, asked, _ = await pair(Instances())
        theirs = groups_on(a, 1, 2)
        a.authorizer.denied.add(theirs[0])
        altered = await a.serve_group_configs(44, 1, incremental(*((g, [(KEY, 0, "50000")]) for g in theirs)), CLIENT)
        assert [(r.resource_name, r.error_code) for r in altered.responses] == [
            (theirs[0], ErrorCode.group_authorization_failed), (theirs[1], 0)]
        assert carried(asked) == [theirs[1]]
    asyncio.run(main())


def test_the_owner_authorizes_the_carried_client_not_the_instance_that_sent_it():
    async def main():
        a, b, asked, _ = await pair()
        theirs = groups_on(a, 1, 2)
        b.authorizer.denied.add(theirs[0])          # the owner's ACLs refuse this client that group
        altered = await a.serve_group_configs(44, 1, incremental(*((g, [(KEY, 0, "50000")]) for g in theirs)), CLIENT)
        assert [(r.resource_name, r.error_code) for r in altered.responses] == [
            (theirs[0], ErrorCode.group_authorization_failed), (theirs[1], 0)]
        assert carried(asked) == theirs
        asked_at_b = [(act.operation, act.resource_type, act.name) for act in b.authorizer.asked]
        assert ("CLUSTER_ACTION", "CLUSTER", "kafka-cluster") in asked_at_b
        assert ("ALTER_CONFIGS", "GROUP", theirs[0]) in asked_at_b
    asyncio.run(main())


def test_an_instance_without_cluster_action_is_refused_and_its_clients_retry():
    async def main():
        a, b, asked, _ = await pair(owner_authorizer=DenyGroups())    # b grants no one CLUSTER_ACTION
        theirs = groups_on(a, 1, 1)[0]
        altered = await a.serve_group_configs(44, 1, incremental((theirs, [(KEY, 0, "50000")])), CLIENT)
        (result,) = altered.responses
        assert result.error_code == ErrorCode.coordinator_not_available
        assert "CLUSTER_AUTHORIZATION_FAILED" in result.error_message and "CLUSTER_ACTION" in result.error_message
        # Nothing inside was read: b asked about the sender only, and stored nothing.
        assert {act.resource_type for act in b.authorizer.asked} == {"CLUSTER"}
        assert values(await b.serve_group_configs(32, 4, describe((theirs, (KEY,))), CLIENT))[theirs] == (0, "45000")
    asyncio.run(main())


def test_a_request_from_another_instance_is_never_routed_on():
    async def main():
        a, _, asked, links = await pair()
        theirs = groups_on(a, 1, 1)[0]
        described = await through_the_wire(a, envelope.wrap(describe((theirs, (KEY,))), "t", "User:alice", "10.0.0.1"))
        assert described.error_code == 0
        listed = await through_the_wire(a, envelope.wrap(LIST, "t", "User:alice", "10.0.0.1"))
        assert envelope.opened(74, 1, listed).error_code == 0
        assert asked == [] and links == []
    asyncio.run(main())


def test_a_moving_shard_an_odd_answer_or_a_silent_owner_answers_coordinator_not_available():
    async def main():
        a, _, asked, _ = await pair(owners={0: "a"})         # partition 1 has no owner: moving
        theirs = groups_on(a, 1, 1)[0]
        answer = values(await a.serve_group_configs(32, 4, describe((theirs, (KEY,))), CLIENT))
        assert answer[theirs][0] == ErrorCode.coordinator_not_available and asked == []
        listed = await a.serve_group_configs(74, 1, LIST, CLIENT)
        assert (listed.error_code, listed.config_resources) == (ErrorCode.coordinator_not_available, ())

        a, _, _, _ = await pair(answer=rewritten(32, 4, lambda r: dataclasses.replace(r, results=r.results * 2)))
        described = await a.serve_group_configs(32, 4, describe((theirs, (KEY,))), CLIENT)
        (result,) = described.results          # the owner's odd answer is not merged
        assert result.error_code == ErrorCode.coordinator_not_available and "instance b" in result.error_message

        a, _, _, _ = await pair(answer=rewritten(44, 1, lambda r: dataclasses.replace(r, responses=tuple(
            dataclasses.replace(e, resource_name="another") for e in r.responses))))
        altered = await a.serve_group_configs(44, 1, incremental((theirs, [(KEY, 0, "50000")])), CLIENT)
        assert [(r.resource_name, r.error_code) for r in altered.responses] == [
            (theirs, ErrorCode.coordinator_not_available)]

        a, _, _, _ = await pair(answer=lambda r: dataclasses.replace(r, response_data=b"\x00\x01"))
        altered = await a.serve_group_configs(44, 1, incremental((theirs, [(KEY, 0, "50000")])), CLIENT)
        assert altered.responses[0].error_code == ErrorCode.coordinator_not_available
        assert "does not parse" in altered.responses[0].error_message

        async def unreachable(addresses):
            raise OSError(f"connection refused by {addresses}")
        a.group_config_peers = Peers("a", Node({0: "a", 1: "b"}), unreachable, 5.0)
        altered = await a.serve_group_configs(44, 1, incremental((theirs, [(KEY, 0, "50000")])), CLIENT)
        assert altered.responses[0].error_code == ErrorCode.coordinator_not_available
        assert "cannot be reached" in altered.responses[0].error_message
    asyncio.run(main())


def test_links_are_reused_and_closed_when_their_instance_leaves_the_map():
    async def main():
        a, _, asked, links = await pair()
        theirs = groups_on(a, 1, 1)[0]
        for _ in range(2):
            await a.serve_group_configs(32, 4, describe((theirs, (KEY,))), CLIENT)
        assert len(asked) == 2 and len(links) == 1
        peers = a.group_config_peers
        peers.on_map(Assignment(2, frozenset(), {0: "a", 1: "a"}, {"a": Endpoint("127.0.0.1", 9000)}))
        assert links[0].closed
    asyncio.run(main())

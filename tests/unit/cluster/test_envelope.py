"""The Envelope between kcoord instances (coordinator/protocol/envelope.py,
coordinator/service/envelope.py): Kafka's principal serde byte for byte, Kafka's error for each
bad part, the sender's Cluster CLUSTER_ACTION (with the ACL authorizer, on a SASL listener),
and the decoder fuzzed on bytes and on values."""
from __future__ import annotations

import asyncio
import dataclasses
import random

import pytest
from kio.schema.envelope.v0.request import EnvelopeRequest
from kio.schema.errors import ErrorCode

from coordinator.group.kio_util import schema
from coordinator.protocol import envelope
from coordinator.protocol.codec import BodyError, decode_body, encode_body
from coordinator.protocol.framing import RequestHeader
from coordinator.protocol.service import ClientInfo
from coordinator.security.acl import AclAuthorizer
from coordinator.security.acl_sources import parse_acl_text

from ..service.test_authz import service_with
from ..service.test_group_configs_service import describe, incremental

KEY = "consumer.session.timeout.ms"
ALICE = "User:alice"


def test_the_principal_is_serialized_as_kafkas_default_principal_builder():
    # DefaultKafkaPrincipalBuilder.serialize: int16 version 0, then DefaultPrincipalData v0
    # (compact strings, the boolean, no tagged fields).
    assert envelope.serialize_principal("User:alice") == b"\x00\x00\x05User\x06alice\x00\x00"
    assert envelope.deserialize_principal(b"\x00\x00\x05User\x06alice\x00\x00") == "User:alice"
    assert envelope.deserialize_principal(envelope.serialize_principal("User:CN=a:b,O=c")) == "User:CN=a:b,O=c"


@pytest.mark.parametrize("data, said", [
    (None, "no principal"),
    (b"", "too short"),
    (b"\x00\x01\x05User\x06alice\x00\x00", "version 1"),
    (b"\x00\x00\x05Us", "Failed to deserialize"),
    (b"\x00\x00\x05User\x06alice\x00\x00\x00", "left after"),
    (b"\x00\x00\x01\x06alice\x00\x00", "no type"),
])
def test_a_bad_principal_is_principal_deserialization_failure(data, said):
    with pytest.raises(envelope.EnvelopeError) as e:
        envelope.deserialize_principal(data)
    assert e.value.code == ErrorCode.principal_deserialization_failure and said in str(e.value)


def test_the_client_address_is_four_or_sixteen_bytes():
    assert envelope.host_of(envelope.host_bytes("10.1.2.3")) == "10.1.2.3"
    assert envelope.host_of(envelope.host_bytes("fe80::1%eth0")) == "fe80::1"
    for data in (b"", b"\x01" * 5, b"\x01" * 17):
        with pytest.raises(envelope.EnvelopeError) as e:
            envelope.host_of(data)
        assert e.value.code == ErrorCode.invalid_request


def _with(base: EnvelopeRequest, **changes) -> EnvelopeRequest:
    return dataclasses.replace(base, **changes)


GOOD = envelope.wrap(describe(("g", (KEY,))), "t", ALICE, "10.0.0.1")
METADATA = schema("metadata", 12, "request").MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                            include_topic_authorized_operations=False)
TOPIC_CONFIG = dataclasses.replace(describe(("g", None)), resources=(dataclasses.replace(
    describe(("t", None)).resources[0], resource_type=2),))


@pytest.mark.parametrize("envelope_request, code, said", [
    (_with(GOOD, request_principal=b"\x00"), ErrorCode.principal_deserialization_failure, "too short"),
    (_with(GOOD, client_host_address=b"\x7f\x00\x00"), ErrorCode.invalid_request, "client address"),
    (_with(GOOD, request_data=b"\x00"), ErrorCode.unsupported_version, "request header"),
    (_with(GOOD, request_data=GOOD.request_data[:9]), ErrorCode.unsupported_version, "Failed to parse"),
    (_with(GOOD, request_data=GOOD.request_data + b"\x00"), ErrorCode.unsupported_version, "Failed to parse"),
    (_with(GOOD, request_data=b"\x00\x20\x7f\xff" + GOOD.request_data[4:]), ErrorCode.unsupported_version,
     "v32767"),
    (envelope.wrap(METADATA, "t", ALICE, "10.0.0.1"), ErrorCode.invalid_request, "not eligible for forwarding"),
    (_with(GOOD, request_data=RequestHeader(58, 0, 0, "x").encode(2) + encode_body(GOOD)), ErrorCode.invalid_request,
     "not eligible"),                               # an Envelope in an Envelope
    (envelope.wrap(TOPIC_CONFIG, "t", ALICE, "10.0.0.1"), ErrorCode.invalid_request, "only GROUP"),
    (envelope.wrap(schema("list_config_resources", 1, "request").ListConfigResourcesRequest(resource_types=()),
                   "t", ALICE, "10.0.0.1"), ErrorCode.invalid_request, "only GROUP"),
])
def test_each_bad_part_gets_kafkas_error(envelope_request, code, said):
    with pytest.raises(envelope.EnvelopeError) as e:
        envelope.unwrap(envelope_request)
    assert e.value.code == code and said in str(e.value)


def test_a_good_envelope_opens_to_its_request_principal_and_address():
    inner = envelope.unwrap(GOOD)
    assert (inner.principal, inner.host, inner.header.api_key, inner.header.api_version) == (ALICE, "10.0.0.1", 32, 4)
    assert inner.request == describe(("g", (KEY,)))


# --- the sender's right, with Kafka's ACL semantics ----------------------------------------

ACLS = """
ALLOW User:kcoord * CLUSTER_ACTION CLUSTER LITERAL kafka-cluster
ALLOW User:alice * DESCRIBE_CONFIGS GROUP PREFIXED app-
ALLOW User:alice * ALTER_CONFIGS GROUP PREFIXED app-
ALLOW User:mallory * ALTER_CONFIGS GROUP LITERAL *
ALLOW User:mallory * DESCRIBE_CONFIGS GROUP LITERAL *
"""
SASL = "SASL_PLAINTEXT"


def sender(principal: str) -> ClientInfo:
    return ClientInfo(client_id="x", host="10.0.0.9", port=4000, listener=SASL, principal=principal)


async def acl_service():
    return await service_with(AclAuthorizer(parse_acl_text(ACLS)))


def test_an_envelope_from_a_principal_without_cluster_action_is_refused_on_a_sasl_listener():
    async def main():
        svc = await acl_service()
        # mallory may alter every group's configs herself, yet not send an Envelope: whatever
        # principal it carries, nothing inside is read or changed.
        for carried in ("User:mallory", "User:kcoord", "User:admin"):
            forged = envelope.wrap(incremental(("app-1", [(KEY, 0, "50000")])), "x", carried, "10.0.0.9")
            answer = await svc.handle(58, 0, forged, sender("User:mallory"))
            assert (answer.error_code, answer.response_data) == (ErrorCode.cluster_authorization_failed, None)
        described = await svc.serve_group_configs(32, 4, describe(("app-1", (KEY,))), sender(ALICE))
        assert described.results[0].configs[0].value == "45000"
    asyncio.run(main())


def test_an_instance_with_cluster_action_acts_with_the_rights_of_the_carried_client():
    async def main():
        svc = await acl_service()
        mine = envelope.wrap(incremental(("app-1", [(KEY, 0, "50000")]), ("ops-1", [(KEY, 0, "50000")])), "x",
                             ALICE, "10.0.0.9")
        answer = envelope.opened(44, 1, await svc.handle(58, 0, mine, sender("User:kcoord")))
        assert [(r.resource_name, r.error_code) for r in answer.responses] == [
            ("app-1", ErrorCode.none), ("ops-1", ErrorCode.group_authorization_failed)]
        # The instances' own principal carries no group right of its own.
        theirs = envelope.wrap(describe(("app-1", (KEY,))), "x", "User:kcoord", "10.0.0.9")
        answer = envelope.opened(32, 4, await svc.handle(58, 0, theirs, sender("User:kcoord")))
        assert answer.results[0].error_code == ErrorCode.group_authorization_failed
        # A bad part from a sender with the right gets Kafka's error, in the Envelope.
        bad = await svc.handle(58, 0, _with(mine, client_host_address=b""), sender("User:kcoord"))
        assert (bad.error_code, bad.response_data) == (ErrorCode.invalid_request, None)
    asyncio.run(main())


def test_the_correlation_id_and_client_id_of_the_inner_request_come_back():
    async def main():
        svc = await acl_service()
        wrapped = envelope.wrap(describe(("app-1", (KEY,))), "client-7", ALICE, "10.0.0.9")
        header = b"\x00\x20\x00\x04\x00\x00\x30\x39"        # DescribeConfigs v4, correlation id 12345
        wrapped = _with(wrapped, request_data=header + wrapped.request_data[8:])
        answer = await svc.handle(58, 0, wrapped, sender("User:kcoord"))
        assert answer.response_data[:4] == b"\x00\x00\x30\x39"
        assert envelope.unwrap(wrapped).header.client_id == "client-7"
    asyncio.run(main())


# --- fuzz: the decoder on bytes and on values ---------------------------------------------

SAMPLES = (GOOD, envelope.wrap(incremental(("g", [(KEY, 0, "1")])), None, "User:a", "::1"),
           envelope.wrap(schema("list_config_resources", 1, "request").ListConfigResourcesRequest(
               resource_types=(32,)), "c", "User:b", "127.0.0.1"))


def _mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(4)
        at = rng.randrange(len(out) + 1)
        if kind == 0 and out:
            out[min(at, len(out) - 1)] = rng.randrange(256)
        elif kind == 1:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif kind == 2:
            del out[at:at + rng.randint(1, 8)]
        else:
            out[at:at] = rng.choice((b"\xff\xff\xff\x7f", b"\x80\x80\x80\x80\x08", b"\x00\x00", b"\xff"))
    return bytes(out)


def _opened_or_refused(value: EnvelopeRequest) -> None:
    try:
        inner = envelope.unwrap(value)
    except envelope.EnvelopeError as e:
        assert e.code in (ErrorCode.principal_deserialization_failure, ErrorCode.invalid_request,
                          ErrorCode.unsupported_version) and str(e)
        return
    assert inner.header.api_key in envelope.FORWARDABLE and inner.host and ":" in inner.principal


def test_fuzz_the_envelope_bytes():
    rng = random.Random(58)
    for i in range(3000):
        data = _mutate(encode_body(SAMPLES[i % len(SAMPLES)]), rng)
        try:
            value = decode_body(EnvelopeRequest, data, 0)
        except BodyError:
            continue
        _opened_or_refused(value)


def test_fuzz_the_envelope_values():
    rng = random.Random(590)
    for i in range(3000):
        base = SAMPLES[i % len(SAMPLES)]
        field = rng.choice(("request_data", "request_principal", "client_host_address", "all"))
        changes = {}
        for name in ("request_data", "request_principal", "client_host_address"):
            if field in (name, "all"):
                current = getattr(base, name) or b""
                changes[name] = rng.choice((_mutate(current, rng), bytes(rng.randrange(256) for _ in range(
                    rng.randint(0, 40))), None if name == "request_principal" else b""))
        _opened_or_refused(dataclasses.replace(base, **changes))

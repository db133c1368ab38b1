"""ACL sources (coordinator/security/acl_sources.py): the ACL file format and its reload (a bad
file keeps the ACLs in force and logs the line), build_authorizer's modes and settings, and
authorizer=upstream failing closed while the upstream cannot be reached."""
from __future__ import annotations

import asyncio
import logging
import os

import pytest

from coordinator.protocol.apis import response_class
from coordinator.security.acl import AclBinding
from coordinator.security.acl_sources import (
    AclFileError,
    FileAclSource,
    UpstreamAclSource,
    bindings_from_describe,
    build_authorizer,
    parse_acl_text,
)
from coordinator.security.settings import SecurityConfigError
from coordinator.upstream.client import opener
from support.ports import free_port

GOOD = """\
# PERMISSION PRINCIPAL HOST OPERATION RESOURCE_TYPE PATTERN NAME
ALLOW User:alice * READ GROUP LITERAL orders      # trailing comment
allow user:bob 10.0.0.7 describe topic prefixed orders.
DENY "User:CN=Jo Doe,O=x" * ALL GROUP LITERAL *
"""


def test_the_file_format_parses_into_bindings():
    acls = parse_acl_text(GOOD)
    assert acls.bindings == (
        AclBinding("GROUP", "LITERAL", "orders", "User:alice", "*", "READ", "ALLOW"),
        AclBinding("TOPIC", "PREFIXED", "orders.", "user:bob", "10.0.0.7", "DESCRIBE", "ALLOW"),
        AclBinding("GROUP", "LITERAL", "*", "User:CN=Jo Doe,O=x", "*", "ALL", "DENY"),
    )


@pytest.mark.parametrize("text, line, problem", [
    ("ALLOW User:a * READ GROUP LITERAL\n", 1, "expected 7 fields"),
    ("\n# c\nALLOW User:a * READ QUEUE LITERAL g\n", 3, "resource type 'QUEUE'"),
    ("ALLOW User:a * READ GROUP LITERAL g\nALLOW 'User:a * READ GROUP LITERAL g\n", 2, "quotation"),
    ("ALLOW a * READ GROUP LITERAL g\n", 1, "principal"),
])
def test_a_bad_line_is_named_with_its_problem(text, line, problem):
    with pytest.raises(AclFileError) as e:
        parse_acl_text(text, "acls.txt")
    assert e.value.line == line
    assert problem in str(e.value) and f"acls.txt: line {line}" in str(e.value)


def test_build_authorizer_modes_and_settings(tmp_path):
    assert build_authorizer({}, "b:9092") is None
    assert build_authorizer({"authorizer": "none"}, "b:9092") is None
    assert build_authorizer({"authorizer": "probe"}, "b:9092").__class__.__name__ == "ProbeAuthorizer"
    with pytest.raises(SecurityConfigError, match="probe"):     # no client link to probe on
        build_authorizer({"authorizer": "probe", "sasl.termination": "true"}, "b:9092")
    with pytest.raises(SecurityConfigError, match="expected one of"):
        build_authorizer({"authorizer": "ldap"}, "b:9092")
    with pytest.raises(SecurityConfigError, match="authorizer.file=PATH"):
        build_authorizer({"authorizer": "file"}, "b:9092")
    with pytest.raises(SecurityConfigError, match="allow.everyone.if.no.acl.found"):
        build_authorizer({"authorizer": "file", "authorizer.file": "x", "allow.everyone.if.no.acl.found": "maybe"},
                         "b:9092")
    with pytest.raises(SecurityConfigError, match="authorizer.refresh.ms"):
        build_authorizer({"authorizer": "upstream", "authorizer.refresh.ms": "soon"}, "b:9092", opener)
    with pytest.raises(TypeError, match="link opener"):     # a wiring mistake, not a setting
        build_authorizer({"authorizer": "upstream"}, "b:9092")
    asked = []

    def recording_opener(security, client_id):
        asked.append((security, client_id))
        return opener(security, client_id)
    upstream = build_authorizer({"authorizer": "upstream", "upstream.security.protocol": "SASL_PLAINTEXT",
                                 "upstream.sasl.mechanism": "SCRAM-SHA-512", "upstream.sasl.username": "kcoord",
                                 "upstream.sasl.password": "pw", "super.users": "User:a;User:b",
                                 "allow.everyone.if.no.acl.found": "true", "authorizer.refresh.ms": "500"},
                                "b1:9092, b2:9092", recording_opener)
    assert upstream is not None and not upstream.ready
    assert upstream.super_users == {"User:a", "User:b"} and upstream.allow_everyone_if_no_acl_found
    source = upstream.source
    assert isinstance(source, UpstreamAclSource)
    # kcoord's own upstream security (security/upstream.py) on kcoord's own links
    assert source.addresses == (("b1", 9092), ("b2", 9092))
    [(security, client_id)] = asked
    assert (security.protocol, security.mechanism, security.username, security.password) == \
        ("SASL_PLAINTEXT", "SCRAM-SHA-512", "kcoord", "pw")
    assert client_id == "kcoord-acl-mirror"
    assert source.refresh_s == 0.5
    with pytest.raises(SecurityConfigError, match="upstream.sasl.mechanism"):
        build_authorizer({"authorizer": "upstream", "upstream.security.protocol": "SASL_SSL"}, "b:9092", opener)


def _describe_acls_answer(resources, error_code=0, error_message=None):
    """A DescribeAcls v1 answer, as kcoord's upstream client decodes it."""
    from datetime import timedelta

    response = response_class(29, 1)
    module = __import__(response.__module__, fromlist=["DescribeAclsResource"])
    return response(throttle_time=timedelta(0), error_code=error_code, error_message=error_message,
                    resources=tuple(module.DescribeAclsResource(
                        resource_type=rt, resource_name=name, pattern_type=pt,
                        acls=tuple(module.AclDescription(principal=p, host=h, operation=op, permission_type=perm)
                                   for p, h, op, perm in acls))
                        for rt, name, pt, acls in resources))


def test_describe_acls_answers_become_bindings_and_unknown_types_are_skipped():
    answer = _describe_acls_answer([(3, "g", 3, [("User:alice", "*", 3, 3), ("User:*", "10.0.0.1", 2, 2)]),
                                    (4, "kafka-cluster", 3, [("User:alice", "*", 8, 3)]),
                                    (99, "x", 3, [("User:alice", "*", 3, 3)])])
    bindings, skipped = bindings_from_describe(answer.resources)
    assert bindings == [AclBinding("GROUP", "LITERAL", "g", "User:alice", "*", "READ", "ALLOW"),
                        AclBinding("GROUP", "LITERAL", "g", "User:*", "10.0.0.1", "ALL", "DENY"),
                        AclBinding("CLUSTER", "LITERAL", "kafka-cluster", "User:alice", "*", "DESCRIBE", "ALLOW")]
    assert len(skipped) == 1 and "resource type '99'" in skipped[0]


def test_a_bad_file_refuses_the_start(tmp_path):
    path = tmp_path / "acls"
    path.write_text("ALLOW User:a * READ GROUP LITERAL g\nnonsense\n")
    authorizer = build_authorizer({"authorizer": "file", "authorizer.file": str(path)}, "b:9092")
    assert authorizer is not None

    async def main():
        with pytest.raises(SecurityConfigError, match="line 2"):
            await authorizer.start()
    asyncio.run(main())


def test_the_file_is_reloaded_on_change_and_a_bad_change_keeps_the_acls_in_force(tmp_path, caplog):
    path = tmp_path / "acls"
    path.write_text("ALLOW User:alice * READ GROUP LITERAL g\n")
    authorizer = build_authorizer({"authorizer": "file", "authorizer.file": str(path),
                                   "authorizer.file.reload.ms": "20"}, "b:9092")
    assert authorizer is not None

    async def main():
        await authorizer.start()
        try:
            assert authorizer.allows("User:alice", "h", "READ", "GROUP", "g")
            generation = authorizer.generation
            path.write_text("DENY User:alice * READ GROUP LITERAL g\n")
            os.utime(path, ns=(1, 1))          # a different mtime even on a coarse clock
            await _until(lambda: authorizer.generation > generation, "the changed file is reloaded")
            assert not authorizer.allows("User:alice", "h", "READ", "GROUP", "g")

            source = authorizer.source
            assert isinstance(source, FileAclSource)
            with caplog.at_level(logging.ERROR, logger="kcoord.security.acl"):
                path.write_text("DENY User:alice * READ GROUP LITERAL g\nALLOW User:bob * READ\n")
                await _until(lambda: source.errors == 1, "the bad file is refused")
            assert "line 2" in caplog.text and "expected 7 fields" in caplog.text and "stay in force" in caplog.text
            assert not authorizer.allows("User:alice", "h", "READ", "GROUP", "g"), "the ACLs in force remain"
            assert len(authorizer.acls) == 1
        finally:
            await authorizer.stop()
    asyncio.run(main())


def test_upstream_that_cannot_be_reached_fails_closed_and_logs(caplog):
    port = free_port()     # nothing listens there
    authorizer = build_authorizer({"authorizer": "upstream", "authorizer.refresh.ms": "60000",
                                   "super.users": "User:admin", "allow.everyone.if.no.acl.found": "true"},
                                  f"127.0.0.1:{port}", opener)
    assert authorizer is not None
    source = authorizer.source
    assert isinstance(source, UpstreamAclSource)
    source.request_timeout_s = 2.0

    async def main():
        with caplog.at_level(logging.ERROR, logger="kcoord.security.acl"):
            await authorizer.start()
        try:
            assert source.failures == 1 and source.loads == 0
            assert not authorizer.ready
            assert not authorizer.allows("User:alice", "h", "READ", "GROUP", "g"), "fail closed"
            assert authorizer.allows("User:admin", "h", "READ", "GROUP", "g"), "super users are local settings"
        finally:
            await authorizer.stop()
    asyncio.run(main())
    assert "DescribeAcls failed" in caplog.text and "fail closed" in caplog.text


async def _until(predicate, what: str, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for: {what}")
        await asyncio.sleep(0.01)



class _Link:
    """A stand-in for kcoord's upstream link: it answers DescribeAcls with the answers given."""

    def __init__(self, answers) -> None:
        self.answers = list(answers)
        self.requests = []
        self.closed = False
        self.retired = False
        self.reauthentication_due = False

    async def request(self, request, timeout=10.0):
        self.requests.append(request)
        return self.answers.pop(0)

    def retire(self) -> None:
        self.retired = self.closed = True

    def close(self) -> None:
        self.closed = True


def test_upstream_refusal_is_a_failed_load_and_a_session_near_its_end_gets_a_new_link(caplog):
    from coordinator.security.acl import AclAuthorizer

    acl = [(3, "g", 3, [("User:alice", "*", 3, 3)])]
    links = [_Link([_describe_acls_answer([], 31, "Cluster authorization failed.")]),
             _Link([_describe_acls_answer(acl), _describe_acls_answer(acl)]),
             _Link([_describe_acls_answer([], 31, "Cluster authorization failed.")])]
    opened = []

    async def open_link(addresses):
        opened.append(addresses)
        return links[len(opened) - 1]
    authorizer = AclAuthorizer(ready=False)
    source = UpstreamAclSource(authorizer, [("b", 9092)], open_link)

    async def main():
        with caplog.at_level(logging.ERROR, logger="kcoord.security.acl"):
            assert not await source.refresh()
        assert "needs DESCRIBE on the CLUSTER" in caplog.text and "fail closed" in caplog.text
        assert links[0].closed and not authorizer.ready, "a refusal is never an empty ACL set"
        assert await source.refresh() and authorizer.ready and len(authorizer.acls) == 1
        [request] = links[1].requests
        assert (request.__version__, request.resource_type_filter, request.operation) == (1, 1, 1)
        assert await source.refresh() and len(opened) == 2, "the link is kept between refreshes"
        links[1].reauthentication_due = True        # KIP-368: retired, a fresh link asks next
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="kcoord.security.acl"):
            assert not await source.refresh()
        assert links[1].retired and len(opened) == 3 and opened[2] == (("b", 9092),)
        assert "keeping the 1 ACLs of the last good load" in caplog.text
        assert authorizer.allows("User:alice", "h", "READ", "GROUP", "g"), "the last good load stays"
        await source.stop()
        assert links[2].closed
    asyncio.run(main())

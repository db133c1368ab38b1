"""A request whose keyed array (a ``mapKey`` array of Kafka's schemas) names one key twice is
refused and never forwarded: Kafka 4.4's network thread reads such an array into an
ImplicitLinkedHashMultiCollection whose probing makes N repeats cost N**2, before any
handler runs; 30,000 repeated AlterReplicaLogDirs dirs or AlterConfigs resources from the
structured fuzzer left the broker answering nothing (gateway/keyed_arrays.py)."""
from __future__ import annotations

import sys
from typing import Any

from coordinator.gateway.forwarding import Forwarding
from coordinator.gateway.keyed_arrays import duplicate_key
from coordinator.gateway.routes import build_routes, route_key
from coordinator.protocol.apis import INCREMENTAL_ALTER_CONFIGS, request_class, request_header_version
from coordinator.protocol.codec import encode_body
from coordinator.protocol.framing import RequestHeader, frame

ALTER_REPLICA_LOG_DIRS = 34


def _log_dirs(*dirs: tuple[str, tuple[str, ...]], version: int = 2) -> Any:
    cls = request_class(ALTER_REPLICA_LOG_DIRS, version)
    m = sys.modules[cls.__module__]
    return cls(dirs=tuple(m.AlterReplicaLogDir(path=path, topics=tuple(
        m.AlterReplicaLogDirTopic(name=name, partitions=(0,)) for name in topics)) for path, topics in dirs))


def _configs(*resources: tuple[str, tuple[tuple[str, int], ...]]) -> Any:
    cls = request_class(INCREMENTAL_ALTER_CONFIGS, 1)
    m = sys.modules[cls.__module__]
    return cls(validate_only=False, resources=tuple(m.AlterConfigsResource(
        resource_type=2, resource_name=name, configs=tuple(
            m.AlterableConfig(name=c, config_operation=op, value="1") for c, op in configs))
        for name, configs in resources))


def test_a_repeated_key_is_named_with_its_first_entry():
    repeated = _log_dirs(*[("/d", ("t",))] * 3)
    assert duplicate_key(ALTER_REPLICA_LOG_DIRS, repeated) == "dirs[1] repeats the key of dirs[0] (path='/d')"
    nested = _log_dirs(("/a", ("t",)), ("/b", ("u", "v", "u")))
    assert duplicate_key(ALTER_REPLICA_LOG_DIRS, nested) == \
        "dirs[1].topics[2] repeats the key of dirs[1].topics[0] (name='u')"
    resources = _configs(("t", (("retention.ms", 0),)), ("t", (("cleanup.policy", 0),)))
    assert duplicate_key(INCREMENTAL_ALTER_CONFIGS, resources) == \
        "resources[1] repeats the key of resources[0] (resource_type=2, resource_name='t')"


def test_distinct_keys_pass():
    assert duplicate_key(ALTER_REPLICA_LOG_DIRS, _log_dirs(("/a", ("t", "u")), ("/b", ("t",)))) is None
    # IncrementalAlterConfigs' configs are keyed by name and operation together
    assert duplicate_key(INCREMENTAL_ALTER_CONFIGS, _configs(("t", (("x", 0), ("x", 1))), ("u", ()))) is None


class _Client:
    def __init__(self) -> None:
        self.rejected: list[str] = []

    def reject(self, what: str, route: Any = None, correlation_id: Any = None, api_key: Any = None,
               api_version: Any = None, *, reason: str = "") -> None:
        self.rejected.append(what)


class _Recording(Forwarding):
    __slots__ = ("sent",)

    def forward(self, frame: bytes, pending: Any) -> None:
        self.sent.append(frame)


def _through_forwarding(request: Any) -> tuple[list[str], list[bytes]]:
    route = build_routes({ALTER_REPLICA_LOG_DIRS: (1, 2)}, ())[route_key(ALTER_REPLICA_LOG_DIRS, 2)]
    data = frame(RequestHeader(ALTER_REPLICA_LOG_DIRS, 2, 7, "t").encode(
        request_header_version(ALTER_REPLICA_LOG_DIRS, 2)) + encode_body(request))
    client = _Client()
    forwarding = _Recording(client, None)  # type: ignore[arg-type]
    forwarding.sent = []
    forwarding.checked(data, route, 7)
    return client.rejected, forwarding.sent


def test_the_fuzzers_repeated_dirs_are_refused_and_never_forwarded():
    rejected, sent = _through_forwarding(_log_dirs(*[("/d", ("t",))] * 30_000))
    assert sent == []
    assert rejected == ["alter_replica_log_dirs v2: dirs[1] repeats the key of dirs[0] (path='/d'): Kafka's clients "
                        "never repeat a key of this array"]


def test_distinct_dirs_are_forwarded():
    rejected, sent = _through_forwarding(_log_dirs(("/a", ("t",)), ("/b", ("t",))))
    assert rejected == [] and len(sent) == 1


def test_repeated_config_resources_are_refused_on_the_guarded_path_too():
    """AlterConfigs / IncrementalAlterConfigs are decoded by the guard stage (guarded.py),
    not by the plain forwarding path."""
    from types import SimpleNamespace

    from coordinator.gateway.guarded import GuardStage
    request = _configs(*[("t", (("retention.ms", 0),))] * 1_000)
    data = frame(RequestHeader(INCREMENTAL_ALTER_CONFIGS, 1, 9, "t").encode(
        request_header_version(INCREMENTAL_ALTER_CONFIGS, 1)) + encode_body(request))
    route = build_routes({INCREMENTAL_ALTER_CONFIGS: (0, 1)}, ())[route_key(INCREMENTAL_ALTER_CONFIGS, 1)]
    client = _Client()
    forwarded: list[bytes] = []
    client.forward = lambda frame, pending: forwarded.append(frame)  # type: ignore[attr-defined]
    GuardStage(client, SimpleNamespace(guard=None), 1 << 20).admin(data, route, 9)  # type: ignore[arg-type]
    assert forwarded == []
    assert client.rejected == ["incremental_alter_configs v1: resources[1] repeats the key of resources[0] "
                               "(resource_type=2, resource_name='t'): Kafka's clients never repeat a key of this "
                               "array"]

"""A request whose keyed array (a ``mapKey`` array of Kafka's schemas) names one key twice,
or whose keys' Java hash codes meet in Kafka's table, is refused and never forwarded: Kafka
4.4's network thread reads such an array into an ImplicitLinkedHashMultiCollection whose
probing and growth make N entries of one slot cost N**3/6, before any handler runs; 30,000
repeated AlterReplicaLogDirs dirs or AlterConfigs resources from the structured fuzzer left
the broker answering nothing, 8,000 distinct paths of one hashCode held a network thread
36.5 s (gateway/keyed_arrays.py)."""
from __future__ import annotations

import random
import struct
import sys
import uuid
from typing import Any

from coordinator.gateway import keyed_arrays
from coordinator.gateway.forwarding import Forwarding
from coordinator.gateway.keyed_arrays import KEYED, SIMULATED_FROM, crowded, duplicate_key, entry_hash, java_string_hash
from coordinator.gateway.routes import build_routes, route_key
from coordinator.protocol.apis import INCREMENTAL_ALTER_CONFIGS, request_class, request_header_version
from coordinator.protocol.codec import encode_body
from coordinator.protocol.framing import RequestHeader, frame

ALTER_REPLICA_LOG_DIRS = 34
NEVER = ": Kafka's clients never repeat a key of this array"


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
    assert duplicate_key(ALTER_REPLICA_LOG_DIRS, repeated) == "dirs[1] repeats the key of dirs[0] (path='/d')" + NEVER
    nested = _log_dirs(("/a", ("t",)), ("/b", ("u", "v", "u")))
    assert duplicate_key(ALTER_REPLICA_LOG_DIRS, nested) == \
        "dirs[1].topics[2] repeats the key of dirs[1].topics[0] (name='u')" + NEVER
    resources = _configs(("t", (("retention.ms", 0),)), ("t", (("cleanup.policy", 0),)))
    assert duplicate_key(INCREMENTAL_ALTER_CONFIGS, resources) == \
        "resources[1] repeats the key of resources[0] (resource_type=2, resource_name='t')" + NEVER


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


# --- keys that differ but whose Java hash codes meet in Kafka's table ---------------------

def _one_hash_code(n: int) -> list[str]:
    """n distinct strings of one Java hashCode: "Aa" and "BB" hash alike, so do all strings
    of k such blocks."""
    k = (n - 1).bit_length()
    return ["".join("BB" if i >> b & 1 else "Aa" for b in range(k)) for i in range(n)]


def test_java_string_hash_is_javas():
    # Values of java.lang.String.hashCode, as unsigned 32-bit: "" 0, "hello" 99162322,
    # "Aa" and "BB" 2112, "héllo" (one UTF-16 unit above ASCII) 99190152,
    # "Ünïcødé-topic" -1045880390, and a supplementary character's surrogate pair.
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == java_string_hash(b"hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("héllo") == java_string_hash("héllo".encode()) == _java("héllo")
    assert java_string_hash("𝄞x") == _java("𝄞x")
    assert len({java_string_hash(key) for key in _one_hash_code(1_000)}) == 1


def _java(text: str) -> int:
    """String.hashCode by its definition, s[0]*31**(n-1) + ... + s[n-1] over UTF-16 units."""
    raw = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + int.from_bytes(raw[i:i + 2], "big")) & 0xFFFFFFFF
    return h


def test_distinct_keys_of_one_hash_code_are_refused():
    """Kafka 4.4 spent 36.5 s of a network thread on 8,000 such AlterReplicaLogDirs paths
    (bench/bench_keyed_arrays.py kafka); 1,000 cost it about 0.6 s."""
    crowd = _log_dirs(*[(path, ("t",)) for path in _one_hash_code(1_000)])
    why = duplicate_key(ALTER_REPLICA_LOG_DIRS, crowd)
    assert why is not None and why.startswith("dirs: its keys' Java hash codes meet in Kafka's table")
    assert "the request's 1,000 keys" in why
    rejected, sent = _through_forwarding(crowd)
    assert sent == [] and len(rejected) == 1 and rejected[0].startswith("alter_replica_log_dirs v2: dirs: its keys'")


def test_distinct_hash_codes_of_one_slot_are_refused():
    """Kafka's slot is (hashCode & 0x7fffffff) % (2N + 1): indexes that are multiples of the
    capacity share slot 0 while their hash codes differ (CreateTopics' assignments are keyed
    by partition index, whose hashCode is the index)."""
    n = 1_000
    assert crowded("assignments", [i * (2 * n + 1) for i in range(n)]) is not None
    # the same crowd aimed at the grown table (4N + 3 slots) only costs N**2/2 probes there
    assert crowded("assignments", [i * (4 * n + 3) for i in range(n)]) is None
    big = 100_000
    assert crowded("assignments", [i * (4 * big + 3) for i in range(big)]) is not None
    # a crowd across the table's end (slots 2N-9..2N, then 0..) counts as one run
    assert crowded("assignments", [2 * n - 9 + i * (2 * n + 1) for i in range(n)]) is not None


def test_keys_kafkas_clients_send_pass():
    """Sequential names make runs of consecutive hash codes, indexes one run: the worst
    that Kafka's clients send, all under the bound (keyed_arrays.py says why it is set so)."""
    for n in (256, 1_000, 10_000, 100_000):
        for pattern in ("topic-{}", "t{:05d}", "orders.eu-west-1.v2.{}", "/var/lib/kafka/data-{}"):
            assert crowded("topics", [java_string_hash(pattern.format(i)) for i in range(n)]) is None, (pattern, n)
    assert crowded("assignments", list(range(10_000))) is None        # Kafka's 10,000 partitions per request
    rng = random.Random(7)
    assert crowded("topics", [java_string_hash(f"tenant-{uuid.UUID(int=rng.getrandbits(128))}")
                              for _ in range(100_000)]) is None


def test_small_arrays_are_not_laid_out_but_many_add_up():
    """One array under the bound passes; the same crowd in many inner arrays of one request
    is summed (each dir's topics: 600 names of one hashCode, ~6 * 10**7 steps by the bound
    each), and an array under SIMULATED_FROM entries is not laid out at all."""
    crowd = _one_hash_code(600)
    assert duplicate_key(ALTER_REPLICA_LOG_DIRS, _log_dirs(("/d0", tuple(crowd)))) is None
    many = _log_dirs(*[(f"/d{i}", tuple(crowd)) for i in range(8)])
    why = duplicate_key(ALTER_REPLICA_LOG_DIRS, many)
    assert why is not None and why.startswith("dirs[0].topics: its keys' Java hash codes meet") and "4,800 keys" in why
    small = _log_dirs(*[(f"/d{i}", tuple(_one_hash_code(SIMULATED_FROM - 1))) for i in range(200)])
    assert duplicate_key(ALTER_REPLICA_LOG_DIRS, small) is None


def test_multi_field_keys_hash_as_kafkas_generated_code():
    """IncrementalAlterConfigs' resources are keyed by (resource_type, resource_name): the
    generated hashCode is 31 * type + name.hashCode(), so a type and a name can offset each
    other; configs by (name, config_operation)."""
    m = sys.modules[request_class(INCREMENTAL_ALTER_CONFIGS, 1).__module__]
    entry = m.AlterConfigsResource(resource_type=2, resource_name="Aa", configs=())
    assert entry_hash(entry, ("resource_type", "resource_name")) == (31 * 2 + 2112) & 0xFFFFFFFF
    assert entry_hash(m.AlterableConfig(name="x", config_operation=-1, value=None), ("name", "config_operation")) \
        == (31 * 120 - 1) & 0xFFFFFFFF
    names = _one_hash_code(1_000)
    crowd = _configs(*[(name, ()) for name in names])
    assert duplicate_key(INCREMENTAL_ALTER_CONFIGS, crowd) is not None


def test_share_group_apis_are_never_forwarded():
    """Kafka's share-group and share-state APIs have keyed arrays too; kcoord advertises and
    forwards none of them (protocol/apis.py NOT_THROUGH_GATEWAY), so KEYED needs no entry.
    Were one forwarded, it would need one."""
    from coordinator.protocol.api_versions import advertised_versions
    share = (76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92)
    advertised = advertised_versions({key: (0, 1) for key in share} | {0: (3, 9)}, {})
    assert [key for key in share if key in advertised and key not in KEYED] == []


def test_long_names_hash_as_java_does_and_the_memo_stays_bounded():
    """Names are hashed in chunks (h(a + b) = h(a) * 31**len(b) + h(b)), so the memo of powers
    never grows past one tuple per length up to the chunk, whatever lengths a client sends."""
    def reference(text: str) -> int:
        h = 0
        for unit in struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be")):
            h = (31 * h + unit) & 0xFFFFFFFF
        return h
    for length in (0, 1, 255, 256, 257, 512, 1_000, 32_767):
        text = "".join(chr(97 + (i * 7) % 26) for i in range(length))
        assert java_string_hash(text) == reference(text) == java_string_hash(text.encode())
    assert java_string_hash("é" * 300) == reference("é" * 300)
    assert len(keyed_arrays._REVERSED_POWERS) <= keyed_arrays._CHUNK
    assert max(map(len, keyed_arrays._REVERSED_POWERS.values())) <= keyed_arrays._CHUNK

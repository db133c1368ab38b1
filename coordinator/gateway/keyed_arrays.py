"""Keyed arrays of a forwarded request: one key named twice, or keys whose hash codes would
pile up in Kafka's table, are refused, never forwarded.

Rules:
- Kafka's generated readers parse every array whose schema gives a ``mapKey`` into an
  ``ImplicitLinkedHashMultiCollection``: an open-addressing table with linear probing that
  keeps duplicates, sized 2N+1 for N entries (``calculateCapacity``), an entry's slot being
  ``(hashCode & 0x7fffffff) % capacity`` (``slot``) and its hashCode folding only the key
  fields (``31 * h + field``, MessageDataGenerator ``generateClassHashCode``). Entries whose
  slots meet share one probe run: reading N of them costs N**2/2 probes, and the table's one
  growth (``changeCapacity``, at the N-th entry, to 4N+3) removes them one by one, each
  removal re-seating the rest of the run from its first slot: N**3/6. The broker does this
  in its network thread (``SocketServer`` ``Processor``), before any request handler, quota
  or authorizer. The structured fuzzer's frames that repeat one entry up to 30,000 times
  (AlterReplicaLogDirs ``dirs``, AlterConfigs ``resources``) kept both of Kafka 4.4's
  network threads busy in ``ImplicitLinkedHashCollection.reseat`` for more than 70 s, and
  the broker answered nothing (fuzz/README.md).
- A key named twice: Kafka's clients build these arrays from maps, so they never name a key
  twice; Kafka's handlers refuse duplicates where they look (CreateTopics: "Duplicate topic
  name.", AlterConfigs: a duplicated resource is INVALID_REQUEST). Such a request is refused
  whole (the connection is closed with a log line that names the array and the key:
  Kafka's own answer would come only after the parse that is the harm) and never forwarded.
- Distinct keys cost the same when their hash codes meet: "Aa" and "BB" have one Java
  hashCode, so the 2**k strings of k such blocks do too, and the table compares entries by
  reference only (``ImplicitLinkedHashMultiCollection.addInternal``), never by key.
  Measured on Kafka 4.4 (bench/bench_keyed_arrays.py kafka; docs/measurements/
  hostile-input.md): an AlterReplicaLogDirs of 4,000 distinct paths of one hashCode (108 kB)
  held a network thread 4.7 s, 8,000 (232 kB) 36.5 s, and a client served by that thread
  waited as long; 110,064 such paths fit the 4 MiB kcoord forwards (~26 hours by the cube),
  while 110,064 paths of distinct hash codes were answered in 0.17 s. So an array of at
  least SIMULATED_FROM entries is laid out here as Kafka lays it (hash codes computed as Java
  computes them, slots as ``slot`` computes them) and its cost counted: probes while
  filling, and for the growth an upper bound of the removals' re-seating (``_layout``).
  Above ``max(COST_PER_ENTRY * N, COST_FLOOR)`` steps it is refused as a repeated key is.
  Kafka's clients do not get there: keys they send have spread hash codes, and the worst
  their keys make, sequential names ("topic-0".."topic-99999": runs of consecutive hash
  codes) or partition indexes 0..9,999 in one run, cost under the bound (the unit tests lay
  them out). The steps are summed over a request's keyed arrays (a request of many arrays,
  each under the bound, would add up), and arrays under SIMULATED_FROM entries are not laid
  out (see there).
- ``KEYED`` lists the keyed arrays (Kafka 4.4's request schemas, ``mapKey`` fields) of the
  requests kcoord forwards. CreateTopics' and CreatePartitions' ``topics`` are left out:
  their duplicates are answered as Kafka answers them and never forwarded
  (admin_limits.py). Produce's ``topic_data`` (keyed by name up to v12, by topic id
  from v13) is checked in the walk the gateway already makes of it (produce_check.py), with
  ``crowded`` below. Share-group and share-state APIs (76-79, 83-87, 90-92) have keyed
  arrays too but are never forwarded (protocol/apis.py NOT_THROUGH_GATEWAY).
"""
from __future__ import annotations

import itertools
import operator
import struct
import uuid
from typing import Any

# A keyed array: (field name, key field names, keyed arrays inside each entry).
Keyed = tuple[str, tuple[str, ...], tuple["Keyed", ...]]

_CONFIGS = ("configs", ("name",), ())
KEYED: dict[int, tuple[Keyed, ...]] = {
    19: (("topics", (), (("assignments", ("partition_index",), ()), _CONFIGS)),),     # CreateTopics
    23: (("topics", ("topic",), ()),),                                               # OffsetForLeaderEpoch
    24: (("v3_and_below_topics", ("name",), ()),                                      # AddPartitionsToTxn
         ("transactions", ("transactional_id",), (("topics", ("name",), ()),))),
    33: (("resources", ("resource_type", "resource_name"), (_CONFIGS,)),),          # AlterConfigs
    34: (("dirs", ("path",), (("topics", ("name",), ()),)),),                        # AlterReplicaLogDirs
    35: (("topics", ("topic",), ()),),                                               # DescribeLogDirs
    43: (("topic_partitions", ("topic",), ()),),                                     # ElectLeaders
    44: (("resources", ("resource_type", "resource_name"),                           # IncrementalAlterConfigs
          (("configs", ("name", "config_operation"), ()),)),),
    57: (("feature_updates", ("feature",), ()),),                                    # UpdateFeatures
    61: (("topics", ("name",), ()),),                                                # DescribeProducers
}


def duplicate_key(api_key: int, request: Any) -> str | None:
    """The first keyed array of ``request`` that names one key twice, as
    'dirs[3] repeats the key of dirs[0] (path='/x')', or, when the keys of all its keyed
    arrays would crowd Kafka's tables past the bound (see the rules), the costliest array,
    or None."""
    spent = _Spent()
    for keyed in KEYED.get(api_key, ()):
        found = _duplicate(request, keyed, "", spent)
        if found is not None:
            return found
    return spent.verdict()


class _Spent:
    """The steps Kafka's parse of one request's keyed arrays would take, summed over the
    arrays laid out: many arrays just under the bound each would add up otherwise."""
    __slots__ = ("steps", "entries", "worst", "worst_steps")

    def __init__(self) -> None:
        self.steps = self.entries = self.worst_steps = 0
        self.worst = ""

    def add(self, path: str, hashes: list[int]) -> None:
        steps = layout_steps(hashes)
        self.steps += steps
        self.entries += len(hashes)
        if steps > self.worst_steps:
            self.worst, self.worst_steps = path, steps

    def verdict(self) -> str | None:
        budget = max(COST_PER_ENTRY * self.entries, COST_FLOOR)
        if self.steps <= budget:
            return None
        return (f"{self.worst}: its keys' Java hash codes meet in Kafka's table as a repeated key's would "
                f"(~{self.steps:,} probe steps to parse the request's {self.entries:,} keys, over {budget:,})")


def _duplicate(parent: Any, keyed: Keyed, prefix: str, spent: _Spent) -> str | None:
    name, key_fields, inner = keyed
    entries = getattr(parent, name, None)
    if not entries:                         # absent in this version, null or empty
        return None
    path = f"{prefix}{name}"
    if key_fields:
        seen: dict[tuple, int] = {}
        for i, entry in enumerate(entries):
            key = tuple(getattr(entry, f) for f in key_fields)
            first = seen.setdefault(key, i)
            if first != i:
                shown = ", ".join(f"{f}={_shown(v)}" for f, v in zip(key_fields, key))
                return (f"{path}[{i}] repeats the key of {path}[{first}] ({shown}): Kafka's clients never repeat "
                        f"a key of this array")
        if len(entries) >= SIMULATED_FROM:
            spent.add(path, [entry_hash(entry, key_fields) for entry in entries])
    for i, entry in enumerate(entries):
        for sub in inner:
            found = _duplicate(entry, sub, f"{prefix}{name}[{i}].", spent)
            if found is not None:
                return found
    return None


# Arrays shorter than this are not laid out: one costs Kafka at most 32**3/6 steps, and a
# 4 MiB request of such crowds (10-character keys, 2**5 of one hashCode) ~5 * 10**7 steps.
SIMULATED_FROM = 32
# Kafka 4.4 took about 0.44 ns a step (bench/bench_keyed_arrays.py kafka: 8,000 keys of one
# hashCode, 8,000**3/6 re-seat steps, 36.5 s), and the bound counts about 3 times the steps
# Kafka takes for one crowd (N**3/2 for N**3/6): the floor is some 40 ms of one network
# thread once Kafka's code is compiled. It is above Kafka's own worst for a request its
# clients send: CreateTopics' assignments of the 10,000 partitions Kafka's controller takes
# in one request, indexes 0..9,999 in one run, ~2 * 10,000**2 steps by the bound.
COST_FLOOR = 1 << 28
COST_PER_ENTRY = 1_024


def crowded(path: str, hashes: list[int]) -> str | None:
    """Why the N entries of one keyed array (Produce's topic_data), of these Java hash codes
    in request order, would cost Kafka's parse more than ``max(COST_PER_ENTRY * N,
    COST_FLOOR)`` steps (the rules), or None."""
    spent = _Spent()
    spent.add(path, hashes)
    return spent.verdict()


def layout_steps(hashes: list[int]) -> int:
    """The steps of Kafka's parse of one keyed array of these hash codes, by an upper bound
    (``_layout``)."""
    n = len(hashes)
    capacity = 2 * n + 1                     # calculateCapacity(N): the reader presizes
    # add() grows the table when (size + 1) >= capacity / 2: before the N-th entry, so
    # N - 1 entries are laid, removed one by one, laid again in 4N + 3 slots, then the last.
    moved, runs = _layout(hashes[:n - 1], capacity)
    return (n - 1 + moved + sum(length * (2 * length + d) for length, d in runs)
            + n + _layout(hashes, 2 * capacity + 1)[0])


def _layout(hashes: list[int], capacity: int) -> tuple[int, list[tuple[int, int]]]:
    """Where ``addInternal``'s linear probing seats these hash codes in ``capacity`` slots:
    (probes past the home slots, summed; each run of occupied slots as (entries, probes past
    their home slots)). The slots taken and the probes do not depend on the order of
    insertion, so the home slots are sorted and each entry seated at max(home, previous + 1),
    in C (a running max of home - index). An upper bound of ``changeCapacity``'s removals
    follows: each removal scans the rest of its run and re-seats every entry after it, each
    re-seat scanning from that entry's home slot, so a run of L entries whose probes sum to
    D costs at most L * (2L + D)."""
    n = len(hashes)
    if n == 0:
        return 0, []
    homes = sorted([(h & 0x7FFFFFFF) % capacity for h in hashes])
    seats = [q + i for i, q in enumerate(itertools.accumulate(map(operator.sub, homes, range(n)), max))]
    past = list(itertools.accumulate(map(operator.sub, seats, homes), initial=0))
    bounds = [0, *[i for i in range(1, n) if seats[i] != seats[i - 1] + 1], n]
    runs = [(stop - start, past[stop] - past[start]) for start, stop in zip(bounds, bounds[1:])]
    if seats[-1] >= capacity and len(runs) > 1:     # the last run wraps round to the first
        (first, first_past), (last, last_past) = runs[0], runs.pop()
        runs[0] = (first + last, first_past + last_past + first * last)
    return past[n], runs


_MASK = 0xFFFFFFFF
_CHUNK = 256                       # names are hashed in chunks of this many code units
_CHUNK_STEP = pow(31, _CHUNK, 1 << 32)
_REVERSED_POWERS: dict[int, tuple[int, ...]] = {}     # length <= _CHUNK -> (31**(length-1), ..., 31, 1) mod 2**32


def java_string_hash(text: str | bytes) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units) of ``text`` (or of its UTF-8
    bytes, as a Produce's walk reads a name), as an unsigned 32-bit value. Longer names go in
    chunks: h(a + b) = h(a) * 31**len(b) + h(b), so the memo of powers stays at most _CHUNK
    tuples of at most _CHUNK numbers, whatever names a client sends."""
    if text.isascii():                   # one UTF-16 code unit per byte
        units: Any = text if isinstance(text, bytes) else text.encode()
    else:
        raw = (text.decode("utf-8", "replace") if isinstance(text, bytes) else text).encode("utf-16-be")
        units = struct.unpack(f">{len(raw) // 2}H", raw)
    count = len(units)
    if count <= _CHUNK:
        return sum(map(operator.mul, units, _REVERSED_POWERS.get(count) or _reversed_powers(count))) & _MASK
    first = count % _CHUNK or _CHUNK
    h = sum(map(operator.mul, units[:first], _REVERSED_POWERS.get(first) or _reversed_powers(first)))
    powers = _REVERSED_POWERS.get(_CHUNK) or _reversed_powers(_CHUNK)
    for i in range(first, count, _CHUNK):
        h = (h * _CHUNK_STEP + sum(map(operator.mul, units[i:i + _CHUNK], powers))) & _MASK
    return h & _MASK


def _reversed_powers(count: int) -> tuple[int, ...]:
    powers = [1]
    for _ in range(count - 1):
        powers.append(powers[-1] * 31 & _MASK)
    _REVERSED_POWERS[count] = found = tuple(reversed(powers))
    return found


def java_uuid_hash(raw: bytes) -> int:
    """Java's ``UUID.hashCode`` of a UUID's 16 bytes: (int) (hilo >> 32) ^ (int) hilo, where
    hilo = mostSigBits ^ leastSigBits (any id whose halves are equal hashes to 0)."""
    hilo = int.from_bytes(raw[:8], "big") ^ int.from_bytes(raw[8:16], "big")
    return ((hilo >> 32) ^ hilo) & _MASK


def _field_hash(value: Any) -> int:
    """A key field's term in the generated ``hashCode`` (MessageDataGenerator
    ``generateFieldHashCode``)."""
    if value is None:
        return 0
    if isinstance(value, str):
        return java_string_hash(value)
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(1 << 31) <= value < (1 << 31):
            return value & _MASK                       # int8/int16/int32: the value
        return ((value >> 32) ^ value) & _MASK         # int64: (int) (v >> 32) ^ (int) v
    if isinstance(value, uuid.UUID):
        return java_uuid_hash(value.bytes)
    return hash(value) & _MASK


def entry_hash(entry: Any, key_fields: tuple[str, ...]) -> int:
    h = 0
    for f in key_fields:
        h = (31 * h + _field_hash(getattr(entry, f))) & _MASK
    return h


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else f"{text[:117]}..."

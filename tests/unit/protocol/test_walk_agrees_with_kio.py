"""The bounded walk (coordinator/protocol/checked.py) and kio's native reader agree on
where every field ends, on valid and on hostile bodies.

The walk exists because kio's reader allocates whatever a length claims; it only protects
if kio then reads the same fields from the same bytes. Wherever the two read a value
differently (a struct marker kio takes as "present" where the walk took "null", a tagged
field whose size the walk skips while kio reads on after its value), kio reads lengths
nobody checked, and one of them asked for 94 GB. So, for every request and response class
kcoord decodes (kio's, the generated ones, the private and connect ones), the consumer
protocol's data classes it reads from JoinGroup and SyncGroup, and the shapes of
kio_shapes.py that no message has yet, each body shape once:

- two valid samples, one with every tagged field present (fuzz.samples);
- each of their bytes (up to POSITIONS of them, chosen at random) replaced by each of
  fuzz.mutations.BYTE_VALUES; every known tagged field padded inside its size
  (fuzz.mutations.padded_tagged_fields); and the frame mutations of fuzz.mutations.MUTATIONS
  that reach a body.

Property: when the walk accepts a body, kio either ends exactly where the walk ends, or
refuses a *value* the walk does not judge (a boolean other than 0/1, invalid UTF-8, a
negative timestamp, a null in a tagged field kio reads as non-nullable, an unknown tag:
then the body without its unknown tags, as codec.py reads it, must end where the walk
ended). kio running out of bytes, meeting a negative length or a varint too long after the
walk accepted means they read different fields, and so does a crash.

kio runs in one child process with RLIMIT_AS at CHILD_MEMORY, so an input that
makes kio allocate past it aborts the child, not pytest: the failure names the class, the
mutation and the bytes, and the child starts again after that input.

Bound: 391 body shapes, 105,676 walks and 81,260 kio reads in one child: 5.8 s on the
development machine at load average 4 (2.6 s of it the child, 1.5 s importing kio's
schemas), 8-10 s through pytest (not yet measured on CI).
KCOORD_WALK_DIFF_FULL=1 takes every byte position and four samples (23-53 s here);
KCOORD_WALK_DIFF_SEED=<text> draws other samples.
"""
from __future__ import annotations

import dataclasses
import importlib
import os
import pickle
import random
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
if __name__ == "__main__":           # run as the child: see _child()
    sys.path.insert(0, str(REPO))

CHILD_MEMORY = 2 << 30
FULL = bool(os.environ.get("KCOORD_WALK_DIFF_FULL"))
SEED = os.environ.get("KCOORD_WALK_DIFF_SEED", "")
POSITIONS = 10**9 if FULL else 24
SAMPLES = 4 if FULL else 2
RESTARTS = 20                         # a child that aborts is started again, this often at most
FRAME_MUTATIONS = ("truncate", "length_bomb", "bad_varint", "null_field", "invalid_utf8", "bit_flip",
                   "random_body", "unknown_tag")

# What kio may refuse in bytes the walk accepted: a value's content, which the walk does not
# judge (fields end where they end either way). Anything else (BufferUnderflow,
# NegativeByteLength, "negative array length", "Varint is too long") says kio read
# another field than the walk did.
VALUE_REFUSALS = (
    ("ValueError", "Invalid boolean value"),          # kio: 0 and 1 only (Kafka: any nonzero)
    ("InvalidUnicode", ""),
    ("UnexpectedNull", ""),                           # a tagged field kio reads as non-nullable
    ("OutOfBoundValue", "Cannot parse negative timestamp"),
    ("ValueError", "timedelta milliseconds overflow"),   # a duration beyond Python's
    ("ValueError", "is out of range"),                # a timestamp beyond Python's datetime
    ("ValueError", "is not a valid ErrorCode"),       # an error code kio does not know
    ("KeyError", "Unknown tagged field tag"),         # then read without it, as codec.py does
)


# --- the classes -------------------------------------------------------------------------

def _classes(group: str) -> list[type]:
    from kio.schema.index import api_key_map

    from coordinator.protocol.apis import GENERATED_APIS, api_schemas
    from coordinator.protocol.private_apis import ALL_PRIVATE_KEYS
    if group == "kcoord":
        out: list[type] = []
        for key in sorted(set(GENERATED_APIS) | ALL_PRIVATE_KEYS):
            s = api_schemas(key)
            assert s is not None
            out += [s.requests[v] for v in range(s.min_version, s.max_version + 1)]
            out += [s.responses[v] for v in range(s.min_version, s.max_version + 1)]
        for name in ("subscription", "assignment"):
            for version in range(4):
                module = importlib.import_module(f"kio.schema.consumer_protocol_{name}.v{version}.data")
                out.append(getattr(module, f"ConsumerProtocol{name.title()}"))
        from tests.unit.protocol.kio_shapes import TaggedNullableStruct
        return [*out, TaggedNullableStruct]
    out = []
    for key in sorted(api_key_map):
        s = api_schemas(key)
        if s is None:
            continue
        table = s.requests if group == "requests" else s.responses
        out += [table[v] for v in range(s.min_version, s.max_version + 1)]
    return out


def _shape(cls: type, memo: dict[type, object]) -> object:
    """What the walk and kio read of ``cls``: two classes of one shape read the same bytes
    the same way, so one of them is enough."""
    from coordinator.protocol.codec import _readers
    from records.kio_fields import schema_fields
    if cls not in memo:
        memo[cls] = None                  # a recursive struct (none so far) stops here
        memo[cls] = (bool(cls.__flexible__), cls if cls in _readers else None, tuple(
            (f.kind, f.kafka_type, f.nullable, f.tag, None if f.struct is None else _shape(f.struct, memo))
            for f in schema_fields(cls)))
    return memo[cls]


def _distinct(classes: list[type]) -> list[type]:
    memo: dict[type, object] = {}
    seen: dict[object, type] = {}
    for cls in classes:
        seen.setdefault(_shape(cls, memo), cls)
    return list(seen.values())


# --- the bodies --------------------------------------------------------------------------

class _EveryTag(random.Random):
    """fuzz.samples.sample skips a tagged field on a draw below 0.7 and nulls an optional
    one below 0.25: every draw here is in [0.7, 1), so every tagged field is there."""

    def random(self) -> float:
        return 0.7 + 0.3 * super().random()


def _mutants(cls: type, seed: str) -> Iterator[tuple[str, bytes]]:
    from coordinator.protocol.codec import encode_body
    from fuzz.mutations import MUTATIONS, TAG_PADDINGS, byte_replacements, padded_tagged_fields
    from fuzz.samples import sample
    rng = random.Random(seed)
    for i in range(SAMPLES):
        body = encode_body(sample(cls, _EveryTag(f"{seed}/{i}") if i % 2 else rng))
        yield f"sample {i}", body
        positions = range(len(body))
        if len(body) > POSITIONS:
            positions = sorted(rng.sample(positions, POSITIONS))
        for pos, value, mutant in byte_replacements(body, positions):
            yield f"sample {i}, byte {pos} := 0x{value:02x}", mutant
        for padding in TAG_PADDINGS if cls.__flexible__ else ():
            padded = padded_tagged_fields(cls, body, padding)
            if padded is not None:
                yield f"sample {i}, known tags padded with {padding.hex()}", padded
        frame = len(body).to_bytes(4, "big") + bytes(8) + body      # a header of 8 zero bytes
        for name in FRAME_MUTATIONS:
            yield f"sample {i}, {name}", MUTATIONS[name](frame, 12, rng)[12:]


def _walked(classes: list[type], seed: str) -> tuple[list[tuple[str, str, str, bytes, int]], int]:
    """(the bodies the walk accepts, as (module, class name, mutation, bytes, walk end)),
    how many bodies were walked."""
    from coordinator.protocol.checked import Malformed, check_body
    accepted = []
    walked = 0
    for cls in classes:
        for label, body in _mutants(cls, f"{seed}/{cls.__module__}"):
            walked += 1
            try:
                end = check_body(cls, body, 0)
            except Malformed:
                continue
            accepted.append((cls.__module__, cls.__qualname__, label, body, end))
    return accepted, walked


# --- kio, in a child ---------------------------------------------------------------------

def run_kio(items: list[tuple[str, str, str, bytes, int]]) -> list[str]:
    """kio's reading of each (module, class, mutation, body, walk end) in a child process
    with RLIMIT_AS at CHILD_MEMORY: the disagreements, each naming its input."""
    failures: list[str] = []
    start = 0
    for _ in range(RESTARTS):
        proc = subprocess.run([sys.executable, __file__, str(start)], input=pickle.dumps(items),
                              capture_output=True, cwd=REPO, timeout=300)
        last = start - 1
        for line in proc.stdout.decode().splitlines():
            if line.startswith("!"):
                index, _, what = line[1:].partition(" ")
                failures.append(_named(items[int(index)], what))
            elif line:
                last = int(line)
        if proc.returncode == 0:
            return failures
        if last < start:
            raise AssertionError(f"the kio child failed before its first input:\n{proc.stderr.decode()[-3000:]}")
        stderr = proc.stderr.decode(errors="replace").strip()
        why = next((line for line in stderr.splitlines() if "memory allocation" in line), stderr[-300:])
        failures.append(_named(items[last], f"kio's process died (exit {proc.returncode}): {why}"))
        start = last + 1
    failures.append(f"... stopped after {RESTARTS} dead children")
    return failures


def _named(item: tuple[str, str, str, bytes, int], what: str) -> str:
    module, name, label, body, end = item
    return f"{module}.{name} ({label}; walk ends at {end} of {len(body)}): {what}\n    body: {body.hex()}"


def _child() -> None:
    """Reads the pickled inputs on stdin; for each from argv[1] on, writes its index before
    reading it (so a crash names it) and '!index what' for a disagreement."""
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY, CHILD_MEMORY))
    from coordinator.protocol.codec import reader_for
    items = pickle.loads(sys.stdin.buffer.read())
    classes: dict[tuple[str, str], type] = {}
    for index in range(int(sys.argv[1]), len(items)):
        module, name, _, body, end = items[index]
        cls = classes.get((module, name))
        if cls is None:
            cls = classes[module, name] = getattr(importlib.import_module(module), name)
        os.write(1, b"%d\n" % index)
        what = _judge(reader_for(cls), cls, body, end)
        if what is not None:
            os.write(1, f"!{index} {what!r}\n".encode())   # repr: kio's text may hold a newline


def _judge(read, cls: type, body: bytes, end: int) -> str | None:
    try:
        _, used = read(body, 0)
    except Exception as e:  # noqa: BLE001 (every refusal is judged)
        refusal = _value_refusal(e)
        if refusal is not None:
            return refusal
    else:
        return None if used == end else f"kio ends at {used}, the walk at {end}"
    if not cls.__flexible__:
        return None
    from coordinator.protocol.unknown_tags import strip_unknown_tags
    stripped = strip_unknown_tags(cls, body, 0)
    if stripped is None:
        return None
    copy, copy_end = stripped
    if copy_end != end:
        return f"the body without unknown tags ends at {copy_end}, the walk at {end}"
    try:
        _, used = read(copy, 0)
    except Exception as e:  # noqa: BLE001
        return _value_refusal(e, unknown_tags=False)
    return None if used == len(copy) else f"without its unknown tags, kio ends at {used} of {len(copy)}"


def _value_refusal(error: Exception, unknown_tags: bool = True) -> str | None:
    """None when kio refused a value (VALUE_REFUSALS); what it refused otherwise."""
    kind, text = type(error).__name__, str(error)
    for allowed, words in VALUE_REFUSALS:
        if kind == allowed and words in text and (unknown_tags or kind != "KeyError"):
            return None
    return f"kio raised {kind}: {text[:200]} where the walk read on"


# --- the tests ---------------------------------------------------------------------------

GROUPS = ("requests", "responses", "kcoord")


@pytest.fixture(scope="module")
def verdicts() -> dict[str, tuple[int, int, int, list[str]]]:
    """group -> (body shapes, bodies walked, bodies accepted, disagreements): every group's
    accepted bodies read by kio in one child (its imports are paid once)."""
    walked: dict[str, tuple[int, int, int]] = {}
    items: list[tuple[str, str, str, bytes, int]] = []
    for group in GROUPS:
        classes = _distinct(_classes(group))
        accepted, count = _walked(classes, f"{SEED}{group}")
        walked[group] = (len(classes), count, len(accepted))
        items += [(module, name, f"{group}: {label}", body, end) for module, name, label, body, end in accepted]
    failures = run_kio(items)
    return {group: (*walked[group], [f for f in failures if f"({group}: " in f]) for group in GROUPS}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("group", GROUPS)
def test_when_the_walk_accepts_a_body_kio_reads_the_same_fields(group, verdicts):
    shapes, walked, accepted, failures = verdicts[group]
    assert walked > 100 * shapes and accepted > 10 * shapes        # the mutants are there
    assert not failures, f"{len(failures)} disagreements of {accepted} bodies:\n" + "\n".join(failures[:15])


def test_an_input_that_aborts_kio_is_named_and_the_rest_still_read():
    """The child's memory limit turns an allocation bomb into a named failure: the
    34-byte connect response whose -127 marker made kio ask for 94 GB, fed to kio as if the
    walk had accepted it, between two valid bodies that still get read."""
    from coordinator.protocol.codec import encode_body
    from coordinator.protocol.connect_messages import RESPONSES
    from fuzz.samples import sample
    cls = RESPONSES[min(RESPONSES)]
    bomb = bytes.fromhex("ffffff00" "0000" "00" "00" "00000000" "04040000" "81" "0000ffffffff2b00ffffffff3fffff")
    valid = encode_body(sample(cls, random.Random(1)))
    wrong_end = encode_body(dataclasses.replace(sample(cls, random.Random(2)), assignment=None))
    item = (cls.__module__, cls.__qualname__)
    failures = run_kio([(*item, "valid", valid, len(valid)), (*item, "the marker bomb", bomb, len(bomb)),
                        (*item, "an end the walk did not give", wrong_end, len(wrong_end) - 1)])
    assert len(failures) == 2, failures
    assert "the marker bomb" in failures[0] and bomb.hex() in failures[0]
    assert "died" in failures[0] and "memory allocation of" in failures[0]
    assert "kio ends at" in failures[1] and "an end the walk did not give" in failures[1]


if __name__ == "__main__":
    _child()

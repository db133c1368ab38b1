"""In-process coverage-guided fuzzing of the upstream link's answer path with atheris.

    .venv/bin/python fuzz/atheris_upstream_answers.py -runs=1000000 -rss_limit_mb=2048 \
        -malloc_limit_mb=1024 -artifact_prefix=/tmp/ [-max_len=4096] [CORPUS_DIR]

kcoord treats the upstream as hostile too (a misbehaving Kafka-compatible broker). This
drives the real link, coordinator/upstream/client.py's `UpstreamClient`, on an in-memory
transport (no network): its `data_received`, frame cutting, `_complete` (the match by
correlation id), `_decode` (the Produce v9 fixed-offset read of protocol/produce_answer.py,
else the response header and the bounded walk before kio's reader), the per-link timer and
the link's failure. Each input is a script of steps, read with a FuzzedDataProvider:
- send a request of one of the API versions the link serves (`KINDS`: the fenced state
  log's, the lean writer's Produce v9, the cluster view's, SASL's), with a timeout of 10 s,
  none, or 0 (its deadline already past: the timer fails it at the next loop turn);
- queue an answer: a valid response of a kind (mostly the asked request's, sometimes
  another's) built from kio's classes, hand-made Produce v9 answers (many partitions,
  base offsets going backwards, error codes, record errors, an error message, partitions
  not asked for), the header's tagged fields, then a fixed-width field set to an extreme,
  bytes replaced, cut or inserted (a huge varint), its size told or lied about, for a
  correlation id asked, answered already, not yet asked, or never (0, -1, 2**31-1, ...);
- queue raw fuzzed bytes; deliver the queue in chunks cut anywhere; turn the loop (timers,
  closes); a caller cancelling its wait; kcoord retiring or closing the link.
At the end the upstream closes the connection.

Invariants (a violation raises AssertionError, a crash):
- nothing escapes `data_received` or `send` but `send`'s UpstreamError on a closed link;
- an answer's outcome is that of the first complete frame with its correlation id cut
  after it was sent (the harness cuts the stream itself): the value `_decode` reads from
  it, or an UpstreamError; a frame for an id not pending completes nothing, so a request
  whose id no frame carried is never answered;
- while the link is open every such answer was delivered, and the link buffers exactly the
  bytes of the incomplete frame left (memory bounded by what was sent, never by a size);
- a Produce v9 answer read at fixed offsets is the generic decode's value, and the
  fixed-offset read accepts nothing the generic decode refuses;
- a future fails only with UpstreamError, and once the upstream closes, every request is
  completed exactly once (one done callback each), nothing is pending, no timer is armed.
An allocation past -malloc_limit_mb (kio allocates whatever a length claims) is a crash too.
"""
from __future__ import annotations

import asyncio
import datetime
import random
import struct
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kio.schema.errors import ErrorCode  # noqa: E402
from kio.schema.produce.v9.response import (  # noqa: E402
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kio.schema.types import TopicName  # noqa: E402
from kio.static.primitive import i32, i32Timedelta, i64  # noqa: E402

from fuzz.instrumented import atheris, instrumented  # noqa: E402

# Without atheris run_provider is also driven by tests/unit/upstream/test_fuzz_upstream_answers.py.
with instrumented():
    from coordinator.protocol.apis import request_class, response_class, response_header_version  # noqa: E402
    from coordinator.protocol.codec import decode_body, encode_body  # noqa: E402
    from coordinator.protocol.produce_answer import read_produce_v9  # noqa: E402
    from coordinator.upstream.client import MAX_RESPONSE_BYTES, UpstreamClient, UpstreamError, _decode  # noqa: E402

from fuzz.samples import sample  # noqa: E402
from fuzz.structured import _FIXED, _get, _leaves, _marker_value, _set  # noqa: E402

# (api key, version) of every request kcoord sends on an UpstreamClient: the fenced state
# log's (runtime/fenced_links.py VERSIONS; Produce v12 for transactions v2,
# txn_offsets_log.py), the cluster view's (ApiVersions v4 then v3 or v0, Metadata up to v12,
# CreateTopics up to v7), SASL's (security/sasl_client.py), the ACL probe's and sources'.
KINDS = ((0, 9), (0, 12), (1, 12), (2, 7), (3, 9), (3, 10), (3, 12), (10, 4), (22, 4), (24, 3), (26, 3),
         (19, 5), (19, 7), (32, 4), (18, 0), (18, 3), (18, 4), (17, 1), (36, 0), (36, 1), (36, 2), (15, 5),
         (29, 1))
PRODUCE_V9 = 0          # KINDS' index of the lean writer's request: picked half the time
MAX_STEPS = 48
EXTREMES = {">b": (-1, 0, 127, -128), ">h": (-1, 0, 1, 6, 7, 47, 90, 32767, -32768),
            ">H": (0, 65535), ">i": (-1, 0, 1, 2**31 - 1, -(2**31), 50_000_000),
            ">q": (-1, 0, 1, 2**63 - 1, -(2**63), 2**31), ">d": (0.0, -1.0, float("nan"))}
BYTES = (0x00, 0x01, 0x7F, 0x80, 0x81, 0xFE, 0xFF)
VARINTS = (b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x07", b"\x80\x80\x80\x80\x80", b"\xff\xff\xff\x7f", b"\x80")
HEADER_TAGS = (b"\x00", b"\x01\x00\x02hi", b"\x02\x00\x00\x01\x00", b"\x01\x05\x00", b"\x7f", b"\x80")


class Template:
    """A response body of one kind, encoded once, with the offset of each fixed-width field."""

    def __init__(self, body: bytes, slots: tuple[tuple[int, str], ...]) -> None:
        self.body, self.slots = body, slots


def _template(value: Any) -> Template:
    body = encode_body(value)
    slots = []
    for path, kafka_type in _leaves(value):
        current = _get(value, path)
        if kafka_type == "error_code":     # kio takes only known codes: found where two differ
            one, two = (encode_body(_set(value, path, ErrorCode(code))) for code in (6, 7))
            differ = [i for i, (a, b) in enumerate(zip(one, two, strict=False)) if a != b]
            if len(one) == len(two) == len(body) and len(differ) == 1:
                slots.append((differ[0] - 1, ">h"))
            continue
        if kafka_type not in _FIXED or current is None or isinstance(current, tuple):
            continue
        fmt, raw = _FIXED[kafka_type]
        try:
            marked = encode_body(_set(value, path, _marker_value(kafka_type, raw)))
        except (ValueError, TypeError, OverflowError, struct.error):
            continue
        needle = struct.pack(fmt, raw)
        if len(marked) == len(body) and marked.count(needle) == 1:
            slots.append((marked.index(needle), fmt))
    return Template(body, tuple(slots))


def _produce_v9(offsets: list[list[int]], errors: tuple[int, ...] = (0,), record_errors: int = 0,
                message: str | None = None, name: str = "__kcoord_cg") -> ProduceResponse:
    return ProduceResponse(responses=tuple(
        TopicProduceResponse(name=TopicName(f"{name}{t or ''}"), partition_responses=tuple(
            PartitionProduceResponse(
                index=i32(p), error_code=ErrorCode(errors[p % len(errors)]), base_offset=i64(base),
                log_append_time=None, log_start_offset=i64(0),
                record_errors=tuple(BatchIndexAndErrorMessage(batch_index=i32(r), batch_index_error_message=None)
                                    for r in range(record_errors)),
                error_message=message) for p, base in enumerate(bases)))
        for t, bases in enumerate(offsets)), throttle_time=i32Timedelta.parse(datetime.timedelta(0)))


def _templates() -> list[list[Template]]:
    """Per kind: kio samples of its response; for Produce v9 also the lean writer's answers."""
    rng = random.Random(5)
    out = []
    for key, version in KINDS:
        values = [sample(response_class(key, version), rng) for _ in range(3)]
        if (key, version) == (0, 9):
            values += [_produce_v9([[100]]), _produce_v9([[7, 3, 0, 2**40]]),          # backwards
                       _produce_v9([[5], [6, 6]], errors=(0, 6, 7)),                    # not asked for
                       _produce_v9([[-1, -1]], errors=(47, 90)), _produce_v9([[0]], record_errors=2),
                       _produce_v9([[1]], errors=(10,), message="too large"), _produce_v9([]),
                       _produce_v9([list(range(40))])]
        if key == 18 and version > 0:     # UNSUPPORTED_VERSION in the v0 format (KIP-511)
            values.append(sample(response_class(18, 0), rng))
            values[-1] = type(values[-1])(error_code=ErrorCode(35), api_keys=values[-1].api_keys)
        templates = []
        for value in values:
            try:
                templates.append(_template(value))
            except (ValueError, TypeError, OverflowError, struct.error):
                continue     # a sampled value kio does not encode
        out.append(templates)
    return out


TEMPLATES = _templates()
REQUESTS = tuple(sample(request_class(key, version), random.Random(key * 100 + version)) for key, version in KINDS)


def _signed32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _body(fdp: Any, kind: int) -> bytes:
    templates = TEMPLATES[kind]
    template = templates[fdp.ConsumeIntInRange(0, len(templates) - 1)]
    body = bytearray(template.body)
    for _ in range(fdp.ConsumeIntInRange(0, 3) if template.slots else 0):
        at, fmt = template.slots[fdp.ConsumeIntInRange(0, len(template.slots) - 1)]
        choices = EXTREMES[fmt]
        pick = fdp.ConsumeIntInRange(0, len(choices))
        if pick < len(choices):
            struct.pack_into(fmt, body, at, choices[pick])
        else:
            raw = fdp.ConsumeBytes(struct.calcsize(fmt))
            body[at:at + len(raw)] = raw
    return bytes(body)


def _mutated(fdp: Any, payload: bytearray) -> None:
    """One byte-level change to a frame's payload (correlation id onwards)."""
    how = fdp.ConsumeIntInRange(0, 5)
    pos = fdp.ConsumeIntInRange(0, len(payload))
    if how == 0 and payload:
        pick = fdp.ConsumeIntInRange(0, len(BYTES))
        payload[min(pos, len(payload) - 1)] = BYTES[pick] if pick < len(BYTES) else fdp.ConsumeIntInRange(0, 255)
    elif how == 1:
        del payload[pos:]                           # truncation at any byte
    elif how == 2:
        payload[pos:pos] = VARINTS[fdp.ConsumeIntInRange(0, len(VARINTS) - 1)]
    elif how == 3:
        payload[pos:pos] = fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 16))
    elif how == 4:
        payload += fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 16))   # bytes after the body
    else:
        payload[pos:pos + 1] = b""


class _Transport(asyncio.Transport):
    """What the link sees of a socket: writes are counted, close() stops reads at once and
    calls connection_lost at the next loop turn, as asyncio's selector transports do."""

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol: UpstreamClient) -> None:
        super().__init__()
        self.loop, self.protocol, self.closing, self.written = loop, protocol, False, 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            self.loop.call_soon(self.protocol.connection_lost, None)

    def lose(self) -> None:
        """The upstream ends the connection."""
        if not self.closing:
            self.closing = True
            self.loop.call_soon(self.protocol.connection_lost, ConnectionResetError("reset by fuzz"))

    def is_closing(self) -> bool:
        return self.closing


class Asked:
    """One request the script sent: its correlation id (the link counts from 1), kind, future."""

    def __init__(self, correlation_id: int, kind: int, timeout: float | None, future: asyncio.Future[Any]) -> None:
        self.correlation_id, self.kind, self.timeout, self.future = correlation_id, kind, timeout, future
        self.answer: bytes | None = None      # the first frame for it cut after it was sent
        self.cancelled = False
        self.callbacks = 0
        future.add_done_callback(self._done)

    def _done(self, _: asyncio.Future[Any]) -> None:
        self.callbacks += 1


class Script:
    """The stream the upstream sends, cut into frames as the link must cut it."""

    def __init__(self) -> None:
        self.queue = bytearray()          # queued, not yet delivered
        self.held = bytearray()           # delivered, not yet a complete frame
        self.fed = 0
        self.broken = False               # a frame size or frame the link must fail on
        self.asked: list[Asked] = []
        self.by_id: dict[int, Asked] = {}

    def cut(self, chunk: bytes) -> None:
        """The frames ``chunk`` completes, given to the requests they answer."""
        if self.broken:
            return
        self.held += chunk
        pos = 0
        while len(self.held) - pos >= 4:
            (size,) = struct.unpack_from(">i", self.held, pos)
            if size < 0 or size > MAX_RESPONSE_BYTES or (size < 4 and len(self.held) - pos >= 4 + size):
                self.broken = True
                break
            if len(self.held) - pos < 4 + size:
                break
            frame = bytes(self.held[pos:pos + 4 + size])
            pos += 4 + size
            asked = self.by_id.get(struct.unpack_from(">i", frame, 4)[0])
            if asked is not None and asked.answer is None:
                asked.answer = frame
        del self.held[:pos]


async def run_script(fdp: Any) -> Script:
    loop = asyncio.get_running_loop()
    link = UpstreamClient(("upstream.fuzz", 9092), "kcoord-fuzz")
    transport = _Transport(loop, link)
    link.connection_made(transport)
    script = Script()
    for _ in range(fdp.ConsumeIntInRange(1, MAX_STEPS)):
        if fdp.remaining_bytes() == 0:
            break
        step = fdp.ConsumeIntInRange(0, 31)
        if step <= 8:
            _send(fdp, link, script)
        elif step <= 20:
            _queue_answer(fdp, script)
        elif step <= 26:
            _deliver(fdp, link, transport, script)
        elif step <= 28:
            await asyncio.sleep(0)        # timers (a 0 s deadline) and closes run
        elif step == 29:
            script.queue += fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 64))
        elif step == 30 and script.asked:
            asked = script.asked[fdp.ConsumeIntInRange(0, len(script.asked) - 1)]
            asked.cancelled = asked.cancelled or asked.future.cancel()     # the caller stops waiting
        elif step == 31:
            link.retire() if fdp.ConsumeBool() else link.close()
        _check_open(link, transport, script)
    _deliver_all(link, transport, script)
    _check_open(link, transport, script)
    transport.lose()
    for _ in range(3):                    # connection_lost, then the futures' callbacks
        await asyncio.sleep(0)
    _check_failed(link, script)
    return script


def _send(fdp: Any, link: UpstreamClient, script: Script) -> None:
    kind = PRODUCE_V9 if fdp.ConsumeBool() else fdp.ConsumeIntInRange(0, len(KINDS) - 1)
    timeout = (10.0, None, 0.0)[fdp.ConsumeIntInRange(0, 2)]
    closed = link.closed
    try:
        future = link.send(REQUESTS[kind], timeout)
    except UpstreamError:
        if not closed:
            raise AssertionError("send refused on an open link") from None
        return
    if closed:
        raise AssertionError("send accepted on a closed link")
    asked = Asked(len(script.asked) + 1, kind, timeout, future)
    if link._pending.get(asked.correlation_id, (None,))[0] is not future:
        raise AssertionError(f"request {asked.correlation_id} is not pending under its id")
    script.asked.append(asked)
    script.by_id[asked.correlation_id] = asked


def _queue_answer(fdp: Any, script: Script) -> None:
    sent = len(script.asked)
    who = fdp.ConsumeIntInRange(0, 15)
    if who <= 8 and sent:
        # mostly the oldest unanswered (answers come in order), else any: a duplicate
        waiting = [a for a in script.asked if a.answer is None]
        asked = waiting[0] if waiting and who <= 5 else script.asked[fdp.ConsumeIntInRange(0, sent - 1)]
        correlation_id, kind = asked.correlation_id, asked.kind
    else:
        correlation_id = (sent + 1, 0, -1, 2**31 - 1, -(2**31), _signed32(fdp.ConsumeInt(4)), sent + 2)[who % 7]
        kind = PRODUCE_V9
    if fdp.ConsumeIntInRange(0, 7) == 0:
        kind = fdp.ConsumeIntInRange(0, len(KINDS) - 1)      # an answer of another API or version
    header = struct.pack(">i", correlation_id)
    if response_header_version(*KINDS[kind]) >= 1:
        pick = fdp.ConsumeIntInRange(0, 4 * len(HEADER_TAGS) - 1)
        header += HEADER_TAGS[pick] if pick < len(HEADER_TAGS) else b"\x00"
    payload = bytearray(header + _body(fdp, kind))
    for _ in range(max(0, fdp.ConsumeIntInRange(-4, 3))):
        _mutated(fdp, payload)
    size = len(payload)
    lie = fdp.ConsumeIntInRange(0, 63)
    if lie >= 58:        # a size that lies: the link must fail, or wait for bytes never meant
        size = (-1, 0, 3, MAX_RESPONSE_BYTES + 1, size + 1, size - 1)[lie - 58]
    script.queue += struct.pack(">i", size) + payload


def _feed(link: UpstreamClient, transport: _Transport, script: Script, chunk: bytes) -> None:
    if not chunk or transport.closing:
        return        # a closed transport reads no more
    script.fed += len(chunk)
    script.cut(chunk)
    try:
        link.data_received(chunk)
    except Exception as e:
        raise AssertionError(f"data_received raised {e!r} on {chunk!r}") from e


def _deliver(fdp: Any, link: UpstreamClient, transport: _Transport, script: Script) -> None:
    """Some of the queue, in chunks cut anywhere."""
    take = fdp.ConsumeIntInRange(0, len(script.queue))
    data, script.queue[:] = bytes(script.queue[:take]), script.queue[take:]
    while data:
        cut = fdp.ConsumeIntInRange(1, len(data))
        _feed(link, transport, script, data[:cut])
        data = data[cut:]


def _deliver_all(link: UpstreamClient, transport: _Transport, script: Script) -> None:
    data = bytes(script.queue)
    script.queue.clear()
    _feed(link, transport, script, data)


def _outcome(frame: bytes, kind: int) -> tuple[bool, Any]:
    """(True, value) when `_decode` reads ``frame`` as ``kind``'s answer, (False, error) when not."""
    try:
        return True, _decode(frame, *KINDS[kind])
    except Exception as e:  # noqa: BLE001 - the link turns every one into UpstreamError
        return False, e


def _check_future(asked: Asked, open_link: bool) -> None:
    future = asked.future
    if future.cancelled():
        if not asked.cancelled:
            raise AssertionError(f"request {asked.correlation_id} cancelled by the link")
        return
    if not future.done():
        if open_link and asked.answer is not None:
            raise AssertionError(f"request {asked.correlation_id} was answered ({asked.answer!r}) "
                                 "on an open link, but its future is not done")
        return
    error = future.exception()
    if error is None:
        if asked.answer is None:
            raise AssertionError(f"request {asked.correlation_id} completed by no frame of its id: "
                                 f"{future.result()!r}")
        ok, expected = _outcome(asked.answer, asked.kind)
        if not ok or future.result() != expected:
            raise AssertionError(f"request {asked.correlation_id}'s answer is not its frame's "
                                 f"{asked.answer!r}: {future.result()!r} != {expected!r}")
        if asked.kind == PRODUCE_V9:
            _same_as_generic(asked.answer)
        return
    if not isinstance(error, UpstreamError):
        raise AssertionError(f"request {asked.correlation_id} failed with {error!r}") from error
    if open_link and asked.answer is not None and _outcome(asked.answer, asked.kind)[0] and \
            "timed out" not in str(error):
        raise AssertionError(f"request {asked.correlation_id} failed ({error}) on an open link "
                             f"though its frame decodes: {asked.answer!r}")


def _same_as_generic(frame: bytes) -> None:
    """The fixed-offset read of a Produce v9 answer (past a header without tagged fields) is
    the generic decode's value, and it accepts nothing the generic decode refuses."""
    fixed = read_produce_v9(frame, 9) if len(frame) > 9 and frame[8] == 0 else None
    if fixed is None:
        return
    try:
        generic = decode_body(response_class(*KINDS[PRODUCE_V9]), frame, 9)
    except Exception as e:
        raise AssertionError(f"the fixed-offset read accepts {frame!r}, the generic decode refuses it: "
                             f"{e!r}") from e
    if fixed != generic:
        raise AssertionError(f"the fixed-offset read of {frame!r} is {fixed!r}, the generic decode's {generic!r}")


def _check_open(link: UpstreamClient, transport: _Transport, script: Script) -> None:
    open_link = not transport.closing and not script.broken and link._lost is None
    if open_link and bytes(link._buf) != bytes(script.held):
        raise AssertionError(f"the link holds {len(link._buf)} bytes, the incomplete frame "
                             f"is {len(script.held)}")
    if len(link._buf) > script.fed or len(link._pending) > len(script.asked):
        raise AssertionError("the link holds more than it was given")
    for asked in script.asked:
        _check_future(asked, open_link)


def _check_failed(link: UpstreamClient, script: Script) -> None:
    if link._pending or link._timer is not None or not link.closed:
        raise AssertionError(f"after the upstream closed: pending {sorted(link._pending)}, "
                             f"timer {link._timer}, closed {link.closed}")
    for asked in script.asked:
        if not asked.future.done() or asked.callbacks != 1:
            raise AssertionError(f"request {asked.correlation_id} completed {asked.callbacks} times "
                                 f"(done: {asked.future.done()})")
        _check_future(asked, False)


class RandomProvider:
    """FuzzedDataProvider's methods this harness uses, drawn from a seeded random.Random with
    a budget of draws (tests/unit/upstream/test_fuzz_upstream_answers.py drives scripts with it)."""

    def __init__(self, seed: int | str, budget: int = 400) -> None:
        self.rng, self.budget = random.Random(seed), budget

    def remaining_bytes(self) -> int:
        return max(self.budget, 0)

    def _draw(self) -> None:
        self.budget -= 1

    def ConsumeIntInRange(self, low: int, high: int) -> int:  # noqa: N802 (atheris' names)
        self._draw()
        return self.rng.randint(low, high)

    def ConsumeInt(self, size: int) -> int:  # noqa: N802
        self._draw()
        return self.rng.randrange(-(1 << (8 * size - 1)), 1 << (8 * size - 1))

    def ConsumeBool(self) -> bool:  # noqa: N802
        self._draw()
        return self.rng.random() < 0.5

    def ConsumeBytes(self, count: int) -> bytes:  # noqa: N802
        self._draw()
        return self.rng.randbytes(count)


_LOOP: asyncio.AbstractEventLoop | None = None
_ERRORS: list[dict[str, Any]] = []


def run_provider(provider: Any) -> Script:
    """One script through a fresh link on the module's event loop. An exception in a callback
    the loop runs (connection_lost, the link's timer) is a crash too: the loop would only log it."""
    global _LOOP
    if _LOOP is None:
        _LOOP = asyncio.new_event_loop()
        _LOOP.set_exception_handler(lambda _, context: _ERRORS.append(context))
    _ERRORS.clear()
    script = _LOOP.run_until_complete(run_script(provider))
    # Not another input's futures: one that crashed leaves errors never retrieved, reported
    # whenever the garbage collector frees them.
    ours = {id(asked.future) for asked in script.asked}
    errors = [c for c in _ERRORS if "future" not in c or id(c["future"]) in ours]
    _ERRORS.clear()
    if errors:
        context = errors[0]
        raise AssertionError(f"a loop callback raised: {context.get('message')}") from context.get("exception")
    return script


def TestOneInput(data: bytes) -> None:  # noqa: N802 (atheris' name)
    run_provider(atheris.FuzzedDataProvider(data))


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()

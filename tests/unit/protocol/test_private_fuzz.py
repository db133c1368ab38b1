"""A short deterministic fuzz of the private messages (fuzz/atheris_private.py's target):
mutated valid bodies decode or raise BodyError, never anything else."""
from __future__ import annotations

import random

from coordinator.protocol.codec import encode_body
from fuzz.atheris_private import MESSAGES, decode_one

from .test_private_apis import SAMPLES


def _mutate(body: bytes, rng: random.Random) -> bytes:
    b = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(4)
        pos = rng.randrange(len(b) + 1)
        if op == 0 and b:                  # flip a byte
            b[min(pos, len(b) - 1)] = rng.randrange(256)
        elif op == 1:                      # a huge varint length or count
            b[pos:pos] = rng.choice([b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x07", b"\x80\x80\x80\x80\x80"])
        elif op == 2:                      # truncate
            del b[pos:]
        else:                              # insert junk
            b[pos:pos] = rng.randbytes(rng.randint(1, 8))
    return bytes(b)


def test_mutated_bodies_decode_or_are_refused():
    rng = random.Random(17)
    decoded = refused = 0
    for _ in range(4000):
        sample = rng.choice(SAMPLES)
        index = MESSAGES.index(type(sample))
        data = bytes([index]) + _mutate(encode_body(sample), rng)
        if decode_one(data) is None:
            refused += 1
        else:
            decoded += 1
    assert refused > 1000 and decoded > 10   # both paths were exercised


def test_valid_bodies_decode():
    for sample in SAMPLES:
        assert decode_one(bytes([MESSAGES.index(type(sample))]) + encode_body(sample)) == sample

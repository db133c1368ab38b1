"""Random *valid* kio messages, built from kio's schema classes (structured fuzzing).

Values are small (short strings, few elements) so that encoded messages look like what
clients send; mutations (fuzz.mutations) then make them hostile. Deterministic for a
given `random.Random`.
"""
from __future__ import annotations

import datetime
import random
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from records.kio_fields import PRIMITIVE, PRIMITIVE_ARRAY, STRUCT, SchemaField, schema_fields

_WORDS = ("g", "group-1", "topic", "t-0", "member", "uniform", "range", "consumer", "rack-a", "", "ünï", "x" * 40)


def _primitive(kafka_type: str, rng: random.Random) -> Any:
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type in ("int8",):
        return rng.randint(-2, 5)
    if kafka_type == "error_code":
        return ErrorCode(rng.choice((0, 0, 1, 16, -1)))
    if kafka_type == "int16":
        return rng.choice((0, 0, 1, 16, -1))
    if kafka_type == "uint16":
        return rng.randint(0, 2**16 - 1)
    if kafka_type in ("int32",):
        return rng.choice((0, 1, 2, -1, 5000, 2**31 - 1, rng.randint(-3, 100)))
    if kafka_type == "int64":
        return rng.choice((0, -1, 42, 2**40, rng.randint(-3, 10**6)))
    if kafka_type == "float64":
        return rng.random()
    if kafka_type == "uuid":
        return uuid.UUID(int=rng.getrandbits(128)) if rng.random() < 0.8 else None
    if kafka_type == "timedelta_i32" or kafka_type == "timedelta_i64":
        return datetime.timedelta(milliseconds=rng.choice((0, 100, 5000, 45000)))
    if kafka_type == "datetime_i64":
        return datetime.datetime.fromtimestamp(rng.randint(0, 2**31) , tz=datetime.UTC)
    if kafka_type == "string":
        return rng.choice(_WORDS)
    if kafka_type in ("bytes", "records"):
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 12)))
    raise ValueError(f"no sample for kafka_type {kafka_type}")


def _value(field: SchemaField, rng: random.Random, depth: int) -> Any:
    optional = field.nullable and field.tag is None
    if optional and rng.random() < 0.25:
        return None
    if field.kind == PRIMITIVE:
        value = _primitive(field.kafka_type, rng)
        if value is None and not optional and field.kafka_type == "uuid":
            return uuid.UUID(int=0)
        return value
    if field.kind == PRIMITIVE_ARRAY:
        out = []
        for _ in range(rng.randint(0, 3)):
            v = _primitive(field.kafka_type, rng)
            out.append(uuid.UUID(int=0) if v is None else v)
        return tuple(out)
    if field.kind == STRUCT:
        return sample(field.struct, rng, depth + 1)
    if depth > 3:
        return ()
    return tuple(sample(field.struct, rng, depth + 1) for _ in range(rng.randint(0, 3)))


def sample(cls: type, rng: random.Random, depth: int = 0) -> Any:
    """A random valid instance of the kio class ``cls``; tagged fields mostly defaulted."""
    values = {}
    for field in schema_fields(cls):
        if field.tag is not None and field.has_default and rng.random() < 0.7:
            continue
        values[field.name] = _value(field, rng, depth)
    return cls(**values)

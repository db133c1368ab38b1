"""Generated classes held against kio's, field by field.

Two classes are the same when their class variables, their fields' names, `kafka_type`
and `tag` metadata, type hints (nested classes compared recursively by name and shape)
and defaults are equal. Docstrings are not compared.
"""
from __future__ import annotations

import dataclasses
import importlib
import sys
import types
import typing
from collections.abc import Iterator

from coordinator.protocol.messagegen.render import api_module, render
from coordinator.protocol.messagegen.schema import Message

CLASSVARS = ("__type__", "__version__", "__flexible__", "__api_key__", "__header_schema__")


def load(source: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses resolves a class's module through sys.modules
    exec(compile(source, name, "exec"), module.__dict__)  # noqa: S102 - our own generated code
    return module


def kio_class(message: Message, version: int) -> type | None:
    try:
        module = importlib.import_module(f"kio.schema.{api_module(message)}.v{version}.{message.type}")
    except ModuleNotFoundError:
        return None
    return getattr(module, message.name, None)


def generated_class(message: Message, version: int) -> type:
    return getattr(load(render(message, version), f"gen_{message.name}_v{version}"), message.name)


def _hint_shape(hint: object) -> object:
    if dataclasses.is_dataclass(hint):
        return ("class", hint.__name__)  # type: ignore[union-attr]
    origin = typing.get_origin(hint)
    if origin is None:
        return hint
    return (origin, tuple(_hint_shape(a) for a in typing.get_args(hint)))


def _default_shape(value: object) -> object:
    if dataclasses.is_dataclass(value):
        return ("instance", type(value).__name__)
    return value


def differences(ours: type, kio: type, path: str = "") -> Iterator[str]:
    where = path or ours.__name__
    for name in CLASSVARS:
        a, b = getattr(ours, name, None), getattr(kio, name, None)
        if a != b and not (name == "__header_schema__" and getattr(a, "__module__", 1) == getattr(b, "__module__", 2)):
            yield f"{where}.{name}: {a!r} != {b!r}"
    hints_a, hints_b = typing.get_type_hints(ours), typing.get_type_hints(kio)
    fields_a = {f.name: f for f in dataclasses.fields(ours)}
    fields_b = {f.name: f for f in dataclasses.fields(kio)}
    if list(fields_a) != list(fields_b):
        yield f"{where}: fields {list(fields_a)} != {list(fields_b)}"
    for name in fields_a.keys() & fields_b.keys():
        fa, fb = fields_a[name], fields_b[name]
        if dict(fa.metadata) != dict(fb.metadata):
            yield f"{where}.{name}: metadata {dict(fa.metadata)} != {dict(fb.metadata)}"
        if _hint_shape(hints_a[name]) != _hint_shape(hints_b[name]):
            yield f"{where}.{name}: type {hints_a[name]} != {hints_b[name]}"
        da = fa.default if fa.default is not dataclasses.MISSING else None
        db = fb.default if fb.default is not dataclasses.MISSING else None
        if (fa.default is dataclasses.MISSING) != (fb.default is dataclasses.MISSING) or \
                _default_shape(da) != _default_shape(db):
            yield f"{where}.{name}: default {fa.default!r} != {fb.default!r}"
        for ha, hb in zip(_nested(hints_a[name]), _nested(hints_b[name]), strict=False):
            yield from differences(ha, hb, f"{where}.{name}")


def _nested(hint: object) -> Iterator[type]:
    if dataclasses.is_dataclass(hint):
        yield hint  # type: ignore[misc]
        return
    for arg in typing.get_args(hint):
        yield from _nested(arg)

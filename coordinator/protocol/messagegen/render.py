"""One version of a Kafka message definition, written as a kio-shaped Python module.

kio's conventions, which the generated code must keep so that kio's native reader and
writer take it (and so that handlers see the same names whichever side a class comes from):
- names in snake case; a name that shadows a builtin gets a trailing `_`;
- `ErrorCode` / `PartitionErrorCode` fields are `error_code` (kio's `ErrorCode`);
- every `...Ms` field is a time: the five timestamps below are `datetime_i64` (`TZAware`,
  optional when the default is -1), every other one a `timedelta_i32/i64`; the `Ms` goes;
- five entity types are typed (`GroupId`, `TopicName`, `BrokerId`, `ProducerId`,
  `TransactionalId`); any other entity type is its primitive;
- strings, bytes, records, arrays and structs are `| None` where the version is nullable; a
  tagged, ignorable field without a default is `| None` with default None;
- primitive arrays default to `()`; a tagged struct defaults to an empty instance;
- a `__consumer_offsets` record's key and value (`coordinator-key`/`coordinator-value`) are
  kio "data" entities, one module per version (`<record>/v<N>/key.py`, `value.py`).
The request header is v2 for flexible versions, v1 otherwise (v0 for ControlledShutdown
v0); the response header v1 for flexible versions, v0 otherwise and always for ApiVersions,
as Kafka's ApiMessageTypeGenerator decides.
"""
from __future__ import annotations

import builtins
import re
from collections.abc import Iterator

from coordinator.protocol.messagegen.schema import PRIMITIVES, Field, Message

DATETIMES = frozenset({"IssueTimestampMs", "ExpiryTimestampMs", "MaxTimestampMs",
                       "TransactionStartTimeMs", "LogAppendTimeMs"})
ERROR_CODES = frozenset({"ErrorCode", "PartitionErrorCode"})
ENTITY_TYPES = {"groupId": "GroupId", "topicName": "TopicName", "brokerId": "BrokerId",
                "producerId": "ProducerId", "transactionalId": "TransactionalId"}
INTS = {"int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint16": "u16",
        "uint32": "u32", "uint64": "u64"}
HINTS = {**INTS, "float64": "f64", "string": "str", "bytes": "bytes", "bool": "bool",
         "uuid": "uuid.UUID | None", "records": "Records", "error_code": "ErrorCode",
         "timedelta_i32": "i32Timedelta", "timedelta_i64": "i64Timedelta",
         "datetime_i64": "TZAware"}
NULLABLE_KINDS = frozenset({"string", "bytes", "records"})
_BOUNDARY = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[0-9A-Z])(?=[A-Z][a-z])")
_BUILTINS = frozenset(dir(builtins))


def snake(name: str) -> str:
    """`ThrottleTimeMs` -> `throttle_time_ms`, `ISRReplicas` -> `isr_replicas`."""
    parts = _BOUNDARY.sub("_", name).lower()
    return parts + "_" if parts in _BUILTINS else parts


RECORD_KINDS = {"coordinator-key": "key", "coordinator-value": "value"}


def api_module(message: Message) -> str:
    """`DeleteGroupsResponse` -> `delete_groups`, kio's package name for the API;
    `StreamsGroupMetadataKey` -> `streams_group_metadata` for a `__consumer_offsets` record."""
    if message.type in RECORD_KINDS:
        return snake(message.name).removesuffix("_key").removesuffix("_value")
    return snake(message.name).removesuffix("_request").removesuffix("_response")


def module_kind(message: Message) -> str:
    """The module's file name: `request`, `response`, or `key`/`value` for a record."""
    return RECORD_KINDS.get(message.type, message.type)


def kafka_kind(f: Field) -> str:
    """The `kafka_type` metadata kio expects for a primitive field."""
    base = f.item_type
    if f.name in ERROR_CODES and base == "int16":
        return "error_code"
    if f.name.endswith("Ms") and base in ("int32", "int64"):
        if f.name in DATETIMES:
            return "datetime_i64"
        return "timedelta_i32" if base == "int32" else "timedelta_i64"
    return base


def field_name(f: Field) -> str:
    name = f.name[:-2] if kafka_kind(f) in ("datetime_i64", "timedelta_i32",
                                           "timedelta_i64") else f.name
    return snake(name)


class Module:
    """The source of one `<api>/v<N>/<kind>.py`, collected class by class."""

    def __init__(self, message: Message, version: int) -> None:
        self.message, self.version = message, version
        self.imports: dict[str, set[str]] = {}  # module -> names ("" for `import module`)
        for module, name in (("dataclasses", "dataclass"), ("dataclasses", "field"), ("typing", "ClassVar"),
                             ("kio.static.constants", "EntityType"), ("kio.static.primitive", "i16")):
            self.need(module, name)
        self.classes: list[str] = []
        self.seen: set[str] = set()
        self.all_defaulted: dict[str, bool] = {}  # struct name -> can be built empty

    # -- classes -------------------------------------------------------------------------
    def render(self) -> str:
        m = self.message
        self._struct(m.name, m.fields, top=True)
        head = ("# ruff: noqa: E501\n"
                f'"""Generated from ``{m.source}`` in Kafka\'s jar by coordinator.protocol.messagegen."""\n')
        return head + "\n" + self._import_block() + "\n\n\n" + "\n\n".join(self.classes)

    def need(self, module: str, name: str = "") -> None:
        self.imports.setdefault(module, set()).add(name)

    def _import_block(self) -> str:
        """isort's layout, as ruff checks it: stdlib, then kio; `import x` first; names in order."""
        sections = []
        for third_party in (False, True):
            modules = sorted(m for m in self.imports if m.startswith("kio") == third_party)
            lines = [f"import {m}" for m in modules if "" in self.imports[m]]
            lines += [f"from {m} import {', '.join(sorted(self.imports[m] - {''}, key=_name_order))}"
                      for m in modules if self.imports[m] - {""}]
            sections.append("\n".join(lines))
        return "\n\n".join(s for s in sections if s)

    def _struct(self, name: str, fields: tuple[Field, ...], top: bool = False) -> None:
        if name in self.seen:
            return
        self.seen.add(name)
        lines = [self._classvars(top)]
        docs = []
        for f in fields:
            if f.present(self.version):
                lines.append(self._field(f))
                docs.append(f'    """{_doc(f.about)}"""' if f.about else "")
        self.all_defaulted[name] = all("default=" in line or line.endswith(" = None")
                                       for line in lines[1:])
        lines[1:] = [line + ("\n" + doc if doc else "") for line, doc in zip(lines[1:], docs)]
        self.classes.append("@dataclass(frozen=True, slots=True, kw_only=True)\n"
                            f"class {name}:\n" + "\n".join(lines) + "\n")

    def _classvars(self, top: bool) -> str:
        m, v = self.message, self.version
        # A record's key and value are kio "data" entities: no API key, no header.
        kind = ("data" if m.type in RECORD_KINDS else m.type) if top else "nested"
        out = [f"    __type__: ClassVar = EntityType.{kind}",
               f"    __version__: ClassVar[i16] = i16({v})",
               f"    __flexible__: ClassVar[bool] = {m.is_flexible(v)}"]
        if m.api_key is not None and m.type in ("request", "response"):  # nested classes too
            header = self._header()
            out.append(f"    __api_key__: ClassVar[i16] = i16({m.api_key})")
            out.append(f"    __header_schema__: ClassVar[type[{header}]] = {header}")
        return "\n".join(out)

    def _header(self) -> str:
        m, flexible = self.message, self.message.is_flexible(self.version)
        if m.type == "request":
            hv = 0 if (m.api_key == 7 and self.version == 0) else (2 if flexible else 1)
            self.need(f"kio.schema.request_header.v{hv}.header", "RequestHeader")
            return "RequestHeader"
        hv = 1 if flexible and m.api_key != 18 else 0
        self.need(f"kio.schema.response_header.v{hv}.header", "ResponseHeader")
        return "ResponseHeader"

    # -- fields --------------------------------------------------------------------------
    def _field(self, f: Field) -> str:
        if f.item_type in PRIMITIVES:
            return self._primitive(f)
        return self._struct_field(f)

    def _struct_field(self, f: Field) -> str:
        name = f.item_type
        fields = f.fields if f.fields is not None else self.message.common[name]
        self._struct(name, fields)
        v, tag = self.version, f.tag_at(self.version)
        hint = f"tuple[{name}, ...]" if f.is_array else name
        nullable = f.nullable_at(v) or (not f.is_array and f.default == "null")
        if nullable:
            hint += " | None"
        meta: dict[str, object] = {} if tag is None else {"tag": tag}
        if tag is not None:
            if nullable or f.is_array or self.all_defaulted[name]:
                default = "None" if nullable else ("()" if f.is_array else f"{name}()")
                return f"    {snake(f.name)}: {hint} = field(metadata={_meta(meta)}, default={default})"
            return f"    {snake(f.name)}: {hint} = field(metadata={_meta(meta)})"
        if nullable and not f.is_array:
            return f"    {snake(f.name)}: {hint} = None"
        return f"    {snake(f.name)}: {hint}"

    def _primitive(self, f: Field) -> str:
        v, kind, tag = self.version, kafka_kind(f), f.tag_at(self.version)
        hint = self._hint(f, kind)
        if f.is_array:
            hint = f"tuple[{hint}, ...]"
        optional = (
            (f.nullable_at(v) and (f.is_array or kind in NULLABLE_KINDS))
            or (tag is not None and f.ignorable and f.default is None
                and (f.is_array or kind in NULLABLE_KINDS | {"uuid"}))
            or (kind == "datetime_i64" and str(f.default) == "-1"))
        if optional and kind != "uuid" or (optional and f.is_array):
            hint += " | None"
        meta: dict[str, object] = {"kafka_type": kind}
        if tag is not None:
            meta["tag"] = tag
        default = self._default(f, kind, optional, tag)
        tail = "" if default is None else f", default={default}"
        return f"    {field_name(f)}: {hint} = field(metadata={_meta(meta)}{tail})"

    def _hint(self, f: Field, kind: str) -> str:
        if f.entity_type in ENTITY_TYPES and kind in ("string", "int32", "int64"):
            name = ENTITY_TYPES[f.entity_type]
            self.need("kio.schema.types", name)
            return name
        hint = HINTS[kind]
        if kind == "uuid":
            self.need("uuid")
        elif kind == "error_code":
            self.need("kio.schema.errors", "ErrorCode")
        elif kind not in ("string", "bytes", "bool"):
            self.need("kio.static.primitive", hint)
        return hint

    def _default(self, f: Field, kind: str, optional: bool, tag: int | None) -> str | None:
        raw = f.default
        if f.is_array:
            return "None" if optional and (raw == "null" or tag is not None) else "()"
        if raw is None and tag is not None and not optional and kind in INTS:
            raw = 0  # Kafka's implicit default for a tagged number
        if raw is None:
            return "None" if optional and tag is not None else None
        if raw == "null" or (kind == "datetime_i64" and str(raw) == "-1"):
            return "None"
        if kind in INTS or kind == "error_code":
            wrap = "ErrorCode" if kind == "error_code" else self._hint(f, kind)
            return f"{wrap}({_number(raw)})"
        if kind in ("timedelta_i32", "timedelta_i64"):
            self.need("datetime")
            return f"{HINTS[kind]}.parse(datetime.timedelta(milliseconds={_number(raw)}))"
        if kind == "bool":
            return str(str(raw).lower() == "true")
        if kind == "string":
            return repr(raw)
        if kind == "float64":
            return f"f64({float(raw)!r})"
        return repr(raw)


def _number(raw: str | int | float | bool) -> int:
    return int(raw, 0) if isinstance(raw, str) else int(raw)


def _name_order(name: str) -> tuple:
    """isort's order-by-type: CONSTANTS, Classes, then the rest; digits compared as numbers."""
    rank = 0 if name.isupper() and len(name) > 1 else 1 if name[0].isupper() else 2
    return rank, [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", name)]


def _meta(meta: dict[str, object]) -> str:
    return "{" + ", ".join(f'"{k}": {v!r}'.replace("'", '"') for k, v in meta.items()) + "}"


def _doc(about: str) -> str:
    return about.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def render(message: Message, version: int) -> str:
    return Module(message, version).render()


def modules(message: Message) -> Iterator[tuple[int, str]]:
    for version in message.versions():
        yield version, render(message, version)

"""Envelope (API 58, KIP-590) as kcoord instances use it between each other: a request one
instance received from a client, carried to the instance that owns the groups it names, with
the client's principal and address (docs/user/cluster.md, "Requests for another instance's
groups"). Kafka's brokers forward to the controller the same way.

Rules of this module (the wire only; who may send an Envelope is service/envelope.py's):
- ``RequestData`` is the inner request's header and body, unframed; ``RequestPrincipal`` is
  Kafka's `DefaultKafkaPrincipalBuilder.serialize`: an int16 version (0) then
  `DefaultPrincipalData` v0 (type, name, token-authenticated, tagged fields);
  ``ClientHostAddress`` is the client's IPv4 (4 bytes) or IPv6 (16 bytes) address. The
  response's ``ResponseData`` is the inner response's header and body, unframed.
- Everything in an Envelope is hostile until read here, every length bounded by the bytes
  that hold it (the bounded codec, protocol/checked.py). A bad part is an `EnvelopeError`
  with the code Kafka's `EnvelopeUtils` answers: PRINCIPAL_DESERIALIZATION_FAILURE for the
  principal, INVALID_REQUEST for the address or an API not eligible for forwarding,
  UNSUPPORTED_VERSION for an inner header or body that does not parse.
- Only the per-group config APIs travel between instances (`FORWARDABLE`), and only their
  GROUP resources: anything else in an Envelope is INVALID_REQUEST.
"""
from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from typing import Any

from kio.schema.default_principal_data.v0 import DefaultPrincipalData
from kio.schema.envelope.v0.request import EnvelopeRequest
from kio.schema.envelope.v0.response import EnvelopeResponse
from kio.schema.errors import ErrorCode

from .apis import request_class, request_header_version, response_class, response_header_version
from .codec import BodyError, decode_body, encode_body
from .framing import HeaderError, RequestHeader, decode_request_header, decode_response_header, response_frame

ENVELOPE = 58
PRINCIPAL_VERSION = 0                 # DefaultPrincipalData's only version
GROUP = 32                            # ConfigResource.Type.GROUP
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, LIST_CONFIG_RESOURCES = 32, 33, 44, 74
FORWARDABLE = frozenset({DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS, LIST_CONFIG_RESOURCES})
_INT16 = struct.Struct(">h")
_UNKNOWN_HOST = bytes(4)              # 0.0.0.0: a client whose address is not an IP (never on TCP)


class EnvelopeError(Exception):
    """An Envelope kcoord refuses: ``code`` is its answer (the message says what was wrong)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Inner:
    """The request an Envelope carries, and who sent it to the first instance."""

    principal: str          # "Type:Name", as ClientInfo names principals
    host: str               # the client's IP address
    header: RequestHeader
    request: Any            # the kio request at header.api_version


# --- the principal: DefaultKafkaPrincipalBuilder's serde --------------------------------

def serialize_principal(principal: str) -> bytes:
    """``principal`` ("User:alice") as Kafka's DefaultKafkaPrincipalBuilder serializes it."""
    kind, _, name = principal.partition(":")
    return _INT16.pack(PRINCIPAL_VERSION) + encode_body(
        DefaultPrincipalData(type_=kind, name=name, token_authenticated=False))


def deserialize_principal(data: bytes | None) -> str:
    if data is None:
        raise EnvelopeError(ErrorCode.principal_deserialization_failure, "The envelope carries no principal")
    if len(data) < 2:
        raise EnvelopeError(ErrorCode.principal_deserialization_failure,
                            f"The envelope's principal is {len(data)} bytes: too short for its version")
    (version,) = _INT16.unpack_from(data, 0)
    if version != PRINCIPAL_VERSION:
        raise EnvelopeError(ErrorCode.principal_deserialization_failure, f"Invalid principal data version {version}")
    try:
        principal = decode_body(DefaultPrincipalData, data, 2)
    except BodyError as e:
        raise EnvelopeError(ErrorCode.principal_deserialization_failure,
                            f"Failed to deserialize client principal from envelope: {e}") from None
    if not principal.type_:
        raise EnvelopeError(ErrorCode.principal_deserialization_failure, "The envelope's principal has no type")
    return f"{principal.type_}:{principal.name}"


# --- the client's address --------------------------------------------------------------

def host_bytes(host: str) -> bytes:
    """The IPv4 or IPv6 address ``host`` in its packed bytes (an IPv6 zone dropped)."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).packed
    except ValueError:
        return _UNKNOWN_HOST


def host_of(data: bytes) -> str:
    if len(data) not in (4, 16):     # InetAddress.getByAddress: 4 or 16 bytes, else unknown host
        raise EnvelopeError(ErrorCode.invalid_request, f"Failed to parse client address from envelope: "
                                                       f"{len(data)} bytes, expected 4 or 16")
    return str(ipaddress.ip_address(data))


# --- wrapping and unwrapping ------------------------------------------------------------

def wrap(request: Any, client_id: str | None, principal: str, host: str) -> EnvelopeRequest:
    """An Envelope carrying ``request`` (a kio request, at its class's version) for the client
    ``principal`` at ``host``; the inner correlation id is 0 (the Envelope's own is the link's)."""
    api_key, version = int(request.__api_key__), int(request.__version__)
    header = RequestHeader(api_key, version, 0, client_id).encode(request_header_version(api_key, version))
    return EnvelopeRequest(request_data=header + encode_body(request), request_principal=serialize_principal(principal),
                           client_host_address=host_bytes(host))


def unwrap(envelope: EnvelopeRequest) -> Inner:
    """The request inside ``envelope``, checked in Kafka's order: principal, address, header,
    whether the API may be forwarded, body; then kcoord's rule that only GROUP resources travel."""
    principal = deserialize_principal(envelope.request_principal)
    host = host_of(envelope.client_host_address)
    data = envelope.request_data
    if len(data) < 4:
        raise EnvelopeError(ErrorCode.unsupported_version, f"Failed to parse request header from envelope: "
                                                           f"{len(data)} bytes")
    api_key, version = _INT16.unpack_from(data, 0)[0], _INT16.unpack_from(data, 2)[0]
    if api_key not in FORWARDABLE:
        raise EnvelopeError(ErrorCode.invalid_request, f"API {api_key} is not enabled or is not eligible for "
                                                       "forwarding between kcoord instances")
    try:
        cls = request_class(api_key, version)
        header, offset = decode_request_header(data, request_header_version(api_key, version), 0)
        request = decode_body(cls, data, offset)
    except (KeyError, HeaderError, BodyError) as e:
        raise EnvelopeError(ErrorCode.unsupported_version, f"Failed to parse forwarded request "
                                                           f"(API {api_key} v{version}): {e}") from None
    if not _only_groups(api_key, version, request):
        raise EnvelopeError(ErrorCode.invalid_request, "kcoord instances forward only GROUP config resources")
    return Inner(principal, host, header, request)


def _only_groups(api_key: int, version: int, request: Any) -> bool:
    if api_key == LIST_CONFIG_RESOURCES:
        types = tuple(request.resource_types) if version >= 1 else ()
        return bool(types) and all(int(t) == GROUP for t in types)
    return all(int(r.resource_type) == GROUP for r in request.resources)


def answer(inner: Inner, response: Any) -> EnvelopeResponse:
    """The Envelope's response carrying ``response`` to ``inner``, with its correlation id."""
    header = inner.header
    frame = response_frame(header.correlation_id, encode_body(response),
                           response_header_version(header.api_key, header.api_version))
    return EnvelopeResponse(response_data=frame[4:], error_code=ErrorCode.none)


def refused(code: ErrorCode) -> EnvelopeResponse:
    return EnvelopeResponse(response_data=None, error_code=code)


def error_response(version: int, error: Any, request: Any) -> EnvelopeResponse:
    """The Envelope's answer to a request refused whole (the API table's error response)."""
    return refused(error.code)


def opened(api_key: int, version: int, response: EnvelopeResponse) -> Any:
    """The inner response (a kio response to ``api_key`` at ``version``) of an Envelope's
    answer; raises EnvelopeError with the Envelope's error, or when the inner part is missing
    or does not parse."""
    if response.error_code != ErrorCode.none:
        raise EnvelopeError(response.error_code, f"the envelope was refused: {response.error_code.name.upper()}")
    data = response.response_data
    if data is None:
        raise EnvelopeError(ErrorCode.unknown_server_error, "the envelope's answer carries no response")
    try:
        _, offset = decode_response_header(data, response_header_version(api_key, version), 0)
        return decode_body(response_class(api_key, version), data, offset)
    except (KeyError, HeaderError, BodyError) as e:
        raise EnvelopeError(ErrorCode.unknown_server_error, f"the envelope's response does not parse: {e}") from None

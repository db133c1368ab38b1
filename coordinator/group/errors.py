"""Errors raised by the group coordinator core.

Handlers raise `ApiError`; the per-API wrapper turns it into the response Kafka
would send (top-level or per-partition error code plus message).
"""
from __future__ import annotations

from kio.schema.errors import ErrorCode


class IllegalStateError(Exception):
    """A record contradicts the state it is replayed onto (Kafka: IllegalStateException)."""


class ApiError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"ApiError({self.code.name}, {self.message!r})"


def invalid_request(message: str) -> ApiError:
    return ApiError(ErrorCode.invalid_request, message)


def unknown_member(group_id: str, member_id: str) -> ApiError:
    return ApiError(ErrorCode.unknown_member_id,
                    f"Member {member_id} is not a member of group {group_id}.")


def group_not_found(group_id: str, why: str = "") -> ApiError:
    msg = f"Group {group_id} not found."
    return ApiError(ErrorCode.group_id_not_found, f"{msg} {why}".strip())


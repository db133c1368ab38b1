"""What modern/consumer/ sees of its shard (context.py has the rules of views): the kernel's
`GroupsView` plus the consumer group type's own members, typed here because the kernel names
no folder."""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ...context import GroupsView

if TYPE_CHECKING:
    from ...image import MetadataImage
    from .heartbeat_policy import HeartbeatIntervalPolicy


class ConsumerView(GroupsView, Protocol):
    """What modern/consumer/ sees: topics, server assignors, the heartbeat policy, and the
    client-side assignment rounds in flight."""

    @property
    def image(self) -> MetadataImage: ...

    @property
    def assignors(self) -> Mapping[str, Any]: ...

    @property
    def last_image_version_with_new_topics(self) -> int: ...

    @property
    def heartbeat_policy(self) -> HeartbeatIntervalPolicy: ...

    @property
    def client_assignments(self) -> dict[str, Any]:
        """Client-side assignors: each client-mode group's round in flight, a client_assignment.ClientAssignment
        (soft state, modern/consumer/client_mode.py; typed Any: client_assignment imports this module's users)."""
        ...

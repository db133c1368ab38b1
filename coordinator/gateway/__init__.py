"""The asyncio side of the gateway: listeners, connections, forwarding, the cluster view.

    gateway          Gateway: start()/close(), listeners, address rewriting, group lookup
    connection       one client connection: framing, dispatch, ordered responses
    forward          one upstream connection per client connection (byte-for-byte)
    routes           the per-(api, version) dispatch table
    listeners        listener map (bootstrap + one per broker), address parsing
    cluster          ClusterView: upstream metadata cache, MetadataImage, admin helpers

The names below are imported when first asked for (PEP 562): a tool that needs one helper of
a submodule (`kcoord groups` parses addresses with `listeners`) does not pay for importing
the whole gateway at every start.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .cluster import Broker, ClusterView, MetadataImage, TopicImage
    from .gateway import Gateway
    from .listeners import ListenerInfo

__all__ = ["Broker", "ClusterView", "Gateway", "ListenerInfo", "MetadataImage", "TopicImage"]
_HOMES = {"Broker": "cluster", "ClusterView": "cluster", "MetadataImage": "cluster", "TopicImage": "cluster",
          "Gateway": "gateway", "ListenerInfo": "listeners"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value

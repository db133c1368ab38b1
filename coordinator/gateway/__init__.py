"""The asyncio side of the gateway: listeners, connections, forwarding, the cluster view.

    gateway          Gateway: start()/close(), listeners, address rewriting, group lookup
    connection       one client connection: framing, dispatch, ordered responses
    forward          one upstream connection per client connection (byte-for-byte)
    routes           the per-(api, version) dispatch table
    listeners        listener map (bootstrap + one per broker), address parsing
    cluster          ClusterView: upstream metadata cache, MetadataImage, admin helpers
"""
from .cluster import Broker, ClusterView, MetadataImage, TopicImage
from .gateway import Gateway
from .listeners import ListenerInfo

__all__ = ["Broker", "ClusterView", "Gateway", "ListenerInfo", "MetadataImage", "TopicImage"]

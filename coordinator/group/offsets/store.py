"""The committed offsets' store lives with the kernel (coordinator/group/offset_store.py): the
shard owns it as it owns the groups, and replay writes it. This name stays for the tools."""
from ..offset_store import GroupOffsets, OffsetAndMetadata, OffsetStore

__all__ = ["GroupOffsets", "OffsetAndMetadata", "OffsetStore"]

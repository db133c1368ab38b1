"""The offset commit key's encoded bytes are cached by (group, topic, partition): the cached
bytes are the encoder's, and client-chosen names cannot grow the cache without bound."""
from __future__ import annotations

from records import codec
from records.schemas import GroupMetadataKey, OffsetCommitKey


def test_cached_bytes_equal_the_encoders_and_decode_back() -> None:
    key = OffsetCommitKey(group="g-ü", topic="orders", partition=7)
    first = codec.encode_key(key)
    assert codec.encode_key(OffsetCommitKey(group="g-ü", topic="orders", partition=7)) is first
    assert first == codec._encode_key(key)
    assert codec.decode_key(first) == key
    # another partition of the same topic is another key
    assert codec.encode_key(OffsetCommitKey(group="g-ü", topic="orders", partition=8)) != first
    # other key types are not cached and still encode
    assert codec.decode_key(codec.encode_key(GroupMetadataKey(group="g"))) == GroupMetadataKey(group="g")


def test_hostile_names_cannot_grow_the_cache() -> None:
    codec._ENCODED_KEY_CACHE.clear()
    for i in range(3 * codec._ENCODED_KEY_CACHE_MAX):
        codec.encode_key(OffsetCommitKey(group=f"g{i}", topic="t", partition=i))
        assert len(codec._ENCODED_KEY_CACHE) <= codec._ENCODED_KEY_CACHE_MAX
    codec._ENCODED_KEY_CACHE.clear()
    long_key = OffsetCommitKey(group="g" * 30_000, topic="t" * 30_000, partition=0)
    encoded = codec.encode_key(long_key)
    assert codec.decode_key(encoded) == long_key
    assert not codec._ENCODED_KEY_CACHE     # a long key is encoded, never kept

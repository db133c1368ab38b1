"""The offset commit keys are shared per (group, topic, partition), each with its bytes
(`codec.offset_commit_key`): the bytes are the encoder's, a key built any other way encodes
the same, and client-chosen names cannot grow the memo without bound."""
from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from records import codec
from records.schemas import GroupMetadataKey, OffsetCommitKey

names = st.text(st.characters(blacklist_categories=("Cs",)), max_size=140)


def test_shared_key_bytes_equal_the_encoders_and_decode_back() -> None:
    key = codec.offset_commit_key("g-ü", "orders", 7)
    assert codec.offset_commit_key("g-ü", "orders", 7) is key
    assert key == OffsetCommitKey(group="g-ü", topic="orders", partition=7)
    assert codec.encode_key(key) is key.encoded
    assert key.encoded == codec._encode_key(key)
    assert codec.decode_key(key.encoded) == key
    # a key built by its class (a tool, a tombstone) encodes to the same bytes
    built = OffsetCommitKey(group="g-ü", topic="orders", partition=7)
    assert codec.encode_key(built) == key.encoded
    # another partition of the same topic is another key
    assert codec.encode_key(OffsetCommitKey(group="g-ü", topic="orders", partition=8)) != key.encoded
    # other key types are not shared and still encode
    assert codec.decode_key(codec.encode_key(GroupMetadataKey(group="g"))) == GroupMetadataKey(group="g")


@settings(deadline=None)
@given(names, names, st.integers(-(2**31), 2**31 - 1))
def test_shared_keys_are_the_generic_encoders_bytes(group: str, topic: str, partition: int) -> None:
    key = OffsetCommitKey(group=group, topic=topic, partition=partition)
    shared = codec.offset_commit_key(group, topic, partition)
    assert shared.encoded == codec._encode_key(key) == codec.encode_key(key)
    assert codec.decode_key(shared.encoded) == key == shared


def test_the_bytes_are_not_part_of_the_key() -> None:
    """Equal, hashed, shown and pickled by its fields only, as before the slot."""
    shared = codec.offset_commit_key("g", "t", 1)
    built = OffsetCommitKey(group="g", topic="t", partition=1)
    assert shared == built and hash(shared) == hash(built) and repr(shared) == repr(built)
    assert {shared: 1}[built] == 1
    assert pickle.loads(pickle.dumps(shared)) == built


def test_hostile_names_cannot_grow_the_memo() -> None:
    codec.OFFSET_COMMIT_KEYS.clear()
    for i in range(3 * codec.OFFSET_COMMIT_KEYS_MAX):
        codec.encode_key(OffsetCommitKey(group=f"g{i}", topic="t", partition=i))
        assert codec.offset_commit_keys_kept() <= codec.OFFSET_COMMIT_KEYS_MAX
    # the keys of one topic count one by one, not as the topic's one entry
    for i in range(3 * codec.OFFSET_COMMIT_KEYS_MAX):
        assert codec.offset_commit_key("g", "t", i).partition == i
        assert codec.offset_commit_keys_kept() <= codec.OFFSET_COMMIT_KEYS_MAX
    assert codec.offset_commit_keys_kept() > 0
    codec.OFFSET_COMMIT_KEYS.clear()
    long_key = OffsetCommitKey(group="g" * 30_000, topic="t" * 30_000, partition=0)
    encoded = codec.encode_key(long_key)
    assert codec.decode_key(encoded) == long_key
    assert codec.offset_commit_key("g" * 30_000, "t" * 30_000, 0).encoded == encoded
    assert not codec.OFFSET_COMMIT_KEYS     # a long key is encoded, never kept
    # at the size bound a key is kept, one byte over it is not
    at_bound = codec.OFFSET_COMMIT_KEYS_MAX_BYTES - (2 + 2 + 1 + 2 + 4)
    codec.offset_commit_key("g" * at_bound, "t", 0)
    codec.offset_commit_key("g" * (at_bound + 1), "t", 0)
    assert [(names, list(kept)) for names, kept in codec.OFFSET_COMMIT_KEYS.items()] == [(("g" * at_bound, "t"), [0])]


def test_the_topic_id_tags_memo_is_bounded_and_gives_the_generic_bytes() -> None:
    """The value's tagged fields are kept by topic id: many topics cannot grow the memo past
    its bound, and every value still encodes as the generic encoder does."""
    import uuid

    from records import _classic
    from records.schemas import OffsetCommitValue

    codec._OFFSET_COMMIT_TAGS.clear()
    for i in range(3 * codec._OFFSET_COMMIT_TAGS_MAX):
        value = OffsetCommitValue(i, -1, "", 7, -1, uuid.UUID(int=(i * 7919) << 64 | i))
        assert codec.encode_value(value, 4) == _classic.encode_offset_commit(value, 4)
        assert len(codec._OFFSET_COMMIT_TAGS) <= codec._OFFSET_COMMIT_TAGS_MAX
    zero = OffsetCommitValue(1, 2, "", 3, -1)     # no topic id: no tagged field
    assert codec.encode_value(zero, 4) == _classic.encode_offset_commit(zero, 4)

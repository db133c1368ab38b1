"""Per-group configuration (Kafka's `GroupConfig`, `kafka-configs --entity-type groups`): the
keys and their validation (keys.py), the store a shard keeps (store.py), its record's replay
rule and the shard operations that read and change it (ops.py), plugged into the shard by
contribution.py. Configs live apart from the groups: no group type owns them, DeleteGroups
and offset expiry never remove them (docs/user/group-configs.md).
"""

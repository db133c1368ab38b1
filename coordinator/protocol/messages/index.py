"""(api, version, kind) generated from Kafka 4.4.0 because kio lacks them."""

GENERATED = frozenset({
    ('api_versions', 5, 'request'),
    ('api_versions', 5, 'response'),
    ('delete_groups', 3, 'request'),
    ('delete_groups', 3, 'response'),
    ('streams_group_describe', 1, 'request'),
    ('streams_group_describe', 1, 'response'),
    ('streams_group_heartbeat', 1, 'request'),
    ('streams_group_heartbeat', 1, 'response'),
    ('streams_group_topology_description_update', 0, 'request'),
    ('streams_group_topology_description_update', 0, 'response'),
    ('txn_offset_commit', 6, 'request'),
    ('txn_offset_commit', 6, 'response'),
    ('unregister_controller', 0, 'request'),
    ('unregister_controller', 0, 'response'),
})

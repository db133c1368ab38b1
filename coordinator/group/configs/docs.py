"""The documentation DescribeConfigs returns for each group config key when asked
(IncludeDocumentation), as Kafka 4.4's broker returns it (its `GroupConfig` definitions): wire
data, kept apart from the rules in keys.py."""
from __future__ import annotations

DOCUMENTATION: dict[str, str] = {
    'consumer.session.timeout.ms': (
        'The timeout to detect client failures when using the consumer group protocol.'
    ),
    'consumer.heartbeat.interval.ms': (
        'The heartbeat interval given to the members of a consumer group.'
    ),
    'consumer.assignment.interval.ms': (
        'The interval between assignment updates for a consumer group.'
    ),
    'consumer.assignor.offload.enable': (
        'Whether to offload consumer group assignment to a group coordinator background thread.'
    ),
    'share.session.timeout.ms': (
        'The timeout to detect client failures when using the share group protocol.'
    ),
    'share.heartbeat.interval.ms': (
        'The heartbeat interval given to the members of a share group.'
    ),
    'share.record.lock.duration.ms': (
        'The record acquisition lock duration in milliseconds for share groups.'
    ),
    'share.delivery.count.limit': (
        'The maximum number of delivery attempts for a record delivered to a share group.'
    ),
    'share.partition.max.record.locks': (
        'Share-group record lock limit per share-partition.'
    ),
    'share.auto.offset.reset': (
        'The strategy to initialize the share-partition start offset. <ul><li>earliest: automatically reset '
        'the offset to the earliest offset</li><li>latest: automatically reset the offset to the latest '
        'offset</li><li>by_duration:&lt;duration&gt;: automatically reset the offset to a configured duration'
        ' from the current timestamp. &lt;duration&gt; must be specified in ISO8601 format (PnDTnHnMn.nS). '
        'Negative duration is not allowed.</li><li>anything else: throw exception to the share '
        'consumer.</li></ul>'
    ),
    'share.isolation.level': (
        'Controls how to read records written transactionally. If set to "read_committed", the share group '
        'will only deliver transactional records which have been committed. If set to "read_uncommitted", the'
        ' share group will return all messages, even transactional messages which have been aborted. Non-'
        'transactional records will be returned unconditionally in either mode.'
    ),
    'share.renew.acknowledge.enable': (
        'Whether the renew acknowledge type is enabled for the share group.'
    ),
    'share.assignment.interval.ms': (
        'The interval between assignment updates for a share group.'
    ),
    'share.assignor.offload.enable': (
        'Whether to offload share group assignment to a group coordinator background thread.'
    ),
    'streams.session.timeout.ms': (
        'The timeout to detect client failures when using the streams group protocol.'
    ),
    'streams.heartbeat.interval.ms': (
        'The heartbeat interval given to the members.'
    ),
    'streams.num.standby.replicas': (
        'The number of standby replicas for each task.'
    ),
    'streams.initial.rebalance.delay.ms': (
        'The amount of time the group coordinator will wait for more streams clients to join a new group '
        'before performing the first rebalance. A longer delay means potentially fewer rebalances.'
    ),
    'streams.assignment.interval.ms': (
        'The interval between assignment updates for a streams group.'
    ),
    'streams.assignor.offload.enable': (
        'Whether to offload streams group assignment to a group coordinator background thread.'
    ),
    'streams.task.offset.interval.ms': (
        'The interval in which the warmup task changelog offsets on a client are updated on the broker. The '
        'offsets are sent with the next heartbeat after this time has passed.'
    ),
    'streams.num.warmup.replicas': (
        'The maximum number of warmup task replicas.'
    ),
    'streams.rack.aware.assignment.tags': (
        'List of client tag keys used to distribute standby replicas across Kafka Streams instances. When '
        'configured, and the used broker-side assignor supports it, it will make a best-effort to distribute '
        'standby tasks over each client tag dimension.'
    ),
    'streams.acceptable.recovery.lag': (
        'The maximum acceptable lag (number of offsets to catch up) for a client to be considered caught-up '
        'enough to receive an active task assignment.'
    ),
    'streams.assignor.name': (
        'The task assignor to use for this streams group, selected by short name from the assignors '
        'registered via the broker configuration group.streams.assignors. When unset, the group defaults to '
        "the first assignor configured in the broker's group.streams.assignors setting. Changing the assignor"
        ' does not trigger a rebalance for the group; the new assignor takes effect on the next rebalance.'
    ),
    'errors.deadletterqueue.topic.name': (
        'The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank'
        ' (the default), the group does not have a DLQ topic.'
    ),
    'errors.deadletterqueue.copy.record.enable': (
        'When writing onto the dead-letter queue topic, whether to copy the original record onto the DLQ '
        'topic, or just write a record containing the context information headers.'
    ),
}

"""Group config changes in the audit log (coordinator/security/audit.py): AlterConfigs and
IncrementalAlterConfigs on GROUP resources, served by service/group_configs.py, write one
line per group with the keys named and the outcome; describes and lists write nothing."""
from __future__ import annotations

import asyncio

import orjson

from coordinator.group.kio_util import schema
from coordinator.security.audit import AuditLog

from .test_authz_service_topics import ALICE, service_with

GROUP = 32


def incremental(*resources, validate_only=False):
    mod = schema("incremental_alter_configs", 1, "request")
    return mod.IncrementalAlterConfigsRequest(validate_only=validate_only, resources=tuple(
        mod.AlterConfigsResource(resource_type=GROUP, resource_name=name, configs=tuple(
            mod.AlterableConfig(name=k, config_operation=0, value=v) for k, v in changes))
        for name, changes in resources))


def legacy(name, changes):
    mod = schema("alter_configs", 2, "request")
    return mod.AlterConfigsRequest(validate_only=False, resources=(mod.AlterConfigsResource(
        resource_type=GROUP, resource_name=name, configs=tuple(
            mod.AlterableConfig(name=k, value=v) for k, v in changes)),))


def test_group_config_changes_are_audited_per_group(tmp_path):
    path = tmp_path / "audit.log"
    audit = AuditLog.from_settings({"audit.log": str(path)})
    assert audit is not None

    async def main():
        service = await service_with(audit)
        await service.serve_group_configs(44, 1, incremental(
            ("g", [("consumer.session.timeout.ms", "50000")]),
            ("hidden", [("consumer.heartbeat.interval.ms", "6000")]),
            ("g2", [("no.such.key", "1")])), ALICE)
        await service.serve_group_configs(44, 1, incremental(
            ("g", [("consumer.session.timeout.ms", "60000")]), validate_only=True), ALICE)
        await service.serve_group_configs(33, 2, legacy("g", [("consumer.heartbeat.interval.ms", "6000")]), ALICE)
        described = schema("describe_configs", 4, "request")
        await service.serve_group_configs(32, 4, described.DescribeConfigsRequest(
            include_synonyms=False, include_documentation=False, resources=(described.DescribeConfigsResource(
                resource_type=GROUP, resource_name="g", configuration_keys=None),)), ALICE)   # not audited
    asyncio.run(main())
    audit.close()
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert [(e["api"], e["action"], e["group"], e["configs"], e.get("validate_only", False), e["outcome"])
            for e in lines] == [
        ("IncrementalAlterConfigs", "alter_configs", "g", ["consumer.session.timeout.ms"], False, "NONE"),
        ("IncrementalAlterConfigs", "alter_configs", "hidden", ["consumer.heartbeat.interval.ms"], False,
         "GROUP_AUTHORIZATION_FAILED"),
        ("IncrementalAlterConfigs", "alter_configs", "g2", ["no.such.key"], False, "INVALID_CONFIG"),
        ("IncrementalAlterConfigs", "alter_configs", "g", ["consumer.session.timeout.ms"], True, "NONE"),
        ("AlterConfigs", "alter_configs", "g", ["consumer.heartbeat.interval.ms"], False, "NONE"),
    ]
    assert {(e["principal"], e["client"], e["client_id"]) for e in lines} == {("User:alice", "10.0.0.7:2", "app")}

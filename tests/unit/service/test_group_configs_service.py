"""The service's per-group configuration APIs (coordinator/service/group_configs.py) over
real shards and a fake state topic: describe with defaults and sources, incremental and
legacy alter, validate_only, duplicates, ACLs (Group DESCRIBE_CONFIGS / ALTER_CONFIGS), and
ListConfigResources across shards."""
from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from coordinator.authz import Action
from coordinator.group.kio_util import schema

from .test_authz import CLIENT, DenyGroups, service_with

GROUP = 32


def incremental(*resources, validate_only=False):
    mod = schema("incremental_alter_configs", 1, "request")
    return mod.IncrementalAlterConfigsRequest(validate_only=validate_only, resources=tuple(
        mod.AlterConfigsResource(resource_type=GROUP, resource_name=name, configs=tuple(
            mod.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in changes))
        for name, changes in resources))


def describe(*resources, synonyms=False):
    mod = schema("describe_configs", 4, "request")
    return mod.DescribeConfigsRequest(include_synonyms=synonyms, include_documentation=False, resources=tuple(
        mod.DescribeConfigsResource(resource_type=GROUP, resource_name=name, configuration_keys=keys)
        for name, keys in resources))


def answers(response):
    return [(r.resource_name, r.error_code, r.error_message) for r in response.responses]


def test_set_describe_list_and_delete():
    async def main():
        service = await service_with(DenyGroups())
        set_ = incremental(("g1", [("consumer.session.timeout.ms", 0, "50000")]),
                           ("g2", [("consumer.heartbeat.interval.ms", 0, "6000")]))
        assert answers(await service.serve_group_configs(44, 1, set_, CLIENT)) == [
            ("g1", ErrorCode.none, None), ("g2", ErrorCode.none, None)]
        described = await service.serve_group_configs(32, 4, describe(("g1", None), ("nobody", (
            "consumer.session.timeout.ms", "consumer.assignor.offload.enable"))), CLIENT)
        g1, nobody = described.results
        entries = {c.name: (c.value, c.config_source, c.config_type, c.read_only) for c in g1.configs}
        assert entries["consumer.session.timeout.ms"] == ("50000", 8, 3, False)
        assert entries["consumer.heartbeat.interval.ms"] == ("5000", 5, 3, False)
        assert "consumer.assignor.offload.enable" not in entries        # internal: only when named
        assert {c.name: c.value for c in nobody.configs} == {"consumer.session.timeout.ms": "45000",
                                                             "consumer.assignor.offload.enable": "true"}
        mod = schema("list_config_resources", 1, "request")
        listed = await service.serve_group_configs(74, 1, mod.ListConfigResourcesRequest(resource_types=(GROUP,)),
                                                   CLIENT)
        assert [(r.resource_name, r.resource_type) for r in listed.config_resources] == [("g1", 32), ("g2", 32)]
        await service.serve_group_configs(44, 1, incremental(("g1", [("consumer.session.timeout.ms", 1, None)])),
                                          CLIENT)
        listed = await service.serve_group_configs(74, 1, mod.ListConfigResourcesRequest(resource_types=(GROUP,)),
                                                   CLIENT)
        assert [r.resource_name for r in listed.config_resources] == ["g2"]
    asyncio.run(main())


def test_refusals_per_resource():
    async def main():
        authz = DenyGroups("secret")
        service = await service_with(authz)
        req = incremental(("secret", [("consumer.session.timeout.ms", 0, "50000")]),
                          ("dup", [("consumer.session.timeout.ms", 0, "50000")]),
                          ("dup", [("consumer.session.timeout.ms", 0, "55000")]),
                          ("bad", [("consumer.session.timeout.ms", 0, "1")]),
                          ("", [("consumer.session.timeout.ms", 0, "50000")]),
                          ("dry", [("consumer.session.timeout.ms", 0, "50000")]))
        assert answers(await service.serve_group_configs(44, 1, req, CLIENT)) == [
            ("secret", ErrorCode.group_authorization_failed, None),
            ("dup", ErrorCode.invalid_request, "Duplicate resource."),
            ("bad", ErrorCode.invalid_config,
             "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
            ("", ErrorCode.invalid_request, "Default group resources are not allowed."),
            ("dry", ErrorCode.none, None)]
        assert Action("ALTER_CONFIGS", "GROUP", "secret") in authz.asked
        dry = incremental(("dry2", [("consumer.session.timeout.ms", 0, "50000")]), validate_only=True)
        assert answers(await service.serve_group_configs(44, 1, dry, CLIENT)) == [("dry2", ErrorCode.none, None)]
        described = await service.serve_group_configs(32, 4, describe(("secret", None), ("dry2", None), ("", None)),
                                                      CLIENT)
        assert [(r.error_code, r.configs == ()) for r in described.results] == [
            (ErrorCode.group_authorization_failed, True), (ErrorCode.none, False), (ErrorCode.invalid_request, True)]
        assert {c.name: c.config_source for c in described.results[1].configs}["consumer.session.timeout.ms"] == 5
        assert Action("DESCRIBE_CONFIGS", "GROUP", "secret") in authz.asked
    asyncio.run(main())


def test_legacy_alter_configs_replaces_the_set():
    async def main():
        service = await service_with(DenyGroups())
        await service.serve_group_configs(44, 1, incremental(("g", [("consumer.session.timeout.ms", 0, "50000")])),
                                          CLIENT)
        mod = schema("alter_configs", 2, "request")
        legacy = mod.AlterConfigsRequest(validate_only=False, resources=(mod.AlterConfigsResource(
            resource_type=GROUP, resource_name="g", configs=(mod.AlterableConfig(
                name="consumer.assignment.interval.ms", value="0"),)),))
        assert answers(await service.serve_group_configs(33, 2, legacy, CLIENT)) == [("g", ErrorCode.none, None)]
        described = await service.serve_group_configs(32, 4, describe(("g", None)), CLIENT)
        sources = {c.name: c.config_source for c in described.results[0].configs}
        assert sources["consumer.session.timeout.ms"] == 5 and sources["consumer.assignment.interval.ms"] == 8
    asyncio.run(main())


def test_every_version_is_answered():
    async def main():
        service = await service_with(DenyGroups())
        for version in range(0, 2):
            mod = schema("incremental_alter_configs", version, "request")
            req = mod.IncrementalAlterConfigsRequest(validate_only=False, resources=(mod.AlterConfigsResource(
                resource_type=GROUP, resource_name="g", configs=(mod.AlterableConfig(
                    name="consumer.session.timeout.ms", config_operation=0, value="50000"),)),))
            assert answers(await service.serve_group_configs(44, version, req, CLIENT)) == [("g", ErrorCode.none, None)]
        for version in range(0, 3):
            mod = schema("alter_configs", version, "request")
            req = mod.AlterConfigsRequest(validate_only=True, resources=(mod.AlterConfigsResource(
                resource_type=GROUP, resource_name="g", configs=(mod.AlterableConfig(
                    name="consumer.session.timeout.ms", value="50000"),)),))
            assert answers(await service.serve_group_configs(33, version, req, CLIENT)) == [("g", ErrorCode.none, None)]
        for version in range(1, 5):
            mod = schema("describe_configs", version, "request")
            fields = {"include_synonyms": True}
            if version >= 3:
                fields["include_documentation"] = False
            req = mod.DescribeConfigsRequest(resources=(mod.DescribeConfigsResource(
                resource_type=GROUP, resource_name="g", configuration_keys=None),), **fields)
            (result,) = (await service.serve_group_configs(32, version, req, CLIENT)).results
            entry = {c.name: c for c in result.configs}["consumer.session.timeout.ms"]
            assert (entry.value, entry.config_source) == ("50000", 8)
            assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
                ("consumer.session.timeout.ms", "50000", 8), ("group.consumer.session.timeout.ms", "45000", 5)]
            heartbeat = {c.name: c for c in result.configs}["consumer.heartbeat.interval.ms"]
            assert [(s.name, s.value, s.source) for s in heartbeat.synonyms] == [
                ("group.consumer.heartbeat.interval.ms", "5000", 5)]
    asyncio.run(main())

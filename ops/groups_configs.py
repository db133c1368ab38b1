"""`kcoord groups configs`: per-group configuration (docs/user/group-configs.md), as
`kafka-configs --entity-type groups` sets and shows it, through kcoord or Apache Kafka alike.

    kcoord groups configs --bootstrap-server B (--group G ... | --all-groups) [--json]
    kcoord groups configs --bootstrap-server B --group G ... --set KEY=VALUE ... [--delete KEY ...]

Without --set/--delete it describes the keys set on each group (--all-groups: every group
ListConfigResources lists). With them it sends one IncrementalAlterConfigs (SET, DELETE) for
the named groups and reports each group's answer. A refused group is an error line and exit
code 1, with the server's message.
"""
from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

from kio.schema.describe_configs.v4 import request as dc_req
from kio.schema.incremental_alter_configs.v1 import request as iac_req
from kio.schema.list_config_resources.v1 import request as lcr_req
from kio.static.primitive import i8

GROUP = i8(32)                 # ConfigResource.Type.GROUP
GROUP_CONFIG_SOURCE = 8        # the value set on the group (DescribeConfigs' ConfigSource)
SET, DELETE = i8(0), i8(1)


def register(sub: Any, common: Any, run: Any, out: Any) -> None:
    """The subcommand, with groups_cli's argument helper, runner and table printer."""
    q = sub.add_parser("configs", help="describe or change per-group configuration (kafka-configs --entity-type "
                                       "groups)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    common(q)
    which = q.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", action="append", help="repeatable")
    which.add_argument("--all-groups", action="store_true")
    q.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="repeatable")
    q.add_argument("--delete", action="append", default=[], metavar="KEY", help="repeatable")
    q.set_defaults(func=run(functools.partial(_configs, out=out)))


async def _configs(admin: Any, args: argparse.Namespace, out: Any) -> int:
    if args.set or args.delete:
        return await _alter(admin, args)
    groups = args.group
    if args.all_groups:
        listed = await admin._ask(lcr_req.ListConfigResourcesRequest(resource_types=(GROUP,)))
        groups = sorted(r.resource_name for r in listed.config_resources if r.resource_type == GROUP)
    if not groups:
        return _show(out, args, [])
    response = await admin._ask(dc_req.DescribeConfigsRequest(resources=tuple(
        dc_req.DescribeConfigsResource(resource_type=GROUP, resource_name=g, configuration_keys=None)
        for g in groups), include_synonyms=False, include_documentation=False))
    rows, failed = [], 0
    for r in response.results:
        if r.error_code:
            print(f"Error: group {r.resource_name}: {r.error_code.name} {r.error_message or ''}".rstrip(),
                  file=sys.stderr)
            failed = 1
            continue
        rows += [{"group": r.resource_name, "key": c.name, "value": c.value} for c in r.configs
                 if c.config_source == GROUP_CONFIG_SOURCE]
    return _show(out, args, rows) or failed


async def _alter(admin: Any, args: argparse.Namespace) -> int:
    if args.all_groups:
        print("Error: --set/--delete need --group", file=sys.stderr)
        return 1
    changes: list[Any] = []
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"Error: --set {item!r} is not KEY=VALUE", file=sys.stderr)
            return 1
        changes.append(iac_req.AlterableConfig(name=key, config_operation=SET, value=value))
    changes += [iac_req.AlterableConfig(name=key, config_operation=DELETE, value=None) for key in args.delete]
    response = await admin._ask(iac_req.IncrementalAlterConfigsRequest(validate_only=False, resources=tuple(
        iac_req.AlterConfigsResource(resource_type=GROUP, resource_name=g, configs=tuple(changes))
        for g in args.group)))
    failed = 0
    for r in response.responses:
        if r.error_code:
            print(f"Error: group {r.resource_name}: {r.error_code.name} {r.error_message or ''}".rstrip(),
                  file=sys.stderr)
            failed = 1
        else:
            print(f"Completed updating config for group {r.resource_name}.")
    return failed


def _show(out: Any, args: argparse.Namespace, rows: list[dict]) -> int:
    out(args, rows, ["GROUP", "KEY", "VALUE"], ["group", "key", "value"])
    return 0

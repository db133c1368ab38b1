"""Finding the membership group's coordinator on the upstream (membership.py's first step,
and again after NOT_COORDINATOR and the like), and, on the first find of a member whose
membership is `auto`, whether the upstream's group coordinator carries static members
(upstream.static_membership_works).

Rules: one bootstrap link per find, closed before the coordinator's link is opened; an
error answer raises RuntimeError naming the API and the error (the membership's loop
retries it with its backoff).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.api_versions.v3 import request as api_versions_v3
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3 import request as find_v3
from kio.static.primitive import i8

from .upstream import Link, OpenLink, static_membership_works


@dataclass(frozen=True, slots=True)
class Found:
    link: Link                      # to the group's coordinator
    address: tuple[str, int]
    static: bool | None             # decided from ApiVersions when asked, else None


async def find_coordinator(open_link: OpenLink, bootstrap: Sequence[tuple[str, int]], group_id: str,
                           timeout: float, decide_static: bool) -> Found:
    """The group's coordinator (FindCoordinator v3 on a bootstrap link) and a link to it;
    with ``decide_static``, ApiVersions first says whether to join as a static member."""
    link = await open_link(bootstrap)
    static = None
    try:
        if decide_static:
            versions = await link.request(api_versions_v3.ApiVersionsRequest(
                client_software_name="kcoord", client_software_version="0.1.0"), timeout)
            if versions.error_code != ErrorCode.none:
                raise RuntimeError(f"ApiVersions answered {versions.error_code.name}: cannot tell whether the "
                                   "upstream carries static members")
            static = static_membership_works({int(k.api_key) for k in versions.api_keys})
        resp = await link.request(find_v3.FindCoordinatorRequest(key=group_id, key_type=i8(0)), timeout)
    finally:
        link.close()
    if resp.error_code != ErrorCode.none:
        raise RuntimeError(f"FindCoordinator({group_id}) answered {resp.error_code.name}")
    address = (resp.host, resp.port)
    return Found(await open_link([address]), address, static)

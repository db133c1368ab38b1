"""Where kcoord's ACLs come from: `authorizer=file|upstream|none` (docs/user/security-acls.md).

- ``authorizer=file`` with ``authorizer.file=PATH``: the ACL file below, read at start (a bad
  file refuses the start, naming the line) and re-read when it changes (checked every
  ``authorizer.file.reload.ms``, default 1000). A changed file that does not parse keeps the
  ACLs in force and logs an ERROR naming the line and the problem.
- ``authorizer=upstream``: the upstream cluster's ACLs, mirrored with DescribeAcls (kcoord's
  upstream principal needs DESCRIBE on the CLUSTER) on one of kcoord's own upstream links
  (TLS, SASL and KIP-368 from the ``upstream.*`` settings, security/upstream.py), every
  ``authorizer.refresh.ms`` (default 30000). This package sits below the upstream client, so
  the caller hands ``build_authorizer`` the link factory (coordinator/upstream/client.py's
  ``opener``).
  A failed refresh keeps the last good set and logs; before the first successful load
  everything but ``super.users`` is denied (fail closed).
- ``authorizer=none`` (or unset): no authorizer, every group API is served to everyone.
- ``authorizer=probe``: the upstream's verdicts, probed on each client's own passthrough link
  and cached (security/acl_probe.py; ``authorizer.probe.ttl.ms`` default 30000,
  ``authorizer.probe.max.entries`` default 100000, ``authorizer.probe.timeout.ms`` default
  10000). It needs SASL passthrough: refused with ``sasl.termination=true``.

``super.users`` and ``allow.everyone.if.no.acl.found`` are kcoord settings of those names
(Kafka's broker settings are not readable through the protocol), default empty and false.

The ACL file: one ACL per line, seven fields separated by blanks (shell-style quotes for a
field with blanks, ``#`` starts a comment)::

    # PERMISSION PRINCIPAL    HOST       OPERATION RESOURCE_TYPE PATTERN  NAME
    ALLOW        User:alice   *          READ      GROUP         LITERAL  orders-app
    ALLOW        User:alice   10.0.0.7   DESCRIBE  TOPIC         PREFIXED orders.
    DENY         User:*       10.9.9.9   ALL       GROUP         LITERAL  *
    ALLOW        "User:CN=Jo Doe,O=x" *  READ      TOPIC         LITERAL  payments

Names are case-insensitive for the permission, operation, resource and pattern types.
"""
from __future__ import annotations

import asyncio
import logging
import os
import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..aio import within
from ..protocol.apis import request_class
from ..protocol.bootstrap import parse_bootstrap
from .acl import OPERATION_CODES, AclAuthorizer, AclBinding, AclError, AclSet, settings_flags
from .acl_probe import DEFAULT_MAX_ENTRIES as DEFAULT_PROBE_MAX_ENTRIES
from .acl_probe import DEFAULT_TIMEOUT_MS as DEFAULT_PROBE_TIMEOUT_MS
from .acl_probe import DEFAULT_TTL_MS as DEFAULT_PROBE_TTL_MS
from .acl_probe import ProbeAuthorizer
from .settings import SecurityConfigError

if TYPE_CHECKING:
    from .upstream import UpstreamSecurity

log = logging.getLogger("kcoord.security.acl")

DEFAULT_REFRESH_MS = 30_000
DEFAULT_FILE_RELOAD_MS = 1_000
MODES = ("none", "file", "upstream", "probe")


class AclFileError(AclError):
    """A line of the ACL file kcoord refuses."""

    def __init__(self, path: str, line: int, problem: str) -> None:
        super().__init__(f"{path}: line {line}: {problem}")
        self.path, self.line, self.problem = path, line, problem


def parse_acl_text(text: str, path: str = "<acls>") -> AclSet:
    """The ACLs of an ACL file's text; raises AclFileError at the first bad line."""
    bindings = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            fields = shlex.split(line, comments=True)
        except ValueError as e:           # an unclosed quote
            raise AclFileError(path, number, str(e)) from None
        if not fields:
            continue
        if len(fields) != 7:
            raise AclFileError(path, number, f"expected 7 fields (PERMISSION PRINCIPAL HOST OPERATION RESOURCE_TYPE "
                                             f"PATTERN NAME), found {len(fields)}: {line.strip()!r}")
        permission, principal, host, operation, resource_type, pattern, name = fields
        try:
            bindings.append(AclBinding.of(resource_type, pattern, name, principal, host, operation, permission))
        except AclError as e:
            raise AclFileError(path, number, str(e)) from None
    return AclSet(bindings)


def read_acl_file(path: str) -> AclSet:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise AclFileError(path, 0, f"cannot read the file: {e.strerror}") from None
    return parse_acl_text(text, path)


class AclSource(Protocol):
    async def start(self) -> None: ...
    async def stop(self) -> None: ...


class FileAclSource:
    """`authorizer=file`: the file's ACLs, re-read when its size, mtime or inode changes."""

    def __init__(self, authorizer: AclAuthorizer, path: str, reload_ms: int = DEFAULT_FILE_RELOAD_MS) -> None:
        self.authorizer = authorizer
        self.path = path
        self.reload_s = reload_ms / 1000
        self._seen: tuple[int, int, int] | None = None
        self._task: asyncio.Task | None = None
        self.errors = 0            # refused reloads (a test and an operator can read it)

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def load(self) -> None:
        """Read the file now; raises AclFileError (the caller decides what a bad file means)."""
        stamp = self._stamp()
        acls = read_acl_file(self.path)
        self._seen = stamp
        if acls != self.authorizer.acls or not self.authorizer.ready:
            self.authorizer.replace(acls)
            log.info("authorizer=file: %d ACLs loaded from %s", len(acls), self.path)

    def check(self) -> bool:
        """Reload if the file changed; a bad file keeps the ACLs in force. True if reloaded."""
        stamp = self._stamp()
        if stamp == self._seen:
            return False
        try:
            self.load()
            return True
        except AclFileError as e:
            self._seen = stamp          # logged once per change, not once per check
            self.errors += 1
            log.error("authorizer=file: %s; the %d ACLs loaded before stay in force until the file is fixed",
                      e, len(self.authorizer.acls))
            return False

    async def start(self) -> None:
        try:
            self.load()
        except AclFileError as e:
            raise SecurityConfigError(f"--config authorizer.file: {e}") from None
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="kcoord-acl-file")

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.reload_s)
            self.check()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


# Kafka's wire codes (DescribeAcls).
_RESOURCE_TYPES = {2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID", 6: "DELEGATION_TOKEN", 7: "USER"}
_PATTERN_TYPES = {3: "LITERAL", 4: "PREFIXED"}
_OPERATIONS = {code: name for name, code in OPERATION_CODES.items()}
_PERMISSIONS = {2: "DENY", 3: "ALLOW"}
DESCRIBE_ACLS = 29
_ANY = 1
_CLUSTER_AUTHORIZATION_FAILED = 31
# DescribeAcls v1 (KIP-290's pattern types): every Kafka from 2.0 to 4.x speaks it (4.0 dropped v0).
_DESCRIBE_ACLS_VERSION = 1


class DescribeAclsError(RuntimeError):
    """The upstream refused DescribeAcls (its error code and message)."""

    def __init__(self, error_code: int, message: str | None) -> None:
        super().__init__(f"error {error_code}: {message}")
        self.error_code = error_code


class AclLink(Protocol):
    """What the ACL source needs of an upstream link (coordinator/upstream/client.py's
    UpstreamClient)."""

    @property
    def closed(self) -> bool: ...
    @property
    def reauthentication_due(self) -> bool: ...
    async def request(self, request: Any, timeout: float = ...) -> Any: ...
    def retire(self) -> None: ...
    def close(self) -> None: ...


OpenAclLink = Callable[[Sequence[tuple[str, int]]], Awaitable[AclLink]]
# (security, client id) -> a link factory: coordinator/upstream/client.py's ``opener``.
LinkOpener = Callable[["UpstreamSecurity | None", str], OpenAclLink]


def bindings_from_describe(resources: Any) -> tuple[list[AclBinding], list[str]]:
    """kcoord's bindings from a DescribeAcls v1+ answer's resources (each with its
    resource_type, resource_name, pattern_type and acls: principal, host, operation,
    permission_type); and the ACLs it cannot hold, described, to be logged."""
    out: list[AclBinding] = []
    skipped: list[str] = []
    for resource in resources:
        resource_type, name, pattern_type = int(resource.resource_type), resource.resource_name, \
            int(resource.pattern_type)
        for acl in resource.acls:
            principal, host, operation, permission = acl.principal, acl.host, int(acl.operation), \
                int(acl.permission_type)
            try:
                out.append(AclBinding.of(_RESOURCE_TYPES.get(resource_type, str(resource_type)),
                                         _PATTERN_TYPES.get(pattern_type, str(pattern_type)), name, principal, host,
                                         _OPERATIONS.get(operation, str(operation)),
                                         _PERMISSIONS.get(permission, str(permission))))
            except AclError as e:
                skipped.append(f"{resource_type}:{name} {principal}@{host} {operation}/{permission}: {e}")
    return out, skipped


class UpstreamAclSource:
    """`authorizer=upstream`: the upstream's ACLs through DescribeAcls, refreshed periodically.

    DescribeAcls goes on one of kcoord's own upstream links (``open_link``: TLS and SASL like
    its other links), kept between refreshes; a link whose KIP-368 session nears its end is
    retired and a fresh one opened, a link that failed is dropped and reopened on the next
    refresh. The answer's error code is checked: a refusal (CLUSTER_AUTHORIZATION_FAILED when
    kcoord's principal lacks DESCRIBE on the CLUSTER) is a failed load, never an empty ACL
    set. (confluent-kafka 2.16's describe_acls answers such a refusal with an empty list,
    which is why it is not used here.)"""

    def __init__(self, authorizer: AclAuthorizer, addresses: Sequence[tuple[str, int]], open_link: OpenAclLink,
                 refresh_ms: int = DEFAULT_REFRESH_MS, request_timeout_s: float = 10.0) -> None:
        self.authorizer = authorizer
        self.addresses = tuple(addresses)
        self.open_link = open_link
        self.refresh_s = refresh_ms / 1000
        self.request_timeout_s = request_timeout_s
        self._link: AclLink | None = None
        self._task: asyncio.Task | None = None
        self.loads = 0
        self.failures = 0

    async def _describe(self) -> Any:
        link = self._link
        if link is not None and not link.closed and link.reauthentication_due:
            link.retire()          # KIP-368: closes once answered; a freshly authenticated link follows
            link = None
        if link is None or link.closed:
            link = self._link = await self.open_link(self.addresses)
        # ANY resource, pattern, operation and permission; no name, principal or host filter
        request = request_class(DESCRIBE_ACLS, _DESCRIBE_ACLS_VERSION)(
            resource_type_filter=_ANY, resource_name_filter=None, pattern_type_filter=_ANY, principal_filter=None,
            host_filter=None, operation=_ANY, permission_type=_ANY)
        response = await link.request(request, self.request_timeout_s)
        if int(response.error_code) != 0:
            raise DescribeAclsError(int(response.error_code), response.error_message)
        return response.resources

    async def refresh(self) -> bool:
        """One DescribeAcls; True if it answered (the ACLs are then the upstream's)."""
        try:
            resources = await within(self._describe(), self.request_timeout_s + 5)
        except Exception as e:
            self.failures += 1
            self._drop_link()
            refused = isinstance(e, DescribeAclsError) and e.error_code == _CLUSTER_AUTHORIZATION_FAILED
            hint = " (kcoord's upstream principal needs DESCRIBE on the CLUSTER to list ACLs)" if refused else ""
            log.error("authorizer=upstream: DescribeAcls failed (%s)%s; %s", str(e) or type(e).__name__, hint,
                      f"keeping the {len(self.authorizer.acls)} ACLs of the last good load" if self.authorizer.ready
                      else "nothing loaded yet, so every group API is DENIED (fail closed) until it succeeds")
            return False
        bindings, skipped = bindings_from_describe(resources)
        for what in skipped:       # a resource type kcoord does not know: it never matches anything
            log.warning("authorizer=upstream: ignoring ACL %s", what)
        acls = AclSet(bindings)
        self.loads += 1
        if acls != self.authorizer.acls or not self.authorizer.ready:
            self.authorizer.replace(acls)
            log.info("authorizer=upstream: %d ACLs mirrored from the upstream", len(acls))
        return True

    def _drop_link(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            link.close()

    async def start(self) -> None:
        """Try a first load (not fatal: until one succeeds, everything is denied) and refresh."""
        await self.refresh()
        self._task = asyncio.get_running_loop().create_task(self._refresh_loop(), name="kcoord-acl-upstream")

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_s)
            await self.refresh()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self._drop_link()


class ManagedAclAuthorizer(AclAuthorizer):
    """An AclAuthorizer with its source: ``await start()`` before serving, ``await stop()`` at exit."""

    def __init__(self, mode: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.mode = mode
        self.source: AclSource | None = None

    async def start(self) -> None:
        if self.source is not None:
            await self.source.start()

    async def stop(self) -> None:
        if self.source is not None:
            await self.source.stop()


def _int_setting(settings: Mapping[str, str], name: str, default: int) -> int:
    text = settings.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise SecurityConfigError(f"--config {name}={text!r}: expected a number of milliseconds") from None
    if value <= 0:
        raise SecurityConfigError(f"--config {name}={text!r}: must be positive")
    return value


def build_authorizer(settings: Mapping[str, str], bootstrap: str, opener: LinkOpener | None = None
                     ) -> ManagedAclAuthorizer | ProbeAuthorizer | None:
    """The authorizer `authorizer=...` asks for (None for `none` or unset). Raises
    SecurityConfigError for a setting kcoord refuses. Call ``await authorizer.start()`` before
    the gateway serves (the file is read there; the upstream's first load is tried there) and
    ``await authorizer.stop()`` at shutdown. ``authorizer=upstream`` needs ``opener``
    (coordinator/upstream/client.py's): the links its DescribeAcls goes on."""
    mode = (settings.get("authorizer") or "none").strip().lower()
    if mode not in MODES:
        raise SecurityConfigError(f"--config authorizer={mode!r}: expected one of {', '.join(MODES)}")
    if mode == "none":
        return None
    try:
        super_users, allow_if_none = settings_flags(settings)
    except AclError as e:
        raise SecurityConfigError(str(e)) from None
    if mode == "probe":
        if (settings.get("sasl.termination") or "false").strip().lower() in ("1", "true", "yes"):
            raise SecurityConfigError("--config authorizer=probe asks the upstream on each client's own link, "
                                      "which SASL termination does not have; use file or upstream")
        return ProbeAuthorizer(super_users=super_users,
                               ttl_ms=_int_setting(settings, "authorizer.probe.ttl.ms", DEFAULT_PROBE_TTL_MS),
                               max_entries=_int_setting(settings, "authorizer.probe.max.entries",
                                                        DEFAULT_PROBE_MAX_ENTRIES),
                               timeout_ms=_int_setting(settings, "authorizer.probe.timeout.ms",
                                                       DEFAULT_PROBE_TIMEOUT_MS))
    authorizer = ManagedAclAuthorizer(mode, super_users=super_users, allow_everyone_if_no_acl_found=allow_if_none,
                                      ready=False)
    if mode == "file":
        path = settings.get("authorizer.file")
        if not path:
            raise SecurityConfigError("--config authorizer=file needs --config authorizer.file=PATH")
        authorizer.source = FileAclSource(authorizer, path, _int_setting(settings, "authorizer.file.reload.ms",
                                                                         DEFAULT_FILE_RELOAD_MS))
    else:
        from .upstream import UpstreamSecurity

        security = UpstreamSecurity.from_settings(settings)     # SecurityConfigError naming the setting
        refresh_ms = _int_setting(settings, "authorizer.refresh.ms", DEFAULT_REFRESH_MS)
        if opener is None:
            raise TypeError("build_authorizer: authorizer=upstream needs the upstream link opener")
        authorizer.source = UpstreamAclSource(authorizer, parse_bootstrap(bootstrap),
                                              opener(security, "kcoord-acl-mirror"), refresh_ms)
    return authorizer

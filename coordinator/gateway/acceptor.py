"""Accepting client connections on the gateway's ports (Gateway's part).

Rules:
- a plain port is served by asyncio's server, which makes one ClientConnection per
  connection; the connection holds the gateway as its listener sees it (`views`);
- a TLS port is accepted here, so that each handshake uses the listener's current
  SSLContext (certificates reload without a restart, `ssl.reload.interval.ms`) and a failed
  one is seen: counted in `kcoord_tls_handshake_failures_total` and logged, rate-limited;
  the handshake is bounded by `ssl.handshake.timeout.ms`;
- after the handshake the client certificate's principal is checked: one no mapping rule
  maps is refused, as Kafka fails its authentication; then `_TlsAccepted` hands the TLS
  transport to a ClientConnection, which gets every later callback directly;
- an accept that fails (out of file descriptors...) is logged and retried after
  `_ACCEPT_RETRY_S`, never in a busy loop.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable, Mapping
from typing import Any

from ..security.listener_metrics import TLS_RELOADS
from ..security.principal_mapping import NoMatchingRule
from .connection import ClientConnection
from .listener_table import ListenerSet, ListenerTable
from .listeners import ListenerInfo
from .ratelog import RateLimitedLog

log = logging.getLogger("kcoord.gateway")

_ACCEPT_RETRY_S = 0.1  # a TLS listener's accept failed (EMFILE...): try again after this


class Acceptor:
    def __init__(self, table: ListenerTable, view_of: Callable[[str], Any], tls_log: RateLimitedLog) -> None:
        self._table = table
        self._view_of = view_of          # listener name -> what its connections hold as their gateway
        self.tls_log = tls_log
        self.servers: dict[str, asyncio.AbstractServer] = {}
        self._handshakes: set[asyncio.Task[None]] = set()
        self._accepting: dict[str, asyncio.Task[None]] = {}   # TLS listeners' accept loops
        self._reloaders: list[asyncio.Task[None]] = []

    @property
    def _infos(self) -> Mapping[str, ListenerInfo]:
        return self._table.infos

    async def serve(self, name: str, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        info = self._infos[name]
        view = self._view_of(info.listener)
        if info.security is not None and info.security.tls is not None:
            # TLS: accepted here, so that each connection gets the listener's current
            # SSLContext (reloaded certificates) and a failed handshake is seen.
            task = loop.create_task(self._accept_tls(name, sock, view), name=f"kcoord-accept-{name}")
            self._accepting[name] = task
            return
        try:
            server = await loop.create_server(lambda: ClientConnection(view, self._infos[name]), sock=sock)
        except BaseException:
            sock.close()
            raise
        self.servers[name] = server

    def watch_certificates(self) -> None:
        """One reloader per TLS listener (ssl.reload.interval.ms)."""
        loop = asyncio.get_running_loop()
        for lset in self._table.sets:
            if lset.security.tls is not None:
                self._reloaders.append(loop.create_task(self._watch_certificates(lset),
                                                        name=f"kcoord-tls-reload-{lset.name}"))

    async def stop_accepting(self) -> None:
        for task in self._reloaders:
            task.cancel()
        self._reloaders.clear()
        for task in [*self._accepting.values(), *self._handshakes]:
            task.cancel()
        await asyncio.gather(*self._accepting.values(), return_exceptions=True)
        self._accepting.clear()

    async def _accept_tls(self, name: str, sock: socket.socket, view: Any) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                try:
                    conn, _ = await loop.sock_accept(sock)
                except OSError as e:   # out of file descriptors and the like: not a busy loop
                    self.tls_log.log(logging.ERROR, "accepting on %s failed: %s", name, e)
                    await asyncio.sleep(_ACCEPT_RETRY_S)
                    continue
                task = loop.create_task(self._tls_connection(name, conn, view))
                self._handshakes.add(task)
                task.add_done_callback(self._handshakes.discard)
        finally:
            sock.close()

    async def _tls_connection(self, name: str, conn: socket.socket, view: Any) -> None:
        """The handshake (ssl.handshake.timeout.ms), then _TlsAccepted hands over."""
        info = self._infos[name]
        assert info.security is not None and info.security.tls is not None
        tls = info.security.tls
        try:
            peer = conn.getpeername()
        except OSError:
            peer = ("?", 0)
        conn.setblocking(False)
        loop = asyncio.get_running_loop()
        try:
            # The transport owns the socket from here on, and closes it on failure.
            await loop.connect_accepted_socket(lambda: _TlsAccepted(self, view, info, peer), conn,
                                               ssl=tls.context, ssl_handshake_timeout=tls.config.handshake_timeout)
        except (OSError, TimeoutError, EOFError) as e:   # ssl.SSLError and ConnectionError are OSErrors
            self.handshake_failed(info, peer, e)

    async def _watch_certificates(self, lset: ListenerSet) -> None:
        """ssl.reload.interval.ms: new connections get a context read from changed files."""
        tls = lset.security.tls
        assert tls is not None
        ok, failed = TLS_RELOADS.labels(listener=lset.name, outcome="ok"), \
            TLS_RELOADS.labels(listener=lset.name, outcome="failed")
        while True:
            await asyncio.sleep(tls.config.reload_interval)
            failures = tls.reload_failures
            if tls.poll():
                ok.inc()
            elif tls.reload_failures != failures:
                failed.inc()

    def handshake_failed(self, info: ListenerInfo, peer: Any, error: BaseException | str) -> None:
        self._table.set_of(info).handshake_failures.inc()
        where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
        self.tls_log.log(logging.WARNING, "TLS handshake with %s on %s failed: %s", where, info.name,
                         error if isinstance(error, str) else (_tls_problem(error)))


def _tls_problem(error: BaseException) -> str:
    if isinstance(error, ssl.SSLError):
        return getattr(error, "reason", None) or str(error)
    if isinstance(error, TimeoutError):
        return "timed out"
    return str(error) or type(error).__name__


class _TlsAccepted(asyncio.Protocol):
    """The application protocol of a TLS connection until its handshake is done: then it
    checks the client certificate's principal and hands the TLS transport to a
    ClientConnection, which gets every later callback directly."""

    def __init__(self, acceptor: Acceptor, view: Any, info: ListenerInfo, peer: Any) -> None:
        self._acceptor = acceptor
        self._view = view
        self._info = info
        self._peer = peer
        self.connection: ClientConnection | None = None

    def connection_made(self, transport: Any) -> None:
        info = self._info
        try:
            info.principal_of(transport)
        except NoMatchingRule as e:
            transport.abort()
            self._acceptor.handshake_failed(info, self._peer, str(e))
            return
        connection = self.connection = ClientConnection(self._view, info)
        transport.set_protocol(connection)
        connection.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.connection is not None:
            self.connection.data_received(data)

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.connection is not None:
            self.connection.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.connection is not None:
            self.connection.pause_writing()

    def resume_writing(self) -> None:
        if self.connection is not None:
            self.connection.resume_writing()

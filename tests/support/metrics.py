"""Read a `kcoord serve --metrics-port` endpoint (Prometheus text format)."""
from __future__ import annotations

import urllib.request


def scrape(port: int, host: str = "127.0.0.1", timeout: float = 5.0) -> dict[str, float]:
    """Every sample line of /metrics: 'name{labels}' -> value."""
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def sample(samples: dict[str, float], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (0 when none)."""
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    total = 0.0
    for key, value in samples.items():
        base, _, rest = key.partition("{")
        if base == name and all(w in rest for w in wanted):
            total += value
    return total


def kcoord_with_metrics(upstream: str, state_topic: str, **kwargs):
    """A support.kcoord.KcoordProcess that also serves /metrics on a free port (``metrics_port``)."""
    from . import ports
    from .kcoord import KcoordProcess

    class _KcoordWithMetrics(KcoordProcess):
        metrics_port = ports.free_port()

        def serve_args(self) -> list[str]:
            return super().serve_args() + ["--metrics-port", str(self.metrics_port)]

        def metrics(self) -> dict[str, float]:
            return scrape(self.metrics_port)

    return _KcoordWithMetrics(upstream=upstream, state_topic=state_topic, **kwargs)

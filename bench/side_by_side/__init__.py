"""Helpers of bench/bench_side_by_side.py: Kafka 4.4's own group coordinator against kcoord
in front of the same Kafka, the whole server side on one set of cores and the load
generators on another.

- ``load``: raw-socket load with per-request latency (closed loop and pipelined);
- ``pinning``: CPU affinity of the server side and of the load generators;
- ``report``: the Markdown tables, the JSON result and an HTML page with SVG bars.
"""

"""Hostile-input tooling for kcoord (issue 10): valid-message generators, mutation
classes, the table of what kcoord decodes, a driver that fuzzes a running `kcoord serve`,
and in-process atheris harnesses for the native readers.

Table-driven: a change that makes kcoord decode new bytes (a new API, a SASL token, a
private API) adds its entry to `fuzz.targets.TARGETS`; the tests and `bench/bench_fuzz.py`
then cover it without further edits.
"""

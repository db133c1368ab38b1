"""Hostile-input tooling for kcoord: valid-message generators, mutation classes, the
table of what kcoord decodes, a driver that fuzzes a running `kcoord serve` (byte
mutations, or valid requests with extreme field values: `fuzz.structured`) while watching
the broker behind it, tools that name the request that harmed a broker (`fuzz.confirm`,
`fuzz.sweep`), and in-process atheris harnesses for the native readers. README.md lists
what is where and what the fuzzers found.

Table-driven: a served API is a target through its row (coordinator/protocol/api_table.py,
read by `fuzz.targets`); other new bytes kcoord decodes (a SASL token, a forwarded API's
check) add their entry to `fuzz.targets`; the tests and `bench/bench_fuzz.py` then cover them
without further edits.
"""

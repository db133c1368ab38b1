"""Helpers of bench/bench_vs_kafka.py: Apache Kafka 4.4's own group coordinator and kcoord
measured side by side in one run, with the same load generators and the same clients.

- ``wire``: raw-protocol loads (steady ConsumerGroupHeartbeat rate, the 1,000-member join
  storm, durable OffsetCommit rate), built on bench/loadgen;
- ``clients``: real-client figures (librdkafka consumers as processes: the 11th member
  joining ten, 10-member formation; consume throughput with confluent-kafka);
- ``report``: the side-by-side table, the JSON result and the HTML page with SVG bars.
"""

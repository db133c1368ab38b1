"""Offline tools: offsets log dump, replay, downgrade check, PySpark pipeline.

`kcoord offsets ...` (ops/cli.py); docs/user/offsets-tools.md describes the commands.

    logsource.py   LogBatch, damage reporting (Problems), progress bar, file discovery
    segment.py     Kafka segment files (mmap, CRC, resynchronisation after damage)
    dumpfile.py    JSON-lines / Avro dumps, written and read back (avro.py, recordjson.py)
    live.py        a live topic via Fetch at READ_UNCOMMITTED (markers and producer ids)
    materialise.py replay with the coordinator's own Replayer, one shard per partition
    describe.py    the replay as JSON and in kafka-consumer-groups --describe layout
    downgrade.py   KIP-915 classic-only view, diff, conversion tombstones
    load.py        copy a log into kcoord's state topic (re-partitioned, transactions resolved)
    tables.py      the pipeline's tables; spark/job.py runs them on Spark
    report.py      HTML report (svg.py draws the plots), downgrade text
    generator/     realistic generated logs; produce_log.py writes one into a topic
"""

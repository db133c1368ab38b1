"""kcoord's side of the upstream Kafka cluster: the one client it speaks to it with, and the
broker it starts when there is none.

    client       UpstreamClient: one connection, kio request in, kio response out, pipelined
                 by correlation id; TLS, SASL and KIP-368 (reconnect before the session
                 lifetime ends) from security/upstream.py's UpstreamSecurity; `opener` is the
                 one connection factory (an ``OpenLink``) every caller gets its links from
    embedded     the embedded broker `kcoord serve` starts without ``--upstream``, its
                 supervision (EmbeddedBroker), and Tansu (EmbeddedTansu)
    embedded_kafka  `--embedded kafka`: one Apache Kafka KRaft node with a kept data directory
    kafka_dist   that broker's jars (Maven Central, cached; kafka_jars lists them) and its Java
    memory_cap   the embedded broker's memory cap (cgroup v2, an address-space limit, or JVM
                 heap and direct-memory bounds)

Rules:
- One client serves kcoord's own traffic: the gateway's metadata link and admin requests
  (gateway/metadata_link.py); the state log, fenced or not, over runtime/fenced_links.py
  (the state topic's creation, Metadata without auto-creation, its writer
  runtime/lean_writer.py, its loads, tail and markers reads runtime/fenced_reads.py, the
  fenced log's transactions); the transactional offset appends (service/transactions.py);
  the kcoord cluster's membership group (cluster/membership.py) and the `kcoord groups` /
  `kcoord cluster` tools. Forwarded client requests never go through it: they are relayed
  as bytes (gateway/forward.py).
- This package sits under the runtime and the gateway and above security/ and protocol/:
  it knows the wire and the upstream's credentials, never a group, a shard or a client.
- The owner of a link retires it when its KIP-368 session nears its end
  (``reauthentication_due``) and opens a new one; the link itself refuses a request once
  the session expired.
- aiokafka is not a client of kcoord's here: records/ uses its record-batch codecs only. The
  upstream ACL source (security/acl_sources.py) sends DescribeAcls on a link from `opener`,
  handed to it by the caller (security/ sits below this package).
"""

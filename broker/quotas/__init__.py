"""Client quotas as Kafka's ZooKeeper-era brokers enforce them: byte rates for Produce
and Fetch and a share of handler time per user, client id or (user, client id), each
with `<default>` entities and Kafka's eight levels of precedence.

entities.py: what an entity is and which of its quotas applies; rate.py: Kafka's
sampled Rate; manager.py: the per-type managers and the connection's hook; store.py:
where quotas are kept on a single broker (ZooKeeper's are in broker/zookeeper/).
"""

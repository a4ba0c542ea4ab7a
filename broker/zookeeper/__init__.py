"""Cluster membership through ZooKeeper, as Kafka ran before KRaft.

- connect_string.py: `zookeeper.connect` parsed as ZooKeeper parses it (no kazoo).
- znodes.py: Kafka's znode layout and the JSON of each znode (Kafka's ZkData).
- errors.py: why a broker cannot start with ZooKeeper (no kazoo, for the CLI).
- client.py: the kazoo client, its calls awaited on the broker's loop and its callbacks
  (watches, session states) handed to the loop.
- broker_watcher.py: /brokers/ids into the metadata cache (Register/UnregisterBrokerRecord).
- controller_election.py: the /controller election with /controller_epoch.
- membership.py: all of it for the Broker: connect, cluster id, registration, watches,
  a new session after an expiry, a clean close.

Only membership.py's importer pays for kazoo: a broker without `zookeeper.connect`
never imports client.py or anything that imports kazoo.
"""

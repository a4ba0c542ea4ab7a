"""A cluster through ZooKeeper, as Kafka ran before KRaft: membership, topics, the controller.

- connect_string.py: `zookeeper.connect` parsed as ZooKeeper parses it (no kazoo).
- znodes.py: Kafka's znode layout and the JSON of each znode (Kafka's ZkData).
- errors.py: why a broker cannot start with ZooKeeper (no kazoo, for the CLI).
- client.py: the kazoo client, its calls awaited on the broker's loop and its callbacks
  (watches, session states) handed to the loop.
- broker_watcher.py: /brokers/ids into the metadata cache (Register/UnregisterBrokerRecord).
- controller_election.py: the /controller election with /controller_epoch.
- topic_watcher.py: topics, partition states and topic configs into the metadata cache.
- store.py: ZooKeeper as the MetadataStore (nothing kept locally).
- admin.py: topic admin from any broker (ZkController, Kafka's AdminZkClient).
- controller_duties.py: what the elected controller does (partition states, elections,
  deletions), fenced by the controller epoch.
- alter_partition.py: a leader's ISR change as a conditional write of its state znode.
- producer_ids.py: producer id blocks from /latest_producer_id_block.
- membership.py: all of it for the Broker: connect, cluster id, registration, watches,
  a new session after an expiry, a clean close.

Only membership.py's importer pays for kazoo: a broker without `zookeeper.connect`
never imports client.py or anything that imports kazoo.
"""

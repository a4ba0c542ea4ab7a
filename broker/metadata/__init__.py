"""What the broker knows about topics and partitions, where it is kept, and the one path
by which it changes.

- records.py: every change as a record, named after Kafka's KRaft metadata records.
- cache.py: the MetadataCache handlers read (topics, ids, partition registrations).
- store.py: where the records are kept: LocalMetadataStore (this broker's log dirs and
  one configs file); in a cluster ZooKeeper (broker/zookeeper/store.py).
- publisher.py: the inbox. A change is applied on the event loop, in one place: the
  replica manager makes the logs, the store keeps it, the cache shows it.
"""

"""The state the coordinators keep in their internal topics, and the rules by which a
partition's records replay into it.

The broker's coordinators (broker/groups, broker/transactions) rebuild their state from
`__consumer_offsets` and `__transaction_state` when they become a partition's leader;
the offline audit (spark/audit) replays the same partitions from segment files. Both go
through this package, so one set of rules decides what a record means (a transactional
offset commit waits for its marker, a tombstone removes, a value version this broker
does not know is skipped). It imports only brook.protocol and brook.storage, as Kafka's
group-coordinator and transaction-coordinator modules stand apart from its broker core.

- transaction_metadata.py: a transactional id's state and Kafka's transaction state
  machine.
- transaction_log.py: `__transaction_state` records to and from TransactionMetadata,
  and their replay.
- offsets.py: committed offsets, and the replay of offset commits with the pending
  transactional ones.
- consumer_offsets.py: a `__consumer_offsets` record decoded and handed to its owner
  (offsets to offsets.py, a classic group's metadata as it is).
"""

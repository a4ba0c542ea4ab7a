"""The transaction coordinator: transactional ids, their producer ids and epochs, and
the two-phase end of a transaction.

metadata.py holds one transactional id's state and Kafka's state machine, records.py its
record in `__transaction_state`, shard.py the ids of one partition of that topic (a
shard of the coordinator runtime, broker/coordinator/), markers.py the writing of COMMIT
and ABORT markers to the transaction's partitions, and coordinator.py the service the
APIs call.
"""

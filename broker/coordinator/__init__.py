"""The coordinator runtime: what the group and transaction coordinators share.

A coordinator keeps its state in the partitions of one internal topic
(`__consumer_offsets`, `__transaction_state`). For each partition this broker leads,
the runtime holds one shard: a state machine that replays the partition's records and,
for each request, returns the records to write and the response. The runtime writes the
records through a PartitionWriter and completes the response once they are committed,
loads and unloads a partition's shard when its leadership moves, and fires the shard's
timers on an injected clock. This is the shape of Kafka's coordinator-common runtime
(CoordinatorRuntime, CoordinatorShard, PartitionWriter, CoordinatorLoader,
CoordinatorTimer), so a reader who knows it finds their way.

Modules: records.py (the records and batches a shard sees), partition_writer.py (the
seam to the log), log_writer.py (that seam over the broker's Partition),
in_memory_writer.py (that seam in memory, for fast tests), shard.py (what a coordinator
implements), loader.py (replay of one partition), timer.py / loop_timer.py /
mock_time.py (keyed timers on a clock), coordinator_timer.py (a shard's timers, fired as
write operations), write_errors.py (a failed write as the error Kafka's coordinators
give), internal_topic.py (the topic), runtime.py (all of it per partition).
"""

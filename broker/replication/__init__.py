"""Replication, the follower's side: fetchers that copy what other brokers lead.

fetcher_manager.py (Kafka's ReplicaFetcherManager) gives each partition this broker
follows to the fetcher of its leader; fetcher.py (Kafka's ReplicaFetcherThread, a task
on the broker's loop here) truncates what diverged by OffsetForLeaderEpoch, then
fetches with its broker id, appends what the leader sent and follows its high
watermark. The leader's side (follower progress, the ISR, the high watermark, acks=all)
is the Partition's.
"""

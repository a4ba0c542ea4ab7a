"""The classic consumer-group protocol: the group coordinator and its state.

group.py holds one group's state machine, shard.py the groups of one `__consumer_offsets`
partition (a shard of the coordinator runtime, broker/coordinator/), records.py their
records in Kafka's schemas, and coordinator.py the service the APIs call, which finds a
group's shard and turns failures into the errors Kafka answers.
"""

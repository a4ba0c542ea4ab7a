"""The classic consumer-group protocol: the group coordinator and its state.

group.py holds one group's state machine, coordinator.py owns every group of this
broker and the timers, offsets_store.py persists commits and group metadata in
`__consumer_offsets` with Kafka's record schemas.
"""

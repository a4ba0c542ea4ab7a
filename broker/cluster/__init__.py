"""The cluster's decisions that need no I/O: where replicas go (assignment) and who leads
(leader_election), as Kafka's controller makes them. Pure functions over plain data, so the
controller, the admin APIs and the tools share one answer and tests need no cluster."""

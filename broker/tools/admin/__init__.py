"""Kafka's admin requests as the tools send them, a module per concern, each function
named after the API it sends (create_topics, describe_configs, list_offsets, ...).

Each takes the `wire_client.KafkaCluster` to ask, sends the request where Kafka's
AdminClient sends it (any broker, the controller, a coordinator or a partition's leader)
with the retries that client makes, and returns plain values, with Kafka's error codes
where a resource or partition failed. The message versions are fixed, chosen among
those every Kafka since 3.0 and Brook serve.
"""

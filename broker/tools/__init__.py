"""The operator's command-line tools: brook topics, configs, groups, dump-log, storage-zip.

Each tool is one module with `add_parser(subcommands)` and `run(args) -> exit code`;
broker/cli.py only registers them. The tools that talk to a broker send Kafka's admin
requests through one client, wire_client.KafkaCluster (the requests in admin/), so they
work against any Kafka-compatible broker, not only Brook, and need no client library.
"""

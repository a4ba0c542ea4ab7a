"""The feature flags the broker advertises in ApiVersions (KIP-584), as Kafka 4 does.

A client reads a finalized feature's level to choose how it talks: with
`transaction.version` finalized at 2 (what a new Kafka 4.0 cluster finalizes), Java
producers of 4.0+ use transaction version 2 (Produce v12, TxnOffsetCommit v5, EndTxn v5:
no AddPartitionsToTxn, an epoch bump after every transaction). The broker still decides
per request from its version, so clients that never read features (librdkafka,
kafka-python, aiokafka) keep transaction version 0 with the versions they send.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    min_version: int
    max_version: int
    finalized_level: int


FEATURES = (Feature("transaction.version", 0, 2, finalized_level=2),)

# The epoch of the finalized levels (Kafka: the metadata offset that set them). They
# never change on a Brook broker, so one epoch stands for them.
FINALIZED_FEATURES_EPOCH = 0

# ApiVersions v3 leaves out the supported features whose minimum is 0 (Kafka's
# compatibility rule for clients that took version 0 to mean "disabled").
FIRST_VERSION_LISTING_LEVEL_0 = 4

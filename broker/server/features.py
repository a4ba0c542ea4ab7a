"""The feature flags the broker advertises in ApiVersions (KIP-584), as Kafka 4 does.

A client reads a finalized feature's level to choose how it talks: with
`transaction.version` finalized at 2 (what a new Kafka 4.0 cluster finalizes), Java
producers of 4.0+ use transaction version 2 (Produce v12, TxnOffsetCommit v5, EndTxn v5:
no AddPartitionsToTxn, an epoch bump after every transaction). The broker still decides
per request from its version, so clients that never read features (librdkafka,
kafka-python, aiokafka) keep transaction version 0 with the versions they send.
"""

from __future__ import annotations

from typing import NamedTuple


class Feature(NamedTuple):
    name: str
    min_version: int
    max_version: int
    finalized_level: int


FEATURES = (
    # Share groups (KIP-932) are on in a new Kafka 4.2 cluster: share.version 1.
    Feature("share.version", 0, 1, finalized_level=1),
    Feature("transaction.version", 0, 2, finalized_level=2),
)

# The epoch of the finalized levels (Kafka: the metadata offset that set them). They
# never change on a Brook broker, so one epoch stands for them.
FINALIZED_FEATURES_EPOCH = 0
# Kafka's epoch when no feature is finalized (ApiVersionsResponse's
# UNKNOWN_FINALIZED_FEATURES_EPOCH), as a ZooKeeper-mode broker before 4.0 answers.
UNKNOWN_FINALIZED_FEATURES_EPOCH = -1

# The first release whose brokers advertise transaction.version to clients.
FEATURES_SINCE_MAJOR = 4
# The first release with share groups on (share.version 1 finalized in a new cluster).
SHARE_GROUPS_SINCE = (4, 2)


def features_of(release: str | None) -> tuple[Feature, ...]:
    """The features a broker advertises: Kafka 4's, or none for an emulated release
    before 4.0, so that a Java producer of 4.0+ keeps transaction version 0 as it does
    against such a broker; share.version from 4.2, where share groups became GA."""
    if release is None:
        return FEATURES
    major, minor = (int(part) for part in release.split(".")[:2])
    if major < FEATURES_SINCE_MAJOR:
        return ()
    if (major, minor) < SHARE_GROUPS_SINCE:
        return tuple(f for f in FEATURES if f.name != "share.version")
    return FEATURES


# ApiVersions v3 leaves out the supported features whose minimum is 0 (Kafka's
# compatibility rule for clients that took version 0 to mean "disabled").
FIRST_VERSION_LISTING_LEVEL_0 = 4

"""Share groups (KIP-932): share partitions, their sessions and their persisted state."""

"""Fault injection for tests in any language: errors, latency, dropped connections, a
broker that is down, a stalled disk (issue: the test broker people reach for)."""

from .model import Fault, FaultKind, FaultSpecError
from .registry import FaultRegistry, RequestFaults

__all__ = ["Fault", "FaultKind", "FaultRegistry", "FaultSpecError", "RequestFaults"]

"""Ports: Protocols that adapters implement. One module per port, each owned by one capability.

`domain` never imports adapters; handlers and `serve` wire adapters to these ports.
"""

from forkhorse.ports.clock import Clock, SystemClock
from forkhorse.ports.containers import ContainerPort
from forkhorse.ports.events import EventBus
from forkhorse.ports.git import GitStore, Snapshot
from forkhorse.ports.orchestrator import Orchestrator
from forkhorse.ports.sandbox import QuickSandbox
from forkhorse.ports.store import Store

__all__ = [
    "Clock",
    "ContainerPort",
    "EventBus",
    "GitStore",
    "Orchestrator",
    "QuickSandbox",
    "Snapshot",
    "Store",
    "SystemClock",
]

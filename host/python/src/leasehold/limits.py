"""The caps on what the guest may ask of its host, mirroring the Rust host's
defaults (host/src/engine.rs, ``Limits``). Sizes are bytes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    #: Longest key the guest may use.
    key_bytes: int = 4096
    #: Largest value the guest may write.
    value_bytes: int = 4 << 20
    #: Most entries one scan may ask for, and most keys one get-many.
    scan_entries: int = 4096
    #: Most bytes (keys and values) one scan may hand the guest.
    scan_bytes: int = 16 << 20
    #: Most bytes all of a call's reads together may hand the guest.
    call_read_bytes: int = 64 << 20
    #: Most bytes (keys and values) one call may write.
    call_write_bytes: int = 16 << 20
    #: Linear memory an instance may grow to (wasmtime store limits).
    memory_bytes: int = 64 << 20
    #: Wall-clock budget of one call, in seconds (epoch interruption).
    deadline: float = 5.0
    #: Budget of the consistency check, which walks the whole tenant.
    check_deadline: float = 600.0
    #: Most instances held at once, one per tenant, least recently used
    #: evicted first: a process serving many tenants holds at most this many.
    #: 0 makes a fresh instance for every call, so no guest memory outlives a
    #: call, as the Rust host does.
    cached_instances: int = 32

//! The example backend passes the whole conformance kit: every promise of
//! the storage trait, then the scenario suite through the component.

use leasehold_memory_backend::MemoryBackend;

leasehold_host::conformance_tests!(MemoryBackend::new);

//! The crate's integration tests, in one binary: the sender over real
//! sockets, the engine over the real feed, tenants side by side, and the
//! Standard Webhooks packages of Python and JavaScript as receivers.

mod delivery;
mod durable;
mod harness;
mod isolation;
mod receivers;
mod safety;
mod tls;

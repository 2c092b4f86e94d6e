//! A call's store data: the guest's view of storage, an empty WASI context,
//! the memory cap, and the handle of the export the call runs. It owns what
//! a wasmtime `Store` carries; the storage view is one call's and is
//! replaced for the next when the instance is kept (see `keep`). It must
//! never give the guest a file, a socket, the environment or a clock it
//! could read.

use wasmtime::component::{ComponentNamedList, Func, Lift, Lower, ResourceTable};
use wasmtime::{ResourceLimiter, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::error::{Error, SandboxError};
use crate::view::KvView;

/// One call's store data: storage view, an empty WASI context, memory cap.
pub(crate) struct CallCtx {
    pub(crate) kv: KvView,
    /// Made on first use: the shipped guest links no WASI, and making a
    /// context (clocks, random sources) on every call would cost more than
    /// some calls do.
    pub(crate) wasi: Option<WasiCtx>,
    pub(crate) table: ResourceTable,
    pub(crate) memory_cap: usize,
    /// Whether the instance grew its memory past what it started with: such
    /// an instance is never kept for another call.
    pub(crate) memory_grew: bool,
    /// The linear memory the instance was made with, over all its
    /// memories: what it holds while kept idle.
    pub(crate) memory_bytes: usize,
}

impl WasiView for CallCtx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            // No files, environment, arguments, input or sockets; only the
            // clocks and random source every WASI context has, which the rules
            // never read (time is always an argument).
            ctx: self.wasi.get_or_insert_with(|| WasiCtx::builder().build()),
            table: &mut self.table,
        }
    }
}

/// The export a call runs, on the call's instance.
pub(crate) struct Export {
    pub(crate) func: Func,
}

impl Export {
    /// Calls the export with `params` and answers its one result. Only this
    /// function's types are checked against the component's: loading the
    /// typed handles of every export, as the generated bindings
    /// do, would cost more than many calls do.
    pub(crate) fn call<P, R>(&self, store: &mut Store<CallCtx>, params: P) -> wasmtime::Result<R>
    where
        P: ComponentNamedList + Lower,
        (R,): ComponentNamedList + Lift,
    {
        let func = self.func.typed::<P, (R,)>(&*store)?;
        let (answer,) = func.call(&mut *store, params)?;
        Ok(answer)
    }
}

impl ResourceLimiter for CallCtx {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Instantiation asks from zero; anything after is the guest growing.
        if current > 0 {
            self.memory_grew = true;
        } else {
            self.memory_bytes = self.memory_bytes.saturating_add(desired);
        }
        if desired > self.memory_cap {
            self.kv.fail(Error::Sandbox(SandboxError::Memory {
                cap: self.memory_cap,
            }));
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

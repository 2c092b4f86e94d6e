//! Section 2, the fixed per-call cost of the sandbox: one counter read
//! through the component and natively, and the difference of their p50s.
//! The read must stay the cheapest call there is, so that the difference is
//! the sandbox and not the rules.

use anyhow::{Result, ensure};
use leasehold_host::Durability;

use crate::bench::Bench;
use crate::drivers::{Driver, Kind};
use crate::stats::{Runs, Spread, time_calls, us};
use crate::workload::{reviewer_task, seed, seed_tasks};

impl Bench {
    /// Item 2: `open-count` through the component and natively; the
    /// difference is what the boundary (and, fresh, instantiation) costs per
    /// call.
    pub(crate) fn fixed_cost(&mut self) -> Result<()> {
        let s = self.sizes;
        let path = self.fresh_file();
        seed(&path, |kv| seed_tasks(kv, (0..10).map(reviewer_task)))?;
        let mut product = Vec::new();
        let mut fresh = Vec::new();
        let mut native = Vec::new();
        for _ in 0..s.runs {
            for (kind, out) in [
                (Kind::Product, &mut product),
                (Kind::Fresh, &mut fresh),
                (Kind::Native, &mut native),
            ] {
                let d = Driver::open(kind, &path, Durability::None)?;
                for _ in 0..100 {
                    d.open_count()?;
                }
                out.push(time_calls(s.read_calls * 5, |_| {
                    let n = d.open_count()?;
                    ensure!(n == 10, "open-count answered {n}");
                    Ok(())
                })?);
            }
        }
        let diffs = |runs: &[crate::stats::Run]| -> Vec<f64> {
            runs.iter()
                .zip(&native)
                .map(|(p, n)| p.p50() - n.p50())
                .collect()
        };
        let (fixed, fixed_fresh) = (Spread::of(&diffs(&product)), Spread::of(&diffs(&fresh)));
        let (product, fresh, native) = (Runs(product), Runs(fresh), Runs(native));
        println!("## 2. Fixed per-call cost of the sandbox\n");
        println!(
            "`open-count` (one counter read) on a read snapshot, {} calls per run. The \
             difference of the p50s is what the boundary crossing costs per call on the \
             instance the tenant's last call left (the product as shipped); *fresh*, with a \
             fresh instance per call from the pre-instantiated component (pooling allocator, \
             nothing compiled per call), what instantiation adds.\n",
            s.read_calls * 5
        );
        println!("| | p50 µs | p99 µs | calls/s |");
        println!("| --- | --- | --- | --- |");
        println!(
            "| product | {} | {} | {} |",
            product.p50().us(),
            product.p99().us(),
            product.rate().rate()
        );
        println!(
            "| fresh | {} | {} | {} |",
            fresh.p50().us(),
            fresh.p99().us(),
            fresh.rate().rate()
        );
        println!(
            "| native | {} | {} | {} |",
            native.p50().us(),
            native.p99().us(),
            native.rate().rate()
        );
        println!(
            "| **sandbox cost per call** (product p50 − native p50) | {} | | |",
            fixed.us()
        );
        println!(
            "| **with fresh instances** (fresh p50 − native p50) | {} | | |",
            fixed_fresh.us()
        );
        println!();
        self.target(
            "fixed per-call cost of the sandbox",
            "≤ 4 µs median",
            format!("{} µs", us(fixed.median)),
            fixed.median <= 4.0,
        );
        Ok(())
    }
}

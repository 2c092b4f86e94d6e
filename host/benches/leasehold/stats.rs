//! How a figure is taken and shown: calls timed one at a time, the median,
//! min and max over repeated runs, and the number formats every table
//! prints. Nothing here opens an engine or knows a verb: the sections hand it
//! closures and numbers, so every table is measured and printed the same way.

use std::time::Instant;

use anyhow::Result;

/// Median, min and max of one figure over the runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spread {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
}

impl Spread {
    pub(crate) fn of(xs: &[f64]) -> Spread {
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            min: v.first().copied().unwrap_or(f64::NAN),
            max: v.last().copied().unwrap_or(f64::NAN),
        }
    }

    pub(crate) fn us(&self) -> String {
        format!("{} ({}–{})", us(self.median), us(self.min), us(self.max))
    }

    pub(crate) fn rate(&self) -> String {
        format!(
            "{} ({}–{})",
            rate(self.median),
            rate(self.min),
            rate(self.max)
        )
    }
}

/// Microseconds, with as many decimals as make sense for the size.
pub(crate) fn us(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2}")
    } else if x < 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

/// Calls per second, to three significant figures.
pub(crate) fn rate(x: f64) -> String {
    if x >= 10_000.0 {
        format!("{:.0}k", x / 1000.0)
    } else if x >= 1000.0 {
        format!("{:.1}k", x / 1000.0)
    } else {
        format!("{x:.0}")
    }
}

/// One run: the latency of each call, in microseconds.
pub(crate) struct Run(pub(crate) Vec<f64>);

impl Run {
    pub(crate) fn quantile(&self, q: f64) -> f64 {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            return f64::NAN;
        }
        v[((v.len() - 1) as f64 * q).round() as usize]
    }

    pub(crate) fn p50(&self) -> f64 {
        self.quantile(0.5)
    }

    pub(crate) fn p99(&self) -> f64 {
        self.quantile(0.99)
    }

    pub(crate) fn max(&self) -> f64 {
        self.quantile(1.0)
    }

    /// Calls per second over the whole run.
    pub(crate) fn rate(&self) -> f64 {
        let total: f64 = self.0.iter().sum();
        self.0.len() as f64 / (total / 1e6)
    }
}

/// Figures over repeated runs.
pub(crate) struct Runs(pub(crate) Vec<Run>);

impl Runs {
    pub(crate) fn spread(&self, f: impl Fn(&Run) -> f64) -> Spread {
        Spread::of(&self.0.iter().map(f).collect::<Vec<_>>())
    }
    pub(crate) fn p50(&self) -> Spread {
        self.spread(Run::p50)
    }
    pub(crate) fn p99(&self) -> Spread {
        self.spread(Run::p99)
    }
    pub(crate) fn rate(&self) -> Spread {
        self.spread(Run::rate)
    }
}

/// Times `calls` calls of `f` (which checks its own answer: a comparison or
/// two, nothing beside a call), each alone.
pub(crate) fn time_calls(calls: usize, mut f: impl FnMut(usize) -> Result<()>) -> Result<Run> {
    let mut out = Vec::with_capacity(calls);
    for i in 0..calls {
        let started = Instant::now();
        f(i)?;
        out.push(started.elapsed().as_secs_f64() * 1e6);
    }
    Ok(Run(out))
}

//! A task's reminders and escalation chain on the command line: the flags
//! `task update` reads them from (`--remind-before 1h,15m`, `--escalate-at
//! 0s:leads --escalate-at 4h:directors,vps`, `--expire-after 1d`, and the
//! `--no-…` forms that clear them); how they read for a person is
//! `crate::render`'s. The rules (a due time needed, offsets that fit, a
//! strictly increasing chain) are the engine's; this module only reads
//! them.

use clap::Args;
use leasehold_guest::model::{EscalationStep, StepAction};

use crate::values::parse_duration_ms;

/// The timeline flags of `task update`; each one given replaces the whole
/// list it names, as a document would.
#[derive(Debug, Args)]
pub struct TimelineArgs {
    /// Reminders before the due time, replacing the old ones: durations
    /// such as 1h or 15m, comma-separated or repeated
    #[arg(long, value_name = "DUR", value_delimiter = ',', value_parser = parse_offset, conflicts_with = "no_reminders")]
    remind_before: Option<Vec<u64>>,
    /// Clear the reminders
    #[arg(long)]
    no_reminders: bool,
    /// A step of the escalation chain, AFTER:ROLE[,ROLE…] (AFTER is a
    /// duration past the due time, such as 0s or 4h); repeat for each step,
    /// in order. With --expire-after, replaces the whole chain
    #[arg(long, value_name = "AFTER:ROLES", value_parser = parse_escalate_at, conflicts_with = "no_escalation")]
    escalate_at: Option<Vec<EscalationStep>>,
    /// End the chain by settling the task expired this long past its due
    /// time (after every --escalate-at step)
    #[arg(long, value_name = "DUR", value_parser = parse_offset_or_zero, conflicts_with = "no_escalation")]
    expire_after: Option<u64>,
    /// Clear the escalation chain (the due time leads to --on-expiry again)
    #[arg(long)]
    no_escalation: bool,
}

impl TimelineArgs {
    /// The reminders the flags set, if they set them.
    pub fn remind_before(&self) -> Option<Vec<u64>> {
        if self.no_reminders {
            return Some(Vec::new());
        }
        self.remind_before.clone()
    }

    /// The chain the flags set, if they set it: the `--escalate-at` steps,
    /// then the expiry.
    pub fn escalation(&self) -> Option<Vec<EscalationStep>> {
        if self.no_escalation {
            return Some(Vec::new());
        }
        if self.escalate_at.is_none() && self.expire_after.is_none() {
            return None;
        }
        let mut chain = self.escalate_at.clone().unwrap_or_default();
        if let Some(after) = self.expire_after {
            chain.push(EscalationStep {
                after_due_ms: after,
                action: StepAction::Expire,
            });
        }
        Some(chain)
    }
}

fn offset(text: &str) -> Result<u64, String> {
    let ms = parse_duration_ms(text)?;
    u64::try_from(ms).map_err(|_| format!("{text:?} is too long"))
}

/// A reminder's offset: a duration of at least a millisecond (the engine
/// says so too; refused here so the flag's name is in the message).
fn parse_offset(text: &str) -> Result<u64, String> {
    match offset(text)? {
        0 => Err(format!(
            "{text:?} is no time at all: a reminder comes before the due time"
        )),
        ms => Ok(ms),
    }
}

fn parse_offset_or_zero(text: &str) -> Result<u64, String> {
    offset(text)
}

/// `AFTER:ROLE[,ROLE…]`: a chain step that escalates to the roles.
fn parse_escalate_at(text: &str) -> Result<EscalationStep, String> {
    let (after, roles) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?} is not AFTER:ROLE[,ROLE…], such as 4h:directors"))?;
    let roles: Vec<String> = roles
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_owned)
        .collect();
    if roles.is_empty() {
        return Err(format!("{text:?} names no role to escalate to"));
    }
    Ok(EscalationStep {
        after_due_ms: offset(after)?,
        action: StepAction::Escalate(roles),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_flag_is_after_and_roles() {
        let s = parse_escalate_at("4h:directors, vps").expect("a step");
        assert_eq!(s.after_due_ms, 4 * 3_600_000);
        assert_eq!(
            s.action,
            StepAction::Escalate(vec!["directors".into(), "vps".into()])
        );
        assert!(parse_escalate_at("4h").is_err());
        assert!(parse_escalate_at("4h:").is_err());
        assert!(parse_escalate_at("soon:leads").is_err());
        assert!(parse_offset("0s").is_err());
    }
}

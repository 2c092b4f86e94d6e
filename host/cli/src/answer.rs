//! A command's answer, rendered two ways: sentences and tables for a
//! person, exact JSON for a script. Each command defines its answers beside
//! it, the two renderings side by side; this module owns only the contract
//! and the writing. JSON is the model types as serde writes them
//! (snake_case, times in milliseconds) or a small object around a bare
//! answer; it never carries prose, so it stays stable when the wording
//! changes.

use std::io::Write;

use crate::error::CliError;

/// What one command answers.
pub trait Answer {
    /// The exact JSON, on one line.
    fn json(&self) -> serde_json::Result<String>;

    /// The text for a person: sentences and tables.
    fn human(&self) -> String;

    /// 0, unless the answer itself is a finding a script must notice
    /// (`check`'s discrepancies, a feed position that was trimmed).
    fn exit_code(&self) -> u8 {
        0
    }
}

/// Writes `answer` as JSON or as text, and answers its exit code.
pub fn write(answer: &dyn Answer, json: bool, out: &mut dyn Write) -> Result<u8, CliError> {
    let text = if json {
        let json = answer
            .json()
            .map_err(|e| CliError::Failed(format!("cannot encode the answer: {e}")))?;
        json + "\n"
    } else {
        answer.human()
    };
    out.write_all(text.as_bytes())?;
    Ok(answer.exit_code())
}

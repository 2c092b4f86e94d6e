//! The operator's digest key, read from the file `--digest-key-file`
//! names (`leasehold_host::tenant_keys::DigestKey` says what it holds). It
//! owns reading that file, within a bound; it must never print the key.

use std::io::Read;
use std::path::Path;

use leasehold_host::tenant_keys::DigestKey;

use crate::keys::error::MoveError;

/// The most bytes a key file may hold: a key is a few dozen.
const MAX_KEY_FILE: u64 = 4096;

/// The key in `file`, if one was named.
pub fn read(file: Option<&Path>) -> Result<Option<DigestKey>, MoveError> {
    let Some(file) = file else {
        return Ok(None);
    };
    let name = file.display();
    let mut bytes = Vec::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(MAX_KEY_FILE + 1).read_to_end(&mut bytes))
        .map_err(|source| MoveError::Io {
            what: format!("read the digest key {name}"),
            source,
        })?;
    if bytes.len() as u64 > MAX_KEY_FILE {
        return Err(MoveError::Usage(format!(
            "--digest-key-file {name}: longer than {MAX_KEY_FILE} bytes; a key is a few dozen"
        )));
    }
    DigestKey::from_file_bytes(bytes)
        .map(Some)
        .map_err(|e| MoveError::Usage(format!("--digest-key-file {name}: {e}")))
}

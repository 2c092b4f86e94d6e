//! An input's lines, each read with a bound on its length: a line longer
//! than [`max_line_bytes`] is refused having read only that many bytes of
//! it, so one long line (a damaged file, a hostile server's stream) costs a
//! bounded amount of memory and never the rest of itself. It owns the
//! counting of lines and the optional seal over every byte read; it must
//! never parse a line.

use std::io::{BufRead, Read};

use crate::tenant_keys::bounds::max_line_bytes;
use crate::tenant_keys::digest::Seal;
use crate::tenant_keys::error::KeysError;

/// One line as it was read: its bytes, newline included (the last line of
/// an input may have none).
pub struct Line {
    raw: Vec<u8>,
}

impl Line {
    /// The bytes the line was read as, its newline included: what a seal
    /// is over.
    pub fn raw(&self) -> &[u8] {
        &self.raw
    }

    /// The line without its newline (`\n` or `\r\n`).
    pub fn text(&self) -> &[u8] {
        let text = self.raw.strip_suffix(b"\n").unwrap_or(&self.raw);
        text.strip_suffix(b"\r").unwrap_or(text)
    }
}

/// An input read a line at a time, every line within [`max_line_bytes`].
pub struct LineReader<R> {
    input: R,
    /// The number of the last line read (0 before any).
    line: u64,
    max: usize,
    /// Takes every byte read, once [`LineReader::tap`] starts it.
    tap: Option<Seal>,
}

impl<R: BufRead> LineReader<R> {
    /// Lines of `input`, each at most [`max_line_bytes`].
    pub fn new(input: R) -> LineReader<R> {
        LineReader::bounded(input, max_line_bytes())
    }

    /// Lines of `input`, each at most `max` bytes, newline included.
    pub fn bounded(input: R, max: usize) -> LineReader<R> {
        LineReader {
            input,
            line: 0,
            max,
            tap: None,
        }
    }

    /// The number of the last line read: 0 before the first.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// From the next line on, every byte read goes into `seal` too.
    pub fn tap(&mut self, seal: Seal) {
        self.tap = Some(seal);
    }

    /// The seal over every byte read since [`tap`](Self::tap).
    pub fn tapped(&self) -> Option<&Seal> {
        self.tap.as_ref()
    }

    /// The next line, or `None` at the end of the input. A line longer
    /// than the bound is refused with only the bound's bytes (and one) of
    /// it read.
    pub fn next_line(&mut self) -> Result<Option<Line>, KeysError> {
        let mut raw = Vec::new();
        let read = (&mut self.input)
            .take(self.max as u64 + 1)
            .read_until(b'\n', &mut raw)
            .map_err(KeysError::Io)?;
        if read == 0 {
            return Ok(None);
        }
        self.line += 1;
        if raw.len() > self.max {
            return Err(KeysError::BadLine {
                line: self.line,
                why: format!(
                    "the line is longer than {} bytes, the most a line of the format holds \
                     (the largest key and value the engine takes, in hex); it was not read further",
                    self.max
                ),
            });
        }
        if let Some(seal) = self.tap.as_mut() {
            seal.update(&raw);
        }
        Ok(Some(Line { raw }))
    }

    /// Whether the input has nothing more: the end of the input.
    pub fn at_end(&mut self) -> Result<bool, KeysError> {
        Ok(self.input.fill_buf().map_err(KeysError::Io)?.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gives `len` bytes of `byte` without ever holding them, counting what
    /// was taken.
    struct Endless {
        left: u64,
        byte: u8,
        taken: std::rc::Rc<std::cell::Cell<u64>>,
    }

    impl Read for Endless {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.left as usize);
            buf[..n].fill(self.byte);
            self.left -= n as u64;
            self.taken.set(self.taken.get() + n as u64);
            Ok(n)
        }
    }

    #[test]
    fn lines_come_with_and_without_their_newline_and_are_counted() {
        let mut r = LineReader::new(&b"one\r\ntwo\nthree"[..]);
        let first = r.next_line().expect("read").expect("a line");
        assert_eq!((first.raw(), first.text()), (&b"one\r\n"[..], &b"one"[..]));
        assert_eq!(r.next_line().expect("read").expect("a line").text(), b"two");
        assert!(!r.at_end().expect("peek"));
        let last = r.next_line().expect("read").expect("a line");
        assert_eq!((last.raw(), last.text()), (&b"three"[..], &b"three"[..]));
        assert_eq!(r.line(), 3);
        assert!(r.next_line().expect("read").is_none());
        assert!(r.at_end().expect("peek"));
    }

    /// A line of a gibibyte is refused once the bound is passed, having
    /// read no more than the bound and the reader's buffer.
    #[test]
    fn a_gibibyte_line_is_refused_having_read_only_the_bound() {
        let taken = std::rc::Rc::new(std::cell::Cell::new(0));
        let endless = Endless {
            left: 1 << 30,
            byte: b'0',
            taken: taken.clone(),
        };
        let input = std::io::BufReader::new(b"{\"a\":1}\n".chain(endless));
        let mut r = LineReader::new(input);
        assert_eq!(
            r.next_line().expect("read").expect("a line").text(),
            b"{\"a\":1}"
        );
        match r.next_line() {
            Err(KeysError::BadLine { line: 2, why }) => {
                assert!(why.contains("longer than"), "{why}")
            }
            Err(other) => panic!("expected a refusal, got {other:?}"),
            Ok(_) => panic!("expected a refusal, got a line"),
        }
        let bound = max_line_bytes() as u64;
        assert!(
            taken.get() <= bound + 64 * 1024,
            "read {} bytes for a bound of {bound}",
            taken.get()
        );
    }

    #[test]
    fn a_line_of_exactly_the_bound_is_taken_and_one_more_byte_is_not() {
        let mut text = vec![b'x'; 9];
        text.push(b'\n');
        let mut r = LineReader::bounded(&text[..], 10);
        assert_eq!(
            r.next_line().expect("read").expect("a line").text().len(),
            9
        );
        let mut longer = vec![b'x'; 10];
        longer.push(b'\n');
        let mut r = LineReader::bounded(&longer[..], 10);
        assert!(matches!(
            r.next_line(),
            Err(KeysError::BadLine { line: 1, .. })
        ));
    }

    #[test]
    fn a_tap_seals_every_byte_read_after_it() {
        let key = crate::tenant_keys::digest::DigestKey::from_file_bytes(vec![7; 32]).expect("key");
        let mut r = LineReader::new(&b"a\nb\nc"[..]);
        r.next_line().expect("read");
        r.tap(Seal::new(&key));
        while r.next_line().expect("read").is_some() {}
        let mut seal = Seal::new(&key);
        seal.update(b"b\nc");
        assert_eq!(r.tapped().map(Seal::hex), Some(seal.hex()));
    }
}

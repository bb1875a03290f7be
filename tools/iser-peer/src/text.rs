//! Login and Text `key=value` lists (RFC 7143 §6.1), as the test target
//! reads the initiator's keys and writes its answers. The initiator side
//! never parses them: iscsid negotiates the keys and libiscsi applies them
//! (the module only polices the values it is handed, `proto::login_keys`).

/// A malformed key list or a full answer buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextError {
    /// Missing `=`, bad key name, missing NUL.
    Syntax,
    /// The answer does not fit the buffer.
    Full,
}

/// `true` if `key` is a syntactically valid key name: 1..=63 characters
/// from `[A-Za-z0-9.+@_-]`, starting with a capital letter.
fn key_name_valid(key: &[u8]) -> bool {
    match key.first() {
        Some(c) if c.is_ascii_uppercase() => {}
        _ => return false,
    }
    key.len() <= 63
        && key
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'+' | b'@' | b'_'))
}

/// Iterator over the `key=value` pairs of a text data segment. Yields
/// `Err(Syntax)` once and then stops on a malformed pair; trailing NUL
/// bytes (padding) are accepted.
pub struct Pairs<'a> {
    rest: &'a [u8],
}

/// Iterates over the pairs of `text`.
pub fn pairs(text: &[u8]) -> Pairs<'_> {
    Pairs { rest: text }
}

impl<'a> Iterator for Pairs<'a> {
    type Item = Result<(&'a [u8], &'a [u8]), TextError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.iter().all(|&b| b == 0) {
            self.rest = &[];
            return None;
        }
        let text = self.rest;
        self.rest = &[];
        let Some(nul) = text.iter().position(|&b| b == 0) else {
            return Some(Err(TextError::Syntax));
        };
        let (entry, rest) = (&text[..nul], &text[nul + 1..]);
        let Some(eq) = entry.iter().position(|&b| b == b'=') else {
            return Some(Err(TextError::Syntax));
        };
        let (key, value) = (&entry[..eq], &entry[eq + 1..]);
        if !key_name_valid(key) {
            return Some(Err(TextError::Syntax));
        }
        self.rest = rest;
        Some(Ok((key, value)))
    }
}

/// Writes `key=value\0` pairs into a buffer.
pub struct TextWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> TextWriter<'a> {
    /// Starts writing at the beginning of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        TextWriter { buf, len: 0 }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Appends `key=value\0`; nothing is written if it does not fit.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<(), TextError> {
        if !key_name_valid(key) || value.contains(&0) {
            return Err(TextError::Syntax);
        }
        let end = self.len + key.len() + value.len() + 2;
        let dst = self.buf.get_mut(self.len..end).ok_or(TextError::Full)?;
        for (d, s) in dst
            .iter_mut()
            .zip(key.iter().chain(b"=").chain(value).chain(b"\0"))
        {
            *d = *s;
        }
        self.len = end;
        Ok(())
    }
}

/// Parses a numerical value (RFC 7143 §5.1): decimal or `0x` hex, up to
/// 2^32-1.
pub fn parse_number(v: &[u8]) -> Option<u32> {
    let (digits, radix) = match v {
        [b'0', b'x' | b'X', rest @ ..] => (rest, 16u32),
        _ => (v, 10u32),
    };
    if digits.is_empty() {
        return None;
    }
    let mut acc: u32 = 0;
    for &c in digits {
        acc = acc
            .checked_mul(radix)?
            .checked_add((c as char).to_digit(radix)?)?;
    }
    Some(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_writer_round_trip() {
        let mut out = [0u8; 64];
        let mut w = TextWriter::new(&mut out);
        w.push(b"MaxBurstLength", b"262144")
            .expect("a valid key that fits the buffer");
        w.push(b"HeaderDigest", b"None")
            .expect("a valid key that fits the buffer");
        assert_eq!(w.push(b"bad", b"x"), Err(TextError::Syntax));
        let n = w.len();
        let text = &out[..n];
        let got: Vec<_> = pairs(text).collect();
        assert_eq!(
            got,
            vec![
                Ok((&b"MaxBurstLength"[..], &b"262144"[..])),
                Ok((&b"HeaderDigest"[..], &b"None"[..]))
            ]
        );
        assert_eq!(pairs(b"NoEquals\0").next(), Some(Err(TextError::Syntax)));
        assert_eq!(parse_number(b"0x10"), Some(16));
        assert_eq!(parse_number(b"4294967296"), None);
    }
}

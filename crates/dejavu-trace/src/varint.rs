//! LEB128 varints and zigzag signed integers, the building blocks of a data block.

/// Appends `v` as an unsigned LEB128 varint.
#[inline]
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-encoded (small magnitudes, either sign, stay short).
#[inline]
pub fn put_i64(out: &mut Vec<u8>, v: i64) {
    put_u64(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// A cursor over a decompressed block. Every getter fails (returns `None`) instead of
/// reading past the end, so a corrupt block can never cause a panic.
#[derive(Debug)]
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    /// A cursor at `pos` in `buf`.
    pub fn at(buf: &'a [u8], pos: usize) -> Self {
        Cursor { buf, pos }
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Whether everything was consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// One byte.
    #[inline]
    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// An unsigned varint (at most 10 bytes; longer encodings are corrupt).
    #[inline(always)]
    pub fn u64(&mut self) -> Option<u64> {
        // Fast paths: one and two bytes, the common cases for deltas, ids and flags. The
        // general loop stays out of line so this inlines into every decoder.
        let b0 = *self.buf.get(self.pos)?;
        if b0 < 0x80 {
            self.pos += 1;
            return Some(b0 as u64);
        }
        if let Some(&b1) = self.buf.get(self.pos + 1) {
            if b1 < 0x80 {
                self.pos += 2;
                return Some((b0 & 0x7f) as u64 | (b1 as u64) << 7);
            }
        }
        self.u64_slow()
    }

    #[inline(never)]
    fn u64_slow(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        let mut shift = 0u32;
        loop {
            let b = *self.buf.get(self.pos)?;
            self.pos += 1;
            if shift == 63 && b > 1 {
                return None;
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return Some(v);
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
    }

    /// A zigzag signed varint.
    #[inline]
    pub fn i64(&mut self) -> Option<i64> {
        let v = self.u64()?;
        Some(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    /// A varint that must fit in u32.
    #[inline]
    pub fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.u64()?).ok()
    }

    /// A zigzag varint that must fit in i32.
    #[inline]
    pub fn i32(&mut self) -> Option<i32> {
        i32::try_from(self.i64()?).ok()
    }

    /// `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_edge_values() {
        let us = [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX];
        let is = [0i64, -1, 1, -64, 64, i64::MIN, i64::MAX, -4095];
        let mut buf = Vec::new();
        for &u in &us {
            put_u64(&mut buf, u);
        }
        for &i in &is {
            put_i64(&mut buf, i);
        }
        let mut c = Cursor::new(&buf);
        for &u in &us {
            assert_eq!(c.u64(), Some(u));
        }
        for &i in &is {
            assert_eq!(c.i64(), Some(i));
        }
        assert!(c.is_empty());
        assert_eq!(c.u64(), None);
    }

    #[test]
    fn overlong_varint_is_rejected_not_wrapped() {
        let buf = [0xffu8; 11];
        assert_eq!(Cursor::new(&buf).u64(), None);
        let buf = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(Cursor::new(&buf).u64(), None);
    }
}

//! Masking what varies in a line of output (numbers, hex ids, UUIDs, timestamps, month
//! and weekday names, blank runs), and the fingerprint of a write built on it: two writes
//! of the same template ("request 41 ok", "request 42 ok") have the same fingerprint. The
//! capture backends fingerprint every write; the repeated-output detector masks lines
//! with the same rules.

/// Bytes of a write that its fingerprint covers (the first ones).
pub const FINGERPRINT_BYTES: usize = 256;

/// The fingerprint of a write of `data` (at most its first [`FINGERPRINT_BYTES`]): a 64-bit
/// xxh3 hash of the bytes masked with [`mask`], whose lowest bit says whether they read as
/// a message ([`is_message`]). Stable across builds and machines (the trace stores it).
pub fn fingerprint(data: &[u8]) -> u64 {
    let data = &data[..data.len().min(FINGERPRINT_BYTES)];
    let mut out = Vec::with_capacity(FINGERPRINT_BYTES);
    let letters = mask(data, &mut out);
    let text = !data
        .iter()
        .any(|&b| b < b' ' && !matches!(b, b'\n' | b'\r' | b'\t' | 0x1b));
    let message = text && letters >= MESSAGE_LETTERS;
    (xxhash_rust::xxh3::xxh3_64(&out) & !1) | message as u64
}

/// Letters a masked line must keep to be a message rather than data (numbers, progress
/// dots, CSV rows of numbers).
pub const MESSAGE_LETTERS: u32 = 3;

/// Whether a write with this fingerprint read as a message: text (no control bytes but
/// tab, line ends and escape sequences) with at least [`MESSAGE_LETTERS`] letters kept
/// after masking. Binary data and rows of numbers are not messages.
pub fn is_message(fingerprint: u64) -> bool {
    fingerprint & 1 == 1
}

/// Markers for masked tokens: bytes that never appear in text a program means as a message,
/// so a masked line cannot collide with a literal one.
const NUM: u8 = 1;
const HEX: u8 = 2;
const UUID: u8 = 3;
const DATE: u8 = 4;

/// Masks `line` into `out` (numbers, hex runs >= 8, 0x literals, UUIDs, month and weekday
/// names, blank runs), and returns how many letters were kept literally.
pub fn mask(line: &[u8], out: &mut Vec<u8>) -> u32 {
    out.clear();
    let n = line.len();
    let mut letters = 0;
    let mut i = 0;
    let mut blank = false;
    while i < n {
        let c = line[i];
        if c == b' ' || c == b'\t' {
            // Column padding differs with the width of a number ("May  1" / "May 10").
            if !blank {
                out.push(b' ');
            }
            blank = true;
            i += 1;
            continue;
        }
        blank = false;
        if !c.is_ascii_alphanumeric() {
            out.push(c);
            i += 1;
            continue;
        }
        if is_uuid(&line[i..]) {
            out.push(UUID);
            i += 36;
            continue;
        }
        let start = i;
        while i < n && line[i].is_ascii_alphanumeric() {
            i += 1;
        }
        letters += token(&line[start..i], out);
    }
    letters
}

/// One alphanumeric token; returns the letters kept.
fn token(t: &[u8], out: &mut Vec<u8>) -> u32 {
    // One pass to classify, then at most one more to copy.
    let (mut digits, mut hex) = (0usize, 0usize);
    for &b in t {
        if b.is_ascii_digit() {
            digits += 1;
            hex += 1;
        } else if matches!(b | 0x20, b'a'..=b'f') {
            hex += 1;
        }
    }
    let n = t.len();
    if digits == n {
        out.push(NUM);
        return 0;
    }
    let literal_0x = n > 2 && t[0] == b'0' && (t[1] | 0x20) == b'x' && hex == n - 1;
    if literal_0x || (n >= 8 && hex == n) {
        out.push(HEX);
        return 0;
    }
    if digits == 0 && is_date_word(t) {
        out.push(DATE);
        return 0;
    }
    if digits == 0 {
        out.extend_from_slice(t);
        return n as u32;
    }
    // Words with digits in them ("req42", "01T12", "5ms"): each digit run is a number.
    let mut in_num = false;
    for &b in t {
        if b.is_ascii_digit() {
            if !in_num {
                out.push(NUM);
            }
            in_num = true;
        } else {
            in_num = false;
            out.push(b);
        }
    }
    (n - digits) as u32
}

fn is_uuid(b: &[u8]) -> bool {
    if b.len() < 36 || b.get(36).is_some_and(|c| c.is_ascii_alphanumeric()) {
        return false;
    }
    b[..36].iter().enumerate().all(|(i, c)| match i {
        8 | 13 | 18 | 23 => *c == b'-',
        _ => c.is_ascii_hexdigit(),
    })
}

/// English month and weekday names, abbreviated or not (any case).
fn is_date_word(t: &[u8]) -> bool {
    if !(3..=9).contains(&t.len()) {
        return false;
    }
    let mut low = [0u8; 9];
    for (d, s) in low.iter_mut().zip(t) {
        *d = s.to_ascii_lowercase();
    }
    matches!(
        &low[..t.len()],
        b"jan"
            | b"feb"
            | b"mar"
            | b"apr"
            | b"may"
            | b"jun"
            | b"jul"
            | b"aug"
            | b"sep"
            | b"oct"
            | b"nov"
            | b"dec"
            | b"january"
            | b"february"
            | b"march"
            | b"april"
            | b"june"
            | b"july"
            | b"august"
            | b"september"
            | b"october"
            | b"november"
            | b"december"
            | b"mon"
            | b"tue"
            | b"wed"
            | b"thu"
            | b"fri"
            | b"sat"
            | b"sun"
            | b"monday"
            | b"tuesday"
            | b"wednesday"
            | b"thursday"
            | b"friday"
            | b"saturday"
            | b"sunday"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_template_has_the_same_fingerprint() {
        assert_eq!(
            fingerprint(b"request 41 ok\n"),
            fingerprint(b"request 42 ok\n")
        );
        assert_eq!(
            fingerprint(b"2024-05-01T12:34:56Z warn: retry 3\n"),
            fingerprint(b"2025-12-31T01:02:03Z warn: retry 9\n")
        );
        assert_ne!(
            fingerprint(b"request 41 ok\n"),
            fingerprint(b"request 41 failed\n")
        );
        // Pinned: the trace stores it, so it must not change between builds.
        assert_eq!(fingerprint(b""), xxhash_rust::xxh3::xxh3_64(b"") & !1);
        assert!(is_message(fingerprint(b"request 41 ok\n")));
        assert!(!is_message(fingerprint(b"41,42,43\n")), "numbers are data");
        assert!(!is_message(fingerprint(b"\x00\x01binary header\x02")));
    }
}

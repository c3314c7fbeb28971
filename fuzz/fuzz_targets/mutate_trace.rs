//! Fuzz target: mutations of valid traces that get past the checksums.
//!
//! Start it from the seed traces in ../seeds (valid traces, most with uncompressed
//! blocks). Before reading, the target walks the block structure of the mutated input and
//! rewrites each complete block's CRC, so a mutation of a payload reaches the string,
//! stat and record decoders instead of dying at the checksum as almost all random flips
//! of a real trace would.

#![no_main]

use libfuzzer_sys::fuzz_target;

const FILE_HEADER: usize = 16;
const BLOCK_HEADER: usize = 20;

fuzz_target!(|data: &[u8]| {
    let mut buf = data.to_vec();
    fix_checksums(&mut buf);
    read_all(&buf);
});

fn fix_checksums(buf: &mut [u8]) {
    let mut at = FILE_HEADER;
    while at + BLOCK_HEADER <= buf.len() {
        let len =
            u32::from_le_bytes([buf[at + 8], buf[at + 9], buf[at + 10], buf[at + 11]]) as usize;
        let Some(end) = (at + BLOCK_HEADER)
            .checked_add(len)
            .filter(|&e| e <= buf.len())
        else {
            return; // a cut-off last block: leave it for the reader to report
        };
        let mut h = crc32fast::Hasher::new();
        h.update(&buf[at + 4..at + 16]);
        h.update(&buf[at + BLOCK_HEADER..end]);
        buf[at + 16..at + 20].copy_from_slice(&h.finalize().to_le_bytes());
        at = end;
    }
}

fn read_all(data: &[u8]) {
    let Ok(mut r) = dejavu_trace::TraceReader::new(data) else {
        return;
    };
    loop {
        match r.next_record() {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                assert!(
                    e.to_string().contains("offset"),
                    "an error without an offset: {e}"
                );
                return;
            }
        }
    }
    if let Some(t) = r.truncation() {
        assert_eq!(t.valid_bytes + t.lost_bytes, data.len() as u64, "{t:?}");
    }
}

//! Fuzz target: arbitrary bytes as a trace. The reader must never panic, and what it
//! reports must be consistent (a cut-off trace accounts for every input byte).

#![no_main]

use dejavu_trace::TraceReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    read_all(data);
});

fn read_all(data: &[u8]) {
    let Ok(mut r) = TraceReader::new(data) else {
        return;
    };
    let mut n = 0u64;
    loop {
        match r.next_record() {
            Ok(Some(rec)) => {
                n += 1;
                // Ids in records were checked by the reader: trace-wide ones must be
                // defined (block-local ones are checked against their block, which the
                // public API does not expose).
                let ids = match rec {
                    dejavu_trace::Record::Syscall(s) => [s.path, s.path2, s.payload],
                    // A mapping's strings are trace strings, never block-local.
                    dejavu_trace::Record::Mapping(m) => {
                        assert!([m.path, m.build_id].iter().flatten().all(|id| !id.is_local()));
                        [m.path, m.build_id, None]
                    }
                    _ => [None; 3],
                };
                for id in ids.into_iter().flatten() {
                    assert!(
                        id.is_local() || (id.0 as usize) < r.strings().len(),
                        "unchecked string id {id:?}"
                    );
                }
            }
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
    assert_eq!(r.records_read(), n);
    match (r.end(), r.truncation()) {
        (Some(_), None) => {}
        (None, Some(t)) => assert_eq!(t.valid_bytes + t.lost_bytes, data.len() as u64, "{t:?}"),
        (end, t) => panic!("a trace must end either with its end block or cut off: {end:?} {t:?}"),
    }
}

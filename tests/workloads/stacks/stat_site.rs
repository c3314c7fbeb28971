//! stat_site.rs: std::fs::metadata of one file from a known line of a named function
//! called from main (crates/dejavu/tests/stacks_native.rs compiles it with `rustc -g`).
//!
//! usage: stat_site_rs FILE [N]

#[inline(never)]
fn probe_config(path: &str) -> u64 {
    let meta = std::fs::metadata(path); // STAT_LINE
    meta.map(|m| m.len()).unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: stat_site_rs FILE [N]");
        std::process::exit(2);
    };
    let n: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let mut sum = 0;
    for _ in 0..n {
        sum += probe_config(path); // CALL_LINE
    }
    println!("stat_site_rs: {n} stats, size sum {sum}");
}

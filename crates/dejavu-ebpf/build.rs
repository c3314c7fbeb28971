//! Compiles the kernel half (bpf/dejavu.bpf.c) with clang against libbpf's headers, and
//! sets `cfg(dejavu_bpf)` when it built. Without clang or libbpf's headers (or with
//! DEJAVU_NO_BPF=1) dejavu still builds, with the ptrace backend only, and says so here
//! and whenever --backend ebpf is asked for. scripts/setup installs both (apt: clang,
//! libbpf-dev).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(dejavu_bpf)");
    println!("cargo:rerun-if-changed=bpf/dejavu.bpf.c");
    println!("cargo:rerun-if-changed=bpf/types.h");
    for v in ["DEJAVU_NO_BPF", "DEJAVU_CLANG", "DEJAVU_LIBBPF_INCLUDE"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    match build() {
        Ok(()) => println!("cargo:rustc-cfg=dejavu_bpf"),
        Err(why) => {
            println!(
                "cargo:warning=dejavu is built without its eBPF backend ({why}); \
                 --backend ptrace works. scripts/setup installs clang and libbpf-dev."
            );
            // What installing them adds: cargo looks again at every build while one of these
            // is missing (a path that does not exist counts as changed), so a build after
            // scripts/setup has the backend without a `cargo clean`.
            println!(
                "cargo:rerun-if-changed={}",
                libbpf_include().join("bpf/bpf_helpers.h").display()
            );
            for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
                println!("cargo:rerun-if-changed={}", dir.join("clang").display());
            }
            println!("cargo:rerun-if-env-changed=PATH");
        }
    }
}

/// Where libbpf's headers are looked for (`bpf/bpf_helpers.h` under it).
fn libbpf_include() -> PathBuf {
    std::env::var_os("DEJAVU_LIBBPF_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/include"))
}

fn build() -> Result<(), String> {
    if std::env::var_os("DEJAVU_NO_BPF").is_some_and(|v| !v.is_empty() && v != "0") {
        return Err("DEJAVU_NO_BPF is set".into());
    }
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if arch != "x86_64" {
        return Err(format!(
            "the BPF program reads x86_64 registers; this is {arch}"
        ));
    }
    let clang = find_clang().ok_or("clang not found (set DEJAVU_CLANG to use another)")?;
    let include = libbpf_include();
    if !include.join("bpf/bpf_helpers.h").exists() {
        return Err(format!(
            "libbpf's headers not found ({}/bpf/bpf_helpers.h; set DEJAVU_LIBBPF_INCLUDE)",
            include.display()
        ));
    }
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR not set")?).join("dejavu.bpf.o");
    let src = Path::new("bpf/dejavu.bpf.c");
    let mut cmd = Command::new(&clang);
    cmd.args([
        "-O2",
        "-g",
        "-Wall",
        "-Werror",
        "-target",
        "bpf",
        "-D__TARGET_ARCH_x86",
    ])
    .arg("-I")
    .arg(&include)
    // asm/types.h, which linux/types.h includes, lives in the multiarch directory.
    .arg("-I/usr/include/x86_64-linux-gnu")
    .arg("-c")
    .arg(src)
    .arg("-o")
    .arg(&out);
    let res = cmd
        .output()
        .map_err(|e| format!("running {}: {e}", clang.display()))?;
    if !res.status.success() {
        let err = String::from_utf8_lossy(&res.stderr);
        let first = err
            .lines()
            .find(|l| l.contains("error"))
            .unwrap_or("failed");
        return Err(format!(
            "{} could not compile the BPF program: {first}",
            clang.display()
        ));
    }
    Ok(())
}

fn find_clang() -> Option<PathBuf> {
    let mut names: Vec<String> = Vec::new();
    if let Some(c) = std::env::var_os("DEJAVU_CLANG") {
        return Some(PathBuf::from(c));
    }
    names.push("clang".into());
    names.extend((14..=21).rev().map(|v| format!("clang-{v}")));
    names.into_iter().map(PathBuf::from).find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

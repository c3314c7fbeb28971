//! Lexical path handling: joining a relative path to its base directory and removing `.`
//! components and repeated slashes. `..` is kept: with symbolic links it cannot be
//! resolved without the file system (docs/trace-format.md, "Paths").

/// Normalises `path` lexically into `out` (cleared first): repeated slashes and `.`
/// components go, `..` stays, a trailing slash goes (except for `/` itself).
pub fn normalize_into(path: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let absolute = path.first() == Some(&b'/');
    if absolute {
        out.push(b'/');
    }
    for comp in path.split(|&c| c == b'/') {
        if comp.is_empty() || comp == b"." {
            continue;
        }
        if out.len() > 1 || (!absolute && !out.is_empty()) {
            out.push(b'/');
        }
        out.extend_from_slice(comp);
    }
    if out.is_empty() {
        // "." or "" relative: the directory itself.
        out.push(b'.');
    }
}

/// `base` joined with `rel` and normalised. `base` is expected to be absolute.
pub fn join(base: &[u8], rel: &[u8]) -> Vec<u8> {
    let mut joined = Vec::with_capacity(base.len() + 1 + rel.len());
    joined.extend_from_slice(base);
    joined.push(b'/');
    joined.extend_from_slice(rel);
    let mut out = Vec::with_capacity(joined.len());
    normalize_into(&joined, &mut out);
    out
}

/// `path` normalised.
pub fn normalize(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    normalize_into(path, &mut out);
    out
}

/// Is `path` absolute and already in normal form (so it can be used without copying)?
pub fn is_normal(path: &[u8]) -> bool {
    if path.first() != Some(&b'/') {
        return false;
    }
    if path.len() == 1 {
        return true;
    }
    if path.last() == Some(&b'/') {
        return false;
    }
    path[1..]
        .split(|&c| c == b'/')
        .all(|c| !c.is_empty() && c != b".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(p: &str) -> String {
        String::from_utf8(normalize(p.as_bytes())).expect("valid test input")
    }

    #[test]
    fn removes_dots_and_double_slashes_keeps_dotdot() {
        assert_eq!(n("/a//b/./c/"), "/a/b/c");
        assert_eq!(n("/a/../b"), "/a/../b");
        assert_eq!(n("//"), "/");
        assert_eq!(n("/."), "/");
        assert_eq!(n("./x/./y"), "x/y");
        assert_eq!(n("."), ".");
        assert_eq!(n("../x"), "../x");
    }

    #[test]
    fn joins_relative_paths() {
        assert_eq!(
            join(b"/tmp/w", b"./sub/../sub//x"),
            b"/tmp/w/sub/../sub/x".to_vec()
        );
        assert_eq!(join(b"/", b"etc"), b"/etc".to_vec());
        assert_eq!(join(b"/tmp", b"."), b"/tmp".to_vec());
        assert_eq!(join(b"/tmp", b""), b"/tmp".to_vec());
    }

    #[test]
    fn normal_form_check_agrees_with_normalize() {
        for p in [
            "/", "/a/b", "/a//b", "/a/./b", "/a/", "a/b", "/a/../b", "/.",
        ] {
            let absolute = p.starts_with('/');
            assert_eq!(is_normal(p.as_bytes()), absolute && n(p) == p, "{p}");
        }
    }
}

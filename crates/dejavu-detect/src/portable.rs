//! Paths in a finding's key, spelled so that the key is the same on another machine or
//! checkout: a budget made with `dejavu check --update` on a laptop has to match the
//! findings of the same code in CI, and `dejavu diff` has to match a fix built in another
//! worktree. A file inside a package folder is named from that folder
//! (`site-packages/uvicorn/main.py`, `node_modules/express/lib/router/index.js`), one of
//! the language's standard library from its `lib/pythonX.Y/`, one under the directory
//! the recording started in relative to it (`lib/config.js`); any other stays as
//! recorded (`/usr/include/...`, a shared library's name).

use std::borrow::Cow;

/// Package folders, each named from its last occurrence in a path with what follows it.
/// `registry/src/` and `git/checkouts/` are cargo's (under any CARGO_HOME), `pkg/mod/` Go's
/// module cache (under any GOPATH).
const FOLDERS: [&str; 6] = [
    "/node_modules/",
    "/site-packages/",
    "/dist-packages/",
    "/pkg/mod/",
    "/registry/src/",
    "/git/checkouts/",
];

/// `file` as a finding's key spells it; `root` is the directory the recording started in
/// (None when unknown: an attached recording, an import).
pub fn file<'a>(file: &'a str, root: Option<&str>) -> &'a str {
    if !file.starts_with('/') {
        return file;
    }
    // The folder that starts last: `.../site-packages/x/node_modules/y.js` is y's.
    let start = FOLDERS
        .iter()
        .filter_map(|f| file.rfind(f).map(|i| i + 1))
        .max();
    if let Some(i) = start.or_else(|| python_lib(file)) {
        return &file[i..];
    }
    if let Some(root) = root
        .map(|r| r.trim_end_matches('/'))
        .filter(|r| !r.is_empty())
    {
        if let Some(rest) = file.strip_prefix(root).and_then(|r| r.strip_prefix('/')) {
            if !rest.is_empty() {
                return rest;
            }
        }
    }
    file
}

/// Where `lib/pythonX.Y/` starts in `file` (the standard library of any installation:
/// pyenv's, the distribution's, a venv's base).
fn python_lib(file: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = file[from..].find("/lib/python") {
        let at = from + i + 1;
        let rest = &file[at + "lib/python".len()..];
        let ver = rest.split('/').next().unwrap_or("");
        let ok = rest.len() > ver.len()
            && ver
                .split_once('.')
                .is_some_and(|(a, b)| num(a) && num(b.trim_end_matches('t')));
        if ok {
            return Some(at);
        }
        from = at;
    }
    None
}

fn num(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())
}

/// A path pattern of a finding without a call site (`/srv/app/conf/*.json`,
/// `walk:/srv/app/static`), spelled as [`file`] spells a path.
pub fn pattern<'a>(pattern: &'a str, root: Option<&str>) -> Cow<'a, str> {
    if let Some(p) = pattern.strip_prefix("walk:") {
        let f = file(p, root);
        return if f.len() == p.len() {
            Cow::Borrowed(pattern)
        } else {
            Cow::Owned(format!("walk:{f}"))
        };
    }
    Cow::Borrowed(file(pattern, root))
}

/// What a finding a detector makes itself is about (a command line, a log file and a
/// line's template), with each word that is an absolute path spelled as [`file`] spells
/// it: `/home/a/proj/node_modules/.bin/tsc -p .` -> `node_modules/.bin/tsc -p .`.
pub fn words<'a>(text: &'a str, root: Option<&str>) -> Cow<'a, str> {
    if !text.contains('/') {
        return Cow::Borrowed(text);
    }
    let out: Vec<&str> = text.split(' ').map(|w| file(w, root)).collect();
    if out.iter().map(|w| w.len() + 1).sum::<usize>() == text.len() + 1 {
        return Cow::Borrowed(text);
    }
    Cow::Owned(out.join(" "))
}

/// Whether a key's site `entry` (`function@file`, as a budget names it, perhaps from an
/// older build that kept absolute paths) names the same site as `site` (this build's):
/// the same function, and `entry`'s file is `site`'s or ends with `/` and it.
pub fn same_site(entry: &str, site: &str) -> bool {
    if entry == site {
        return true;
    }
    let (Some((ef, efile)), Some((sf, sfile))) = (entry.split_once('@'), site.split_once('@'))
    else {
        return false;
    };
    ef == sf
        && efile.len() > sfile.len()
        && efile.ends_with(sfile)
        && efile.as_bytes()[efile.len() - sfile.len() - 1] == b'/'
}

/// Whether finding key `entry` (a budget's, perhaps written by an older build that kept
/// absolute paths) names finding `key` of this build: the same program, detector, owner
/// and what follows the site, and a site [`same_site`] matches (a path pattern's path by
/// the same rule).
pub fn same_key(entry: &str, key: &str) -> bool {
    let e: Vec<&str> = entry.splitn(5, '|').collect();
    let k: Vec<&str> = key.splitn(5, '|').collect();
    if e.len() < 4 || e.len() != k.len() || e[..3] != k[..3] || e.get(4) != k.get(4) {
        return false;
    }
    match (e[3].strip_prefix("path:"), k[3].strip_prefix("path:")) {
        (Some(ep), Some(kp)) => {
            let (ep, kp) = match (ep.strip_prefix("walk:"), kp.strip_prefix("walk:")) {
                (Some(a), Some(b)) => (a, b),
                _ => (ep, kp),
            };
            ep == kp
                || (ep.ends_with(kp)
                    && ep.as_bytes().get(ep.len() - kp.len() - 1) == Some(&b'/')
                    && ep.len() > kp.len())
        }
        (None, None) => same_site(e[3], k[3]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_folders_name_their_files_from_the_folder() {
        let root = Some("/home/a/proj");
        for (path, want) in [
            (
                "/home/a/proj/.venv/lib/python3.11/site-packages/uvicorn/main.py",
                "site-packages/uvicorn/main.py",
            ),
            (
                "/usr/lib/python3/dist-packages/apt/cache.py",
                "dist-packages/apt/cache.py",
            ),
            (
                "/home/a/proj/node_modules/.pnpm/send@1.2.0/node_modules/send/index.js",
                "node_modules/send/index.js",
            ),
            (
                "/root/.npm/_npx/1b2c/node_modules/vite/dist/node/chunks/dep.js",
                "node_modules/vite/dist/node/chunks/dep.js",
            ),
            (
                "/root/go/pkg/mod/github.com/itchyny/gojq@v0.12.17/cli/cli.go",
                "pkg/mod/github.com/itchyny/gojq@v0.12.17/cli/cli.go",
            ),
            (
                "/usr/local/cargo/registry/src/index.crates.io-6f17d22bba15001f/serde-1.0.1/src/de.rs",
                "registry/src/index.crates.io-6f17d22bba15001f/serde-1.0.1/src/de.rs",
            ),
            (
                "/root/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py",
                "lib/python3.11/json/decoder.py",
            ),
            (
                "/usr/lib/python3.13t/json/decoder.py",
                "lib/python3.13t/json/decoder.py",
            ),
        ] {
            assert_eq!(file(path, root), want, "{path}");
        }
    }

    #[test]
    fn the_programs_files_are_named_from_where_it_started() {
        let root = Some("/home/a/proj/");
        assert_eq!(file("/home/a/proj/lib/config.js", root), "lib/config.js");
        assert_eq!(file("/home/a/proj", root), "/home/a/proj");
        // Not under it: a sibling whose name starts the same, a system file.
        assert_eq!(file("/home/a/project/x.js", root), "/home/a/project/x.js");
        assert_eq!(file("/usr/include/stdio.h", root), "/usr/include/stdio.h");
        // Unknown root, a library's name, `node:fs`.
        assert_eq!(file("/home/a/proj/app.py", None), "/home/a/proj/app.py");
        assert_eq!(file("libc.so.6", root), "libc.so.6");
        assert_eq!(
            file("node:internal/fs/utils", root),
            "node:internal/fs/utils"
        );
        // `lib/python` not followed by a version is no standard library.
        assert_eq!(
            file("/home/a/proj/lib/python/tool.py", root),
            "lib/python/tool.py"
        );
        assert_eq!(pattern("walk:/home/a/proj/static", root), "walk:static");
        assert_eq!(pattern("walk:/etc/ssl", root), "walk:/etc/ssl");
        assert_eq!(pattern("search:libfoo.so", root), "search:libfoo.so");
        assert_eq!(
            words(
                "/home/a/proj/node_modules/.bin/tsc -p /home/a/proj/src",
                root
            ),
            "node_modules/.bin/tsc -p src"
        );
        assert_eq!(words("git rev-parse HEAD", root), "git rev-parse HEAD");
        assert_eq!(
            words("/home/a/proj/log/app.log GET /api 200", root),
            "log/app.log GET /api 200"
        );
    }

    #[test]
    fn a_budgets_absolute_site_matches_the_portable_one() {
        assert!(same_site(
            "load@/home/a/proj/lib/config.js",
            "load@lib/config.js"
        ));
        assert!(same_site(
            "send@/x/venv/lib/python3.11/site-packages/uvicorn/h11.py",
            "send@site-packages/uvicorn/h11.py"
        ));
        assert!(!same_site(
            "load@/home/a/proj/xlib/config.js",
            "load@lib/config.js"
        ));
        assert!(!same_site(
            "other@/home/a/proj/lib/config.js",
            "load@lib/config.js"
        ));
        assert!(same_site("load@lib/config.js", "load@lib/config.js"));
        assert!(same_key(
            "app.js|ensure-dir|own|append@/home/a/proj/app.js",
            "app.js|ensure-dir|own|append@app.js"
        ));
        assert!(!same_key(
            "app.js|ensure-dir|own|append@/home/a/proj/app.js",
            "app.js|repeated-lookup|own|append@app.js"
        ));
        assert!(same_key(
            "app.js|reread-unchanged|own|path:/home/a/proj/conf/*.json",
            "app.js|reread-unchanged|own|path:conf/*.json"
        ));
        assert!(!same_key(
            "app.js|reread-unchanged|own|path:/home/a/proj/xconf/*.json",
            "app.js|reread-unchanged|own|path:conf/*.json"
        ));
    }
}

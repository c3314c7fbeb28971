//! Which program a process image runs, as its developers would name it (`tsc`, `cc1`,
//! `stat.py`, `http.server`: the script an interpreter runs, not the interpreter), and
//! whether the image is a launcher that only gets the real program going (npx, a version
//! manager's shim, a shell wrapper that execs the real program, `env`).

use dejavu_replay::{Image, Replay};
use dejavu_trace::Strings;

/// The runtime a program runs on: decides which frames and paths are its start-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// Node.js (or bun).
    Node,
    /// CPython (or PyPy).
    Python,
    /// A POSIX shell.
    Shell,
    /// Anything else: native code, or an interpreter dejavu does not know.
    Native,
}

/// What dejavu knows of the program an image runs.
#[derive(Clone, Debug)]
pub struct Program {
    /// Its name for people and for a finding's key.
    pub name: String,
    /// The runtime.
    pub runtime: Runtime,
    /// The executable's path (empty when unknown).
    pub exe: Vec<u8>,
    /// Node.js: the package directory of the main script when it lives in a
    /// `node_modules` tree (`.../node_modules/typescript/`): files there (outside nested
    /// `node_modules`) are the program's own code, not a dependency's.
    pub own_root: Option<Vec<u8>>,
    /// Python: the top-level packages of the distribution whose console script the
    /// program is (`venv/bin/black` -> `black`, `blackd`, `blib2to3`, `_black_version`):
    /// their files in site-packages are the program's own code, not a dependency's.
    pub own_packages: Vec<Vec<u8>>,
    /// The script an interpreter runs, when its path is absolute (Python puts its
    /// directory first on `sys.path`: the import system looks there for every module).
    pub script: Option<Vec<u8>>,
    /// Node.js and Python: the script as given (the first argument that is not an
    /// option), for `resolve_node_script` and `resolve_console_script`.
    pub script_given: Option<Vec<u8>>,
    /// Python `-m MODULE`: the module's files (`http/server.py`, `pkg/__main__.py`) are
    /// the program's own code, even in the standard library or site-packages.
    pub own_module: Option<String>,
    /// Why this image is a launcher (`npx`, `pyenv`, `exec`), None when it is not.
    pub launcher: Option<String>,
    /// A program installed on the system, native code or `sh -c` (not an interpreter
    /// running a script, not a shell running a script file): a tool when another program
    /// of the recording ran it (see [`Programs::decide_launchers`]).
    pub system: bool,
    /// A system program another program of the recording ran (decided with the
    /// launchers, [`Programs::decide_launchers`]).
    pub tool: bool,
    /// A dependency's build program: cargo's build script of a crate it fetched
    /// ([`cargo_dependency_build_script`]). Its executable's code is the dependency's, not
    /// the program's own.
    pub dependency_build: bool,
}

/// Whether `exe`, started in `cwd`, is the build script of a crate cargo fetched: cargo
/// builds a package's build.rs into `target/<profile>/build/<crate>-<hash>/` as
/// `build-script-build` (or `build_script_build-<hash>`) and runs it in the package's
/// directory, which for a dependency is its copy in cargo's registry (`registry/src/`),
/// its git checkouts (`git/checkouts/`) or a vendored tree (`vendor/`). A build script of
/// the workspace's own packages runs in the workspace: the program's own.
pub fn cargo_dependency_build_script(exe: &[u8], cwd: Option<&[u8]>) -> bool {
    let b = base(exe);
    let Some(cwd) = cwd else {
        return false;
    };
    let dir = &exe[..exe.len() - b.len()];
    let script = b.starts_with(b"build-script-") || b.starts_with(b"build_script_");
    let fetched = [&b"/registry/src/"[..], b"/git/checkouts/", b"/vendor/"]
        .iter()
        .any(|d| contains(cwd, d));
    script && contains(dir, b"/build/") && fetched
}

/// Where a system's package manager installs programs (not /usr/local, /opt or a home
/// directory, where the program being worked on may live), and the tool directories of
/// the Rust and Go toolchains (rustc, cargo's helpers, `go tool compile`, `asm`, `link`).
fn system_exe(exe: &[u8]) -> bool {
    const DIRS: [&[u8]; 9] = [
        b"/usr/bin/",
        b"/usr/sbin/",
        b"/bin/",
        b"/sbin/",
        b"/usr/lib/",
        b"/usr/lib64/",
        b"/usr/libexec/",
        b"/lib/",
        b"/lib64/",
    ];
    DIRS.iter().any(|d| exe.starts_with(d))
        || (contains(exe, b"/.rustup/toolchains/") && contains(exe, b"/bin/"))
        || contains(exe, b"/pkg/tool/")
}

fn base(p: &[u8]) -> &[u8] {
    p.rsplit(|&c| c == b'/').next().unwrap_or(p)
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn runtime_of(exe_base: &[u8]) -> Runtime {
    let b = exe_base;
    if b == b"node" || b == b"nodejs" || b.starts_with(b"node-") || b == b"bun" {
        Runtime::Node
    } else if b.starts_with(b"python") || b.starts_with(b"pypy") {
        Runtime::Python
    } else if [
        &b"sh"[..],
        b"bash",
        b"dash",
        b"zsh",
        b"ksh",
        b"ash",
        b"mksh",
        b"busybox",
    ]
    .contains(&b)
    {
        Runtime::Shell
    } else {
        Runtime::Native
    }
}

/// Node.js options that take a value as the next argument.
const NODE_VALUE_OPTS: &[&[u8]] = &[
    b"-r",
    b"--require",
    b"--import",
    b"--loader",
    b"--experimental-loader",
    b"-C",
    b"--conditions",
    b"--title",
    b"--env-file",
    b"--input-type",
    b"--stack-size",
];

/// The first argument that is not an option (and not an option's value), and whether an
/// inline-code option (`-e`, `-c`) came first.
fn script<'a>(args: &[&'a [u8]], value_opts: &[&[u8]], code_opts: &[&[u8]]) -> Script<'a> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        if code_opts.contains(&a) {
            return Script::Code(a);
        }
        if a == b"--" {
            return args.get(i + 1).map_or(Script::None, |s| Script::File(s));
        }
        if a.starts_with(b"-") && a.len() > 1 {
            if value_opts.contains(&a) {
                i += 1;
            }
            i += 1;
            continue;
        }
        return Script::File(a);
    }
    Script::None
}

enum Script<'a> {
    File(&'a [u8]),
    Code(&'a [u8]),
    None,
}

/// Package managers' subcommands that run another program.
const RUN_SUBCOMMANDS: &[&[u8]] = &[
    b"exec",
    b"x",
    b"run",
    b"run-script",
    b"rum",
    b"urn",
    b"test",
    b"t",
    b"tst",
    b"start",
    b"stop",
    b"restart",
    b"dlx",
];

/// Path pieces of version managers' shims and scripts (pyenv, asdf, nvm, rbenv, nodenv,
/// volta): processes running from there only pick and start the real program.
const LAUNCHER_PATHS: &[(&str, &str)] = &[
    ("/shims/", "shim"),
    ("/.pyenv/libexec/", "pyenv"),
    ("/.pyenv/plugins/", "pyenv"),
    ("/.pyenv/bin/", "pyenv"),
    ("/pyenv/libexec/", "pyenv"),
    ("/.asdf/bin/", "asdf"),
    ("/.asdf/lib/", "asdf"),
    ("/.asdf/libexec/", "asdf"),
    ("/.nvm/nvm-exec", "nvm"),
    ("/.rbenv/libexec/", "rbenv"),
    ("/.nodenv/libexec/", "nodenv"),
    ("/.volta/bin/", "volta"),
];

fn contains(h: &[u8], n: &[u8]) -> bool {
    h.windows(n.len()).any(|w| w == n)
}

impl Program {
    /// The program of an executable and its argv (launcher not yet decided).
    pub fn of(exe: &[u8], argv: &[&[u8]]) -> Program {
        let argv0 = argv.first().copied().unwrap_or(b"");
        // argv[0] first: for a script with a `#!` line, `exe` is the script and argv[0]
        // the interpreter that runs it (`/usr/bin/env`, `bash`).
        let exe_base = if argv0.is_empty() {
            base(exe)
        } else {
            base(argv0)
        };
        let mut runtime = runtime_of(exe_base);
        if runtime == Runtime::Native && !exe.is_empty() && argv0.is_empty() {
            runtime = runtime_of(base(exe));
        }
        let args = argv.get(1..).unwrap_or(&[]);
        let mut own_root = None;
        let mut script_given = None;
        let mut runs_script = false;
        let name = match runtime {
            Runtime::Node => match script(
                args,
                NODE_VALUE_OPTS,
                &[b"-e", b"--eval", b"-p", b"--print"],
            ) {
                Script::File(s) => {
                    own_root = node_package_root(s);
                    script_given = Some(s.to_vec());
                    lossy(base(s))
                }
                Script::Code(o) => format!("{} {}", lossy(exe_base), lossy(o)),
                Script::None => lossy(exe_base),
            },
            Runtime::Python => python_name(exe_base, args),
            Runtime::Shell => match script(args, &[b"-o", b"+o"], &[b"-c"]) {
                Script::File(s) => {
                    runs_script = true;
                    lossy(base(s))
                }
                Script::Code(_) => format!("{} -c", lossy(exe_base)),
                Script::None => lossy(exe_base),
            },
            Runtime::Native => lossy(exe_base),
        };
        let own_module =
            (runtime == Runtime::Python && python_m(args)).then(|| name.replace('.', "/"));
        let given = match runtime {
            Runtime::Python if own_module.is_none() => python_script(args),
            _ => None,
        };
        if given.is_some() {
            script_given = given.map(<[u8]>::to_vec);
        }
        let script = given.filter(|s| s.starts_with(b"/")).map(<[u8]>::to_vec);
        let system = match runtime {
            Runtime::Native => system_exe(exe),
            Runtime::Shell => !runs_script && system_exe(exe),
            Runtime::Node | Runtime::Python => false,
        };
        Program {
            own_module,
            script,
            name,
            runtime,
            exe: exe.to_vec(),
            own_root,
            own_packages: Vec::new(),
            script_given,
            launcher: None,
            system,
            tool: false,
            dependency_build: false,
        }
    }

    /// Node.js: the main script's package (`own_root`) from the script's real path, as
    /// Node.js's loader runs it and as the agent names its frames: a relative path joined
    /// to `cwd` (the directory the process started in, when known), its symbolic links
    /// followed (`node_modules/.bin/tsc` is a link to `../typescript/bin/tsc`, `/usr/bin/npm`
    /// one to `../lib/node_modules/npm/bin/npm-cli.js`). Read from the file system where
    /// the report is made; where the script is not there (a trace reported on another
    /// machine), the path as given, joined to `cwd`.
    pub fn resolve_node_script(&mut self, cwd: Option<&[u8]>) {
        let Some(abs) = self.script_at(cwd) else {
            return;
        };
        let real = {
            use std::os::unix::ffi::{OsStrExt, OsStringExt};
            std::fs::canonicalize(std::ffi::OsStr::from_bytes(&abs))
                .ok()
                .map(|p| p.into_os_string().into_vec())
        };
        self.own_root = node_package_root(real.as_deref().unwrap_or(&abs));
    }

    /// Python: the packages of the distribution whose console script the program runs
    /// (`own_packages`). A console script pip or setuptools wrote is a short file that
    /// imports the entry point (`from black import patched_main`) and exits with it
    /// (`sys.exit(...)`); its distribution is the one whose `top_level.txt` (in its
    /// `*.dist-info` beside the packages, under the interpreter's prefix from the
    /// script's `#!` line) names the entry's package; without one, the entry's package
    /// alone. Read from the file system where the report is made; nothing when the script
    /// is not there or is not such a script.
    pub fn resolve_console_script(&mut self, cwd: Option<&[u8]>) {
        use std::os::unix::ffi::OsStrExt;
        let Some(abs) = self.script_at(cwd) else {
            return;
        };
        let Some((interp, top)) = console_entry(std::ffi::OsStr::from_bytes(&abs)) else {
            return;
        };
        let mut own = distribution_packages(&interp, &top);
        if !own.contains(&top) {
            own.push(top);
        }
        self.own_packages = own;
    }

    /// The script as given, absolute: a relative one joined to `cwd` (None without it).
    fn script_at(&self, cwd: Option<&[u8]>) -> Option<Vec<u8>> {
        let s = self.script_given.as_deref()?;
        if s.starts_with(b"/") {
            Some(s.to_vec())
        } else {
            cwd.map(|c| [c, b"/", s].concat())
        }
    }

    /// Whether the recorded command itself (the root process's first program) only starts
    /// the real one: a shell given one simple command (`sh -c 'make -j2'`, as CI steps
    /// and npm scripts are written; a loop, a list or a pipeline is the shell's own work,
    /// the program's), or `timeout`/`time` running a command. Only for the root: a shell
    /// that a program runs for each of its commands (make's recipes) stays that program's
    /// tool.
    pub fn root_launcher(&self, argv: &[&[u8]]) -> Option<String> {
        let args = argv.get(1..).unwrap_or(&[]);
        match self.runtime {
            Runtime::Shell if shell_runs_one_command(args) => Some(self.name.clone()),
            Runtime::Native if matches!(self.name.as_str(), "timeout" | "time") => {
                Some(self.name.clone())
            }
            _ => None,
        }
    }

    /// Whether the program itself is a launcher by what it is (npx, env, `npm exec`, a
    /// version manager's shim or script), whatever it does.
    pub fn named_launcher(&self, exe: &[u8], argv: &[&[u8]]) -> Option<String> {
        let n = self.name.as_str();
        if [
            "npx",
            "npx-cli.js",
            "pnpx",
            "bunx",
            "env",
            "corepack",
            "nvm-exec",
        ]
        .contains(&n)
        {
            return Some(n.trim_end_matches("-cli.js").to_string());
        }
        // npm/yarn/pnpm with a subcommand that runs another program.
        let sub = argv.iter().skip(1).find(|a| {
            !a.starts_with(b"-")
                && !a.ends_with(b"npm-cli.js")
                && base(a) != b"npm"
                && base(a) != b"yarn"
                && base(a) != b"pnpm"
                && !a.ends_with(b".js")
                && !a.ends_with(b".cjs")
        });
        let pm = [
            "npm",
            "npm-cli.js",
            "yarn",
            "yarn.js",
            "pnpm",
            "pnpm.cjs",
            "bun",
        ];
        if pm.contains(&n) && sub.is_some_and(|s| RUN_SUBCOMMANDS.contains(s)) {
            return Some(format!(
                "{} {}",
                n.trim_end_matches("-cli.js")
                    .trim_end_matches(".js")
                    .trim_end_matches(".cjs"),
                lossy(sub.copied().unwrap_or(b""))
            ));
        }
        for p in std::iter::once(exe).chain(argv.iter().take(3).copied()) {
            for (piece, who) in LAUNCHER_PATHS {
                if contains(p, piece.as_bytes()) {
                    return Some((*who).to_string());
                }
            }
        }
        None
    }
}

/// Whether a shell's command line gives it one simple command (`sh -c CMD`): words and
/// redirections to files, no list (`;`, `&&`, `||`, `&`), pipeline, loop, condition,
/// group or substitution. Options only before `-c`.
fn shell_runs_one_command(args: &[&[u8]]) -> bool {
    let Some(at) = args.iter().position(|a| *a == b"-c") else {
        return false;
    };
    if args[..at]
        .iter()
        .any(|a| !a.starts_with(b"-") && !a.starts_with(b"+"))
    {
        return false;
    }
    let Some(cmd) = args.get(at + 1) else {
        return false;
    };
    if cmd.iter().any(|&c| {
        matches!(
            c,
            b';' | b'&' | b'|' | b'\n' | b'`' | b'(' | b')' | b'{' | b'}'
        )
    }) || contains(cmd, b"$(")
    {
        return false;
    }
    const KEYWORDS: &[&[u8]] = &[
        b"for",
        b"while",
        b"until",
        b"if",
        b"case",
        b"select",
        b"function",
        b"!",
        b"eval",
        b".",
        b"source",
        b"cd",
        b"exit",
    ];
    cmd.split(u8::is_ascii_whitespace)
        .find(|w| !w.is_empty())
        .is_some_and(|first| !KEYWORDS.contains(&first))
}

/// The script a Python command line runs (its first argument that is not an option).
fn python_script<'a>(args: &[&'a [u8]]) -> Option<&'a [u8]> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        if a == b"-c" || a == b"-m" || a == b"-" {
            return None;
        }
        if a == b"--" {
            return args.get(i + 1).copied();
        }
        if a.starts_with(b"-") {
            if a == b"-W" || a == b"-X" || a == b"--check-hash-based-pycs" {
                i += 1;
            }
            i += 1;
            continue;
        }
        return Some(a);
    }
    None
}

/// Whether a Python command line runs a module (`-m MODULE`) rather than a script.
fn python_m(args: &[&[u8]]) -> bool {
    for a in args {
        if *a == b"-m" || (a.starts_with(b"-m") && !a.starts_with(b"--")) {
            return true;
        }
        if !a.starts_with(b"-") || *a == b"--" || *a == b"-c" {
            return false;
        }
    }
    false
}

fn python_name(exe_base: &[u8], args: &[&[u8]]) -> String {
    let mut i = 0;
    while i < args.len() {
        let a = args[i];
        if a == b"-m" {
            return args.get(i + 1).map_or(lossy(exe_base), |m| lossy(m));
        }
        if let Some(m) = a
            .strip_prefix(b"-m")
            .filter(|m| !m.is_empty() && !a.starts_with(b"--"))
        {
            return lossy(m);
        }
        if a == b"-c"
            || (a.starts_with(b"-")
                && !a.starts_with(b"--")
                && a.ends_with(b"c")
                && a.len() > 2
                && !a.contains(&b'='))
        {
            return format!("{} -c", lossy(exe_base));
        }
        if a == b"--" {
            return args.get(i + 1).map_or(lossy(exe_base), |s| lossy(base(s)));
        }
        if a.starts_with(b"-") && a.len() > 1 {
            if a == b"-W" || a == b"-X" || a == b"--check-hash-based-pycs" {
                i += 1;
            }
            i += 1;
            continue;
        }
        return lossy(base(a));
    }
    lossy(exe_base)
}

/// A console script's interpreter (its `#!` line's program) and its entry's top-level
/// package (`from black import patched_main` -> `black`): None for a file that is not a
/// short script importing its entry and exiting with it.
fn console_entry(path: &std::ffi::OsStr) -> Option<(Vec<u8>, Vec<u8>)> {
    use std::io::Read;
    let mut text = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(4096)
        .read_to_end(&mut text)
        .ok()?;
    let first = text.split(|&c| c == b'\n').next()?;
    let interp = first.strip_prefix(b"#!")?;
    let interp = interp
        .split(|c| c.is_ascii_whitespace())
        .find(|w| !w.is_empty())?;
    if !interp.starts_with(b"/") || !contains(&text, b"sys.exit(") {
        return None;
    }
    let module = text.split(|&c| c == b'\n').find_map(|l| {
        let rest = l.strip_prefix(b"from ")?;
        let end = rest.windows(8).position(|w| w == b" import ")?;
        Some(&rest[..end])
    })?;
    let top = module.split(|&c| c == b'.').next()?;
    let ident = |c: &u8| c.is_ascii_alphanumeric() || *c == b'_';
    (!top.is_empty() && top.iter().all(ident)).then(|| (interp.to_vec(), top.to_vec()))
}

/// The top-level packages of the installed distribution that holds package `top`, from
/// the `top_level.txt` of the `*.dist-info` directories in the site-packages under the
/// prefix of interpreter `interp` (`PREFIX/bin/python3` -> `PREFIX/lib/python3*/
/// {site,dist}-packages`); empty when none names it.
fn distribution_packages(interp: &[u8], top: &[u8]) -> Vec<Vec<u8>> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let interp = std::path::Path::new(std::ffi::OsStr::from_bytes(interp));
    let Some(prefix) = interp.parent().and_then(|b| b.parent()) else {
        return Vec::new();
    };
    let Ok(libs) = std::fs::read_dir(prefix.join("lib")) else {
        return Vec::new();
    };
    for lib in libs.flatten().take(64) {
        if !lib.file_name().as_bytes().starts_with(b"python") {
            continue;
        }
        for site in ["site-packages", "dist-packages"] {
            let Ok(entries) = std::fs::read_dir(lib.path().join(site)) else {
                continue;
            };
            for e in entries.flatten().take(4096) {
                let name = e.file_name().into_vec();
                if !name.ends_with(b".dist-info") {
                    continue;
                }
                let Ok(list) = std::fs::read(e.path().join("top_level.txt")) else {
                    continue;
                };
                let names: Vec<Vec<u8>> = list
                    .split(|&c| c == b'\n')
                    .map(|l| l.trim_ascii().to_vec())
                    .filter(|l| !l.is_empty())
                    .collect();
                if names.iter().any(|n| n == top) {
                    return names;
                }
            }
        }
    }
    Vec::new()
}

/// `.../node_modules/typescript/bin/tsc` -> `.../node_modules/typescript/`;
/// `.../node_modules/@scope/pkg/x.js` -> `.../node_modules/@scope/pkg/`.
fn node_package_root(script: &[u8]) -> Option<Vec<u8>> {
    const NM: &[u8] = b"/node_modules/";
    let at = script.windows(NM.len()).rposition(|w| w == NM)?;
    let rest = &script[at + NM.len()..];
    let mut parts = rest.split(|&c| c == b'/');
    let first = parts.next()?;
    let len = if first.starts_with(b"@") {
        first.len() + 1 + parts.next()?.len()
    } else {
        first.len()
    };
    Some(script[..at + NM.len() + len + 1].to_vec())
}

/// The program name of a command line or an executable's path: its first word's
/// basename. The name `dejavu diff`, `dejavu check` and budgets count calls by.
pub fn program_of(command: &str) -> String {
    let first = command.split_whitespace().next().unwrap_or("");
    first.rsplit('/').next().unwrap_or(first).to_string()
}

/// Which program each process runs by what it exec'd, followed through a trace's spawn and
/// exec records: the basename of its argv[0] (else of the executable), else its parent's,
/// else the recorded command's. Simpler than [`Programs`] (no script or launcher is looked
/// through): the names budgets and `dejavu diff` count by, stable across dejavu versions.
#[derive(Debug, Default)]
pub struct ExecNames {
    root: String,
    by_pid: rustc_hash::FxHashMap<u32, String>,
}

impl ExecNames {
    /// For a trace of `meta`.
    pub fn new(meta: &dejavu_trace::Meta) -> ExecNames {
        ExecNames {
            root: meta
                .command
                .first()
                .map(|c| program_of(c))
                .unwrap_or_default(),
            by_pid: rustc_hash::FxHashMap::default(),
        }
    }

    /// Takes note of a spawn or an exec.
    pub fn record(&mut self, rec: &dejavu_trace::Record, strings: &Strings) {
        match rec {
            dejavu_trace::Record::Spawn(s) => {
                let p = self.of(s.parent_pid).to_string();
                self.by_pid.insert(s.pid, p);
            }
            dejavu_trace::Record::Exec(e) => {
                let argv = strings.get(e.argv);
                let first = argv.split(|&b| b == 0).next().unwrap_or(b"");
                let name = if first.is_empty() {
                    strings.get(e.exe)
                } else {
                    first
                };
                self.by_pid
                    .insert(e.pid, program_of(&String::from_utf8_lossy(name)));
            }
            _ => {}
        }
    }

    /// The program of `pid`.
    pub fn of(&self, pid: u32) -> &str {
        self.by_pid.get(&pid).map_or(&self.root, |s| s.as_str())
    }
}

/// The programs of a replay's images, built as images appear; launchers are decided once
/// the replay is over ([`Programs::decide_launchers`]), when every exec is known.
#[derive(Debug, Default)]
pub struct Programs {
    list: Vec<Program>,
}

impl Programs {
    /// The program of `image` (images appear in order, so every earlier one is built too).
    pub fn get(&mut self, replay: &Replay, strings: &Strings, image: u32) -> &Program {
        while self.list.len() <= image as usize {
            let i = self.list.len();
            let p = match replay.images.get(i) {
                Some(im) => base_program(replay, im, i as u32, strings),
                None => Program::of(b"", &[]),
            };
            self.list.push(p);
        }
        &self.list[image as usize]
    }

    /// Decides which images are launchers: by name, subcommand or path (npx, `npm exec`,
    /// env, version managers), a fork of a launcher that has not exec'd, and a program
    /// that exec'd another one in its own process (a wrapper script, a shim).
    pub fn decide_launchers(&mut self, replay: &Replay, strings: &Strings) {
        if let Some(last) = replay.images.len().checked_sub(1) {
            self.get(replay, strings, last as u32);
        }
        for i in 0..self.list.len() {
            let Some(im) = replay.images.get(i) else {
                continue;
            };
            let (exe, argv) = exe_argv(replay, im, strings);
            let mut l = self.list[i].named_launcher(exe, &argv);
            // The recorded command's first program: its process's image before the exec
            // is the trace's first sight of it, with no parent in the trace.
            let root = im.execd
                && im
                    .parent
                    .and_then(|p| replay.images.get(p as usize))
                    .is_none_or(|p| p.parent.is_none() && !p.execd && Some(p.pid) == replay.root);
            if l.is_none() && root {
                l = self.list[i].root_launcher(&argv);
            }
            if l.is_none() && !im.execd {
                if let Some(parent) = im.parent.and_then(|p| self.list.get(p as usize)) {
                    l.clone_from(&parent.launcher);
                }
            }
            if l.is_none() && im.execd && im.replaced {
                l = Some(format!("{} (exec'd another program)", self.list[i].name));
            }
            self.list[i].launcher = l;
        }
        // Tools: a system program that another program of the recording ran (not a
        // launcher: the first real program is whatever the launchers started), by the
        // rule a recording applies at each exec (`ImageRole::is_tool`), here with every
        // launcher known. A fork that has not exec'd is its parent's, tool or not.
        let mut roles: Vec<std::rc::Rc<ImageRole>> = Vec::with_capacity(self.list.len());
        for i in 0..self.list.len() {
            let im = replay.images.get(i);
            let up = im.and_then(|im| im.parent).map(|p| p as usize);
            let p = &self.list[i];
            let role = std::rc::Rc::new(ImageRole {
                exe: p.exe.clone(),
                execd: im.is_some_and(|im| im.execd),
                launcher: p.launcher.is_some(),
                system: p.system,
                replaced: std::cell::Cell::new(false),
                parent: up.and_then(|u| roles.get(u)).cloned(),
            });
            self.list[i].tool = if role.execd {
                role.is_tool()
            } else {
                up.and_then(|u| self.list.get(u)).is_some_and(|p| p.tool)
            };
            roles.push(role);
        }
    }

    /// Every program, by image.
    pub fn all(&self) -> &[Program] {
        &self.list
    }
}

/// What a recording knows of a process's image, to leave native stacks out of the system
/// tools a program runs (`--stacks on`): the rule [`Programs::decide_launchers`] applies
/// to the trace, applied at each exec with what is known then. One difference: an image
/// that execs another program is a launcher from then on, so a child it started before
/// was judged while it was not yet one.
#[derive(Debug)]
pub struct ImageRole {
    exe: Vec<u8>,
    execd: bool,
    launcher: bool,
    system: bool,
    replaced: std::cell::Cell<bool>,
    parent: Option<std::rc::Rc<ImageRole>>,
}

impl ImageRole {
    /// A process seen before any exec (the program dejavu starts, or one attached to).
    pub fn unknown() -> std::rc::Rc<ImageRole> {
        std::rc::Rc::new(ImageRole {
            exe: Vec::new(),
            execd: false,
            launcher: false,
            system: false,
            replaced: std::cell::Cell::new(false),
            parent: None,
        })
    }

    /// A new process: a copy of its parent's image until it execs.
    pub fn fork(parent: &std::rc::Rc<ImageRole>) -> std::rc::Rc<ImageRole> {
        std::rc::Rc::new(ImageRole {
            exe: parent.exe.clone(),
            execd: false,
            launcher: false,
            system: false,
            replaced: std::cell::Cell::new(false),
            parent: Some(parent.clone()),
        })
    }

    /// The image a process running `prev` exec'd: `exe` with `argv` (NUL-joined).
    pub fn exec(prev: &std::rc::Rc<ImageRole>, exe: &[u8], argv: &[u8]) -> std::rc::Rc<ImageRole> {
        let args: Vec<&[u8]> = argv.split(|&c| c == 0).filter(|a| !a.is_empty()).collect();
        let p = Program::of(exe, &args);
        if prev.execd {
            prev.replaced.set(true);
        }
        // The recorded command's first exec (the process dejavu started, seen before it).
        let root = !prev.execd && prev.parent.is_none();
        std::rc::Rc::new(ImageRole {
            exe: exe.to_vec(),
            execd: true,
            launcher: p.named_launcher(exe, &args).is_some()
                || (root && p.root_launcher(&args).is_some()),
            system: p.system,
            replaced: std::cell::Cell::new(false),
            parent: Some(prev.clone()),
        })
    }

    fn is_launcher(&self) -> bool {
        self.launcher || self.replaced.get()
    }

    /// A program of the recording's own, as far as known at its exec: exec'd, neither a
    /// launcher by name nor a tool.
    pub fn is_program(&self) -> bool {
        self.execd && !self.is_launcher() && !self.is_tool()
    }

    /// A system program another program of the recording ran (the report's `tool`).
    pub fn is_tool(&self) -> bool {
        if !self.execd || !self.system || self.is_launcher() {
            return false;
        }
        let mut by = false;
        let mut at = self.parent.as_deref();
        let mut hops = 0;
        while let Some(a) = at {
            // A fork copy of a launcher is a launcher's (as in the report), skipped alike.
            if a.execd && !a.is_launcher() {
                if base(&a.exe) == base(&self.exe) {
                    return false;
                }
                by = true;
            }
            hops += 1;
            if hops > 4096 {
                break;
            }
            at = a.parent.as_deref();
        }
        by
    }
}

fn exe_argv<'a>(replay: &'a Replay, im: &Image, strings: &'a Strings) -> (&'a [u8], Vec<&'a [u8]>) {
    let exe: &[u8] = im.exe.map_or(&[][..], |e| strings.get(e));
    let argv_bytes: &[u8] = im.argv.map_or(&[][..], |a| strings.get(a));
    let argv: Vec<&[u8]> = if argv_bytes.is_empty() && exe.is_empty() {
        // A process seen running (attached, or the root before its first exec): the
        // trace's command names the root.
        if Some(im.pid) == replay.root {
            replay.meta_command().iter().map(|s| s.as_bytes()).collect()
        } else {
            Vec::new()
        }
    } else {
        argv_bytes
            .split(|&c| c == 0)
            .filter(|a| !a.is_empty())
            .collect()
    };
    (exe, argv)
}

fn base_program(replay: &Replay, im: &Image, image: u32, strings: &Strings) -> Program {
    let (exe, argv) = exe_argv(replay, im, strings);
    let mut p = Program::of(exe, &argv);
    // Where the process started: a relative script is relative to it.
    let cwd = replay.image_cwd(image);
    if p.runtime == Runtime::Python {
        p.resolve_console_script(cwd);
    }
    if p.runtime == Runtime::Node {
        p.resolve_node_script(cwd);
    }
    if p.runtime == Runtime::Native {
        p.dependency_build = cargo_dependency_build_script(exe, cwd);
    }
    if p.name.is_empty() {
        p.name = format!("pid {}", im.pid);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(exe: &str, argv: &[&str]) -> String {
        let a: Vec<&[u8]> = argv.iter().map(|s| s.as_bytes()).collect();
        Program::of(exe.as_bytes(), &a).name
    }

    #[test]
    fn an_images_role_at_exec_follows_the_reports_rule() {
        let root = ImageRole::unknown();
        let make = ImageRole::exec(&root, b"/usr/bin/make", b"make\0-j2");
        assert!(!make.is_tool(), "the first program is the program");
        // make's fork runs sh -c, whose fork runs cc1: tools.
        let sh = ImageRole::exec(&ImageRole::fork(&make), b"/bin/sh", b"sh\0-c\0cc -c a.c");
        assert!(sh.is_tool());
        assert!(
            !make.is_tool() && !make.is_launcher(),
            "a fork's exec replaces nothing"
        );
        let cc1 = ImageRole::exec(
            &ImageRole::fork(&sh),
            b"/usr/lib/gcc/x86_64-linux-gnu/12/cc1",
            b"cc1\0a.c",
        );
        assert!(cc1.is_tool());
        // make run by make (through sh) is the program again.
        let sub = ImageRole::exec(&ImageRole::fork(&sh), b"/usr/bin/make", b"make\0-C\0sub");
        assert!(!sub.is_tool());
        // git running git's own programs is git, wherever they are installed.
        let git = ImageRole::exec(&root, b"/usr/bin/git", b"git\0pull");
        let fetch = ImageRole::exec(
            &ImageRole::fork(&git),
            b"/usr/lib/git-core/git",
            b"git\0fetch",
        );
        assert!(!fetch.is_tool());
        // A launcher first: env runs make in its own process; make is still the program.
        let env = ImageRole::exec(&root, b"/usr/bin/env", b"env\0make");
        let make2 = ImageRole::exec(&env, b"/usr/bin/make", b"make");
        assert!(!make2.is_tool());
        // The program's own build (not a system path) is never a tool; an interpreter
        // neither.
        let f = ImageRole::fork(&make);
        let own = ImageRole::exec(&f, b"/home/me/proj/build/gen", b"gen");
        assert!(!own.is_tool());
        let f = ImageRole::fork(&make);
        let py = ImageRole::exec(&f, b"/usr/bin/python3", b"python3\0gen.py");
        assert!(!py.is_tool());
        // A shell script of the program's, run by it, is not a tool; `sh -c` is.
        let f = ImageRole::fork(&make);
        let script = ImageRole::exec(&f, b"/bin/sh", b"sh\0./configure");
        assert!(!script.is_tool());
        // A wrapper that execs the real program becomes a launcher: the real one is the
        // program.
        let wrap = ImageRole::exec(&root, b"/bin/sh", b"sh\0-c\0exec make");
        let real = ImageRole::exec(&wrap, b"/usr/bin/make", b"make");
        assert!(wrap.is_launcher() && !real.is_tool());
    }

    #[test]
    fn a_build_script_run_in_a_fetched_crate_is_a_dependencys() {
        let exe = b"/p/target/debug/build/libc-0123456789abcdef/build-script-build";
        let reg = b"/home/u/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/libc-0.2.1";
        assert!(cargo_dependency_build_script(exe, Some(reg)));
        let git = b"/home/u/.cargo/git/checkouts/foo-1a2b3c/4d5e6f7";
        assert!(cargo_dependency_build_script(exe, Some(git)));
        assert!(cargo_dependency_build_script(exe, Some(b"/p/vendor/libc")));
        // The workspace's own build.rs, another program run there, an unknown directory.
        assert!(!cargo_dependency_build_script(exe, Some(b"/p")));
        assert!(!cargo_dependency_build_script(
            b"/p/target/debug/app",
            Some(reg)
        ));
        assert!(!cargo_dependency_build_script(exe, None));
        let hashed = b"/p/target/release/build/serde-00aa/build_script_build-00aa";
        assert!(cargo_dependency_build_script(hashed, Some(reg)));
    }

    #[test]
    fn system_programs_are_the_package_managers_and_the_toolchains() {
        for exe in [
            "/usr/bin/git",
            "/bin/sh",
            "/usr/lib/gcc/x86_64-linux-gnu/12/cc1",
            "/usr/libexec/git-core/git-remote-https",
            "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/bin/rustc",
            "/usr/local/go/pkg/tool/linux_amd64/compile",
        ] {
            assert!(system_exe(exe.as_bytes()), "{exe}");
        }
        for exe in [
            "/usr/local/bin/mytool",
            "/opt/app/bin/server",
            "/home/me/src/proj/target/debug/proj",
            "./build/cc1",
            "/root/.rustup/toolchains/x/lib/librustc_driver.so",
        ] {
            assert!(!system_exe(exe.as_bytes()), "{exe}");
        }
        // An interpreter is never a tool (its script's frames say whose the calls are); a
        // shell is one only without a script file of its own.
        assert!(Program::of(b"/bin/sh", &[b"sh", b"-c", b"cc -c a.c"]).system);
        assert!(!Program::of(b"/bin/sh", &[b"sh", b"./build.sh"]).system);
        assert!(!Program::of(b"/usr/bin/python3", &[b"python3", b"x.py"]).system);
        assert!(Program::of(b"/usr/bin/make", &[b"make", b"-j2"]).system);
    }

    #[test]
    fn interpreters_are_named_after_their_script() {
        assert_eq!(
            name("/usr/bin/node", &["node", "/usr/bin/npx", "tsc"]),
            "npx"
        );
        assert_eq!(
            name(
                "/usr/bin/node",
                &[
                    "node",
                    "--require",
                    "/x/agent.js",
                    "server.js",
                    "--port",
                    "1"
                ]
            ),
            "server.js"
        );
        assert_eq!(name("/usr/bin/node", &["node", "-e", "1"]), "node -e");
        assert_eq!(
            name("/usr/bin/python3.11", &["python3", "-u", "stat.py"]),
            "stat.py"
        );
        assert_eq!(
            name(
                "/usr/bin/python3.11",
                &["python3", "-m", "http.server", "8000"]
            ),
            "http.server"
        );
        assert_eq!(
            name("/usr/bin/python3.11", &["python3", "-c", "pass"]),
            "python3 -c"
        );
        assert_eq!(name("/usr/bin/dash", &["sh", "-c", "cc -c a.c"]), "sh -c");
        assert_eq!(
            name(
                "/usr/bin/bash",
                &["bash", "/root/.pyenv/libexec/pyenv-exec", "python3"]
            ),
            "pyenv-exec"
        );
        assert_eq!(
            name(
                "/usr/lib/gcc/x86_64-linux-gnu/12/cc1",
                &["/usr/lib/gcc/x86_64-linux-gnu/12/cc1", "-quiet"]
            ),
            "cc1"
        );
    }

    #[test]
    fn a_node_script_inside_node_modules_owns_its_package() {
        let p = Program::of(
            b"/usr/bin/node",
            &[
                b"node",
                b"/app/node_modules/typescript/bin/tsc",
                b"-p",
                b".",
            ],
        );
        assert_eq!(p.name, "tsc");
        assert_eq!(
            p.own_root.as_deref(),
            Some(&b"/app/node_modules/typescript/"[..])
        );
        let s = Program::of(b"/usr/bin/node", &[b"node", b"/a/node_modules/@s/p/cli.js"]);
        assert_eq!(s.own_root.as_deref(), Some(&b"/a/node_modules/@s/p/"[..]));
    }

    #[test]
    fn a_node_script_run_by_a_relative_path_or_a_link_owns_its_real_package() {
        use std::os::unix::ffi::OsStrExt;
        let dir = std::env::temp_dir().join(format!(
            "dejavu-program-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let nm = dir.join("app/node_modules");
        std::fs::create_dir_all(nm.join("typescript/bin")).unwrap();
        std::fs::create_dir_all(nm.join(".bin")).unwrap();
        std::fs::write(nm.join("typescript/bin/tsc"), "").unwrap();
        std::os::unix::fs::symlink("../typescript/bin/tsc", nm.join(".bin/tsc")).unwrap();
        let app = std::fs::canonicalize(dir.join("app")).unwrap();
        let app = app.as_os_str().as_bytes();
        let want = [app, b"/node_modules/typescript/"].concat();
        let root = |argv: &[&[u8]], cwd: Option<&[u8]>| {
            let mut p = Program::of(b"/usr/bin/node", argv);
            p.resolve_node_script(cwd);
            p.own_root
        };
        let bin = [app, b"/node_modules/.bin/tsc"].concat();
        // npx tsc: the link in .bin, absolute (its lexical package would be `.bin/`).
        assert_eq!(
            root(&[b"node", &bin, b"-p", b"."], None),
            Some(want.clone())
        );
        // node node_modules/typescript/bin/tsc, from the project's directory.
        let rel: &[u8] = b"node_modules/typescript/bin/tsc";
        assert_eq!(root(&[b"node", rel], Some(app)), Some(want.clone()));
        assert_eq!(
            root(&[b"node", b"--", b"node_modules/.bin/tsc"], Some(app)),
            Some(want)
        );
        // Without the directory it started in, a relative script says nothing; a script
        // that is not there keeps the path as given.
        assert_eq!(root(&[b"node", rel], None), None);
        let gone = b"/gone/node_modules/x/cli.js";
        assert_eq!(
            root(&[b"node", gone], None).as_deref(),
            Some(&b"/gone/node_modules/x/"[..])
        );
        // Not a script: nothing to resolve.
        assert_eq!(root(&[b"node", b"-e", b"1"], Some(app)), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_console_script_names_its_distributions_packages() {
        let dir = std::env::temp_dir().join(format!(
            "dejavu-console-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let site = dir.join("venv/lib/python3.11/site-packages");
        std::fs::create_dir_all(site.join("black-26.10.1.dist-info")).unwrap();
        std::fs::create_dir_all(site.join("click-8.dist-info")).unwrap();
        std::fs::write(site.join("click-8.dist-info/top_level.txt"), "click\n").unwrap();
        std::fs::write(
            site.join("black-26.10.1.dist-info/top_level.txt"),
            "_black_version\nblack\nblackd\nblib2to3\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("venv/bin")).unwrap();
        let venv = dir.join("venv").display().to_string();
        let script = dir.join("venv/bin/black");
        std::fs::write(
            &script,
            format!(
                "#!{venv}/bin/python3\nimport re\nimport sys\nfrom black import patched_main\n\
                 if __name__ == '__main__':\n    sys.exit(patched_main())\n"
            ),
        )
        .unwrap();
        let own = |script: &str| {
            let mut p = Program::of(b"/usr/bin/python3", &[b"python3", script.as_bytes()]);
            p.resolve_console_script(None);
            p.own_packages
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect::<Vec<_>>()
        };
        let s = script.display().to_string();
        assert_eq!(own(&s), ["_black_version", "black", "blackd", "blib2to3"]);
        // Without its dist-info: the entry's package alone.
        std::fs::remove_dir_all(site.join("black-26.10.1.dist-info")).unwrap();
        assert_eq!(own(&s), ["black"]);
        // A script of the program's own (no `from X import`, no sys.exit) names none.
        let mine = dir.join("app.py");
        std::fs::write(&mine, "import os\nprint(os.getcwd())\n").unwrap();
        assert!(own(&mine.display().to_string()).is_empty());
        assert!(own("/nowhere/bin/tool").is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_recorded_command_launches_what_a_shell_given_one_command_runs() {
        let root = |exe: &str, argv: &[&str]| {
            let a: Vec<&[u8]> = argv.iter().map(|s| s.as_bytes()).collect();
            Program::of(exe.as_bytes(), &a).root_launcher(&a)
        };
        assert_eq!(
            root("/usr/bin/dash", &["sh", "-c", "make -s -j2"]).as_deref(),
            Some("sh -c")
        );
        assert_eq!(
            root(
                "/usr/bin/bash",
                &["bash", "-e", "-c", "cargo build > log.txt"]
            )
            .as_deref(),
            Some("bash -c")
        );
        assert_eq!(
            root("/usr/bin/timeout", &["timeout", "60", "make"]).as_deref(),
            Some("timeout")
        );
        // The shell's own work: a loop, a list, a pipeline, a substitution, a script.
        for cmd in [
            "for i in 1 2; do mkdir x; done",
            "make && make install",
            "make; true",
            "make | tee log",
            "echo $(date)",
            "cd sub",
        ] {
            assert_eq!(root("/usr/bin/dash", &["sh", "-c", cmd]), None, "{cmd}");
        }
        assert_eq!(root("/usr/bin/dash", &["sh", "build.sh"]), None);
        assert_eq!(root("/usr/bin/make", &["make", "-j2"]), None);
    }

    #[test]
    fn make_run_by_sh_c_is_the_program_make_run_by_a_shell_loop_a_tool() {
        use crate::testkit::{file, TraceBuilder};
        use crate::Owner;
        let run = |cmd: &str| {
            let mut b = TraceBuilder::new();
            b.exec("/usr/bin/dash", &["sh", "-c", cmd]);
            b.fork(200);
            b.pid = 200;
            b.tid = 200;
            b.exec("/usr/bin/make", &["make", "-j2"]);
            for _ in 0..20 {
                b.stat("/src/Makefile", Ok(file(5, 10, 1)));
            }
            b.findings("repeated-lookup")
        };
        let f = run("make -j2");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!((f[0].program.as_str(), f[0].owner), ("make", Owner::Own));
        let f = run("for d in a b; do make -C $d; done");
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].owner, Owner::Tool);
    }

    #[test]
    fn launchers_by_name_subcommand_and_path() {
        let l = |exe: &str, argv: &[&str]| {
            let a: Vec<&[u8]> = argv.iter().map(|s| s.as_bytes()).collect();
            let p = Program::of(exe.as_bytes(), &a);
            p.named_launcher(exe.as_bytes(), &a)
        };
        assert_eq!(
            l("/usr/bin/node", &["node", "/usr/bin/npx", "tsc"]).as_deref(),
            Some("npx")
        );
        assert_eq!(
            l(
                "/usr/bin/node",
                &[
                    "node",
                    "/usr/lib/node_modules/npm/bin/npm-cli.js",
                    "exec",
                    "tsc"
                ]
            )
            .as_deref(),
            Some("npm exec")
        );
        assert_eq!(l("/usr/bin/node", &["node", "/usr/bin/npm", "ci"]), None);
        assert_eq!(
            l("/usr/bin/env", &["/usr/bin/env", "node", "x.js"]).as_deref(),
            Some("env")
        );
        assert_eq!(
            l("/usr/bin/bash", &["/root/.pyenv/shims/python3", "stat.py"]).as_deref(),
            Some("shim")
        );
        assert_eq!(
            l(
                "/root/.pyenv/versions/3.11.7/bin/python3.11",
                &["python3", "stat.py"]
            ),
            None
        );
    }
}

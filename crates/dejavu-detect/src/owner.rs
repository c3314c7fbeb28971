//! Whose code made a call: the program's own, a dependency's (a library, a package, the
//! language's standard library), the runtime's (start-up, the module loader or import
//! system, the dynamic loader, libc), a launcher's (npx, a version manager's shim, a
//! wrapper script), or a tool's the program ran (a compiler, git). From the call's stack when it has one, else from the program and the
//! path (`owner_by_path`).

use crate::program::{Program, Runtime};
use dejavu_trace::{Frame, FrameKind, Strings};
use serde::Serialize;

/// Who can remove a finding's calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Owner {
    /// The program's own code: its developers can change it.
    Own,
    /// A library the program uses (node_modules, site-packages, a shared library, the
    /// language's standard library): fixed there, or by calling it differently.
    Dependency,
    /// The runtime and its start-up: the interpreter's import system or module loader,
    /// the dynamic loader, libc.
    Runtime,
    /// A launcher that only starts the real program: npx and `npm exec`, version
    /// managers' shims, wrapper scripts that exec the real program, `env`.
    Launcher,
    /// A tool installed on the system that the program ran (a compiler, a linker, git,
    /// `sh -c`): its own calls are its developers' to change; how often the program runs
    /// it is the program's (that finding is the program's own).
    Tool,
}

impl Owner {
    /// Lower-case name, as in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Owner::Own => "own",
            Owner::Dependency => "dependency",
            Owner::Runtime => "runtime",
            Owner::Launcher => "launcher",
            Owner::Tool => "tool",
        }
    }

    /// Every owner, in report order.
    pub const ALL: [Owner; 5] = [
        Owner::Own,
        Owner::Dependency,
        Owner::Runtime,
        Owner::Launcher,
        Owner::Tool,
    ];

    /// Whether the table folds this owner's findings into one line (without `--all`):
    /// nothing the program's developers change in their code.
    pub fn folded(self) -> bool {
        matches!(self, Owner::Runtime | Owner::Launcher | Owner::Tool)
    }
}

/// What a frame is, for choosing a call site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Plumbing between the code and the kernel: libc's wrappers, Go's runtime and
    /// syscall packages, Rust's std, Node's fs internals, Python's os/genericpath,
    /// dejavu's agents. Always skipped.
    Plumbing,
    /// The interpreter's own native code (python, libpython, node): skipped, and a call
    /// with nothing but these has no line of the program to name.
    Interpreter,
    /// The runtime's loading machinery: Node's module loader, CPython's import system,
    /// the dynamic loader. A call it makes (before any frame of the program's code) is the
    /// runtime's.
    Loader,
    /// The language's standard library (not plumbing): http/server.py, net/http.
    Stdlib,
    /// A third-party library.
    Dependency,
    /// The program's own code.
    Own,
}

fn contains(h: &[u8], n: &[u8]) -> bool {
    h.len() >= n.len() && h.windows(n.len()).any(|w| w == n)
}

fn base(p: &[u8]) -> &[u8] {
    p.rsplit(|&c| c == b'/').next().unwrap_or(p)
}

/// Python standard-library modules that only wrap file system calls (os.stat behind
/// os.path.isdir, pathlib, io): a call site inside them says nothing, the caller does.
const PY_WRAPPERS: &[&str] = &[
    "os",
    "genericpath",
    "posixpath",
    "pathlib",
    "io",
    "_pyio",
    "codecs",
    "stat",
    "shutil",
    "glob",
    "fnmatch",
    "tempfile",
];

fn py_module(file: &[u8]) -> &[u8] {
    if let Some(m) = file.strip_prefix(b"<frozen ") {
        return m.strip_suffix(b">").unwrap_or(m);
    }
    let b = base(file);
    b.strip_suffix(b".py").unwrap_or(b)
}

/// importlib's libraries a program calls, not the import system: `importlib.metadata`
/// (entry points, distributions: setuptools scans every dist-info through it) and
/// `importlib.resources` (a package's data files), with their helpers.
fn is_importlib_library(file: &[u8]) -> bool {
    [
        &b"/importlib/metadata"[..],
        b"/importlib/resources",
        b"/importlib/readers.py",
        b"/importlib/simple.py",
        b"/importlib/_adapters.py",
        b"/importlib/_common.py",
        b"/importlib/_legacy.py",
    ]
    .iter()
    .any(|p| contains(file, p))
}

fn is_py_stdlib(file: &[u8]) -> bool {
    contains(file, b"/lib/python") && !contains(file, b"-packages/") || contains(file, b"/lib/pypy")
}

/// Go package path of a function name: `cmd/go/internal/work.(*B).Do` -> `cmd/go/internal/work`.
fn go_package(function: &[u8]) -> &[u8] {
    // The package ends at the first '.' after the last '/'.
    let slash = function
        .iter()
        .rposition(|&c| c == b'/')
        .map_or(0, |i| i + 1);
    match function[slash..].iter().position(|&c| c == b'.') {
        Some(i) => &function[..slash + i],
        None => function,
    }
}

const GO_PLUMBING: &[&[u8]] = &[
    b"runtime",
    b"syscall",
    b"internal/",
    b"golang.org/x/sys/unix",
    b"os",
    b"io/fs",
    b"io/ioutil",
    b"path/filepath",
];

/// Whether a native module is an interpreter's own code.
fn is_interpreter_module(module: &[u8]) -> bool {
    // CPython's standard library in C (_posixsubprocess, _io, ...) lives in lib-dynload.
    if contains(module, b"/lib-dynload/") {
        return true;
    }
    let b = base(module);
    [
        &b"python"[..],
        b"libpython",
        b"pypy",
        b"libpypy",
        b"node",
        b"libnode",
        b"bun",
        b"ruby",
        b"libruby",
        b"perl",
        b"libperl",
        b"php",
        b"libphp",
    ]
    .iter()
    .any(|p| b.starts_with(p))
}

/// Whether a native module is, in an interpreter dejavu has no agent for
/// ([`Runtime::Script`]), the interpreter's or one of the extensions it loads: PHP's
/// (`/usr/lib/php/20220829/*.so`), Ruby's (`.../ruby/3.1.0/openssl.so`, whose `Init_*`
/// run at each `require`), Perl's XS modules (`.../perl5/5.36/auto/...`, `.../perl/5.36/`).
fn is_script_module(module: &[u8]) -> bool {
    is_interpreter_module(module)
        || contains(module, b"/lib/php/")
        || contains(module, b"/ruby/")
        || contains(module, b"/perl5/")
        || contains(module, b"/perl/5")
        || contains(module, b"/perl-base/")
}

/// Whether a path is an interpreter's own file, in one dejavu has no agent for: PHP's
/// configuration and extensions (`/etc/php/8.2/cli/conf.d/*.ini`, scanned at every
/// start), Ruby's library and gems (`/usr/lib/ruby/`, RubyGems' specifications under
/// `/var/lib/gems/`, `rubygems-integration`), Perl's modules (`/usr/share/perl/`,
/// `.../perl5/`). What its `require`, `include` of them and its start-up read.
fn is_script_runtime_path(path: &[u8]) -> bool {
    path.starts_with(b"/etc/php/")
        || contains(path, b"/lib/php/")
        || contains(path, b"/share/php/")
        || contains(path, b"/lib/ruby/")
        || contains(path, b"/ruby/gems/")
        || contains(path, b"/lib/gems/")
        || contains(path, b"/rubygems-integration/")
        || contains(path, b"/share/perl/")
        || contains(path, b"/perl5/")
        || contains(path, b"/perl-base/")
}

/// The native libraries a JDK ships in its `lib/` (and `lib/server/`): the JVM itself
/// (libjvm), its launcher's (libjli), and the native half of the Java class library
/// (libjava's FileInputStream and File, libnio's Files, libzip, libnet ...). Named as
/// shipped, without a version: another project's `libzip.so.4` is not one of them.
const JDK_LIBS: &[&[u8]] = &[
    b"libjvm.so",
    b"libjli.so",
    b"libjava.so",
    b"libnio.so",
    b"libnet.so",
    b"libzip.so",
    b"libverify.so",
    b"libjimage.so",
    b"libextnet.so",
    b"libmanagement.so",
    b"libmanagement_ext.so",
    b"libprefs.so",
    b"libjsig.so",
    b"libinstrument.so",
    b"libattach.so",
    b"libsyslookup.so",
    b"libj2pkcs11.so",
    b"libjaas.so",
    b"librmi.so",
    b"libsctp.so",
    b"libdt_socket.so",
    b"libjdwp.so",
];

/// Whether a native module is a shell's executable (`/usr/bin/bash`, `/bin/dash`).
fn is_shell_module(module: &[u8]) -> bool {
    crate::program::is_shell_name(base(module))
}

/// Whether a native module is a JDK's own code: one of [`JDK_LIBS`], or any file of a JDK
/// installed where Linux distributions put them (`/usr/lib/jvm/`: its `bin/java`).
fn is_jvm_module(module: &[u8]) -> bool {
    contains(module, b"/lib/jvm/") || JDK_LIBS.contains(&base(module))
}

/// Whether a path is a JDK's own file: its home where Linux distributions put JDKs
/// (`/usr/lib/jvm/...`: `lib/modules`, the class library's image, `jvm.cfg`,
/// `conf/security/java.security`) or Debian's `/etc/java-17-openjdk/` its `conf/` links to.
fn is_jvm_path(path: &[u8]) -> bool {
    contains(path, b"/lib/jvm/") || path.starts_with(b"/etc/java-")
}

/// Whether a function of CPython (python, libpython) is its import system's C part, which
/// runs the import machinery of `importlib._bootstrap`: `PyImport_ImportModuleLevelObject`
/// and the other `PyImport_Import*`, `import_find_and_load`, `builtin___import__`, the
/// `_imp` module's functions.
fn is_cpython_import(function: &[u8]) -> bool {
    function.starts_with(b"PyImport_Import")
        || function.starts_with(b"_PyImport_")
        || function.starts_with(b"import_find_and_load")
        || function.starts_with(b"builtin___import__")
        || function.starts_with(b"_imp_")
}

/// Whether a function of CPython reads a source file to show its line in an error: a
/// SyntaxError's (`_PyErr_ProgramDecodedTextObject`, `PyErr_ProgramText*`, from the
/// parser's `_PyPegen_raise_error*`) or a traceback's (`_Py_DisplaySourceLine`,
/// `display_source_line`). The file is the name the code was compiled with: for
/// `compile(src, "<unknown>", ...)` (ast.parse's default) CPython opens `<unknown>` in
/// the working directory at every syntax error, a runtime's look-up, not the program's
/// (hypothesis's lambda-source parsing made 56 of them, ranked first as the program's own).
fn is_cpython_error_source(function: &[u8]) -> bool {
    function.starts_with(b"_PyErr_ProgramDecodedTextObject")
        || function.starts_with(b"PyErr_ProgramText")
        || function.starts_with(b"_PyPegen_raise_error")
        || function.starts_with(b"_Py_DisplaySourceLine")
        || function.starts_with(b"display_source_line")
}

/// Whether a function of Node.js is a C++ binding only its module loader calls:
/// `internalModuleStat` and `internalModuleReadJSON` (the CommonJS loader's look-ups and
/// package.json reads, Node.js 20) and the `modules` binding that replaced the second
/// (Node.js 22: ReadPackageJSON, GetNearestParentPackageJSON, GetPackageScopeConfig, the
/// compile cache). They are not `fs`, so the agent names none of their calls.
fn is_node_loader(function: &[u8]) -> bool {
    function.starts_with(b"node::fs::InternalModuleStat")
        || function.starts_with(b"node::fs::InternalModuleReadJSON")
        || function.starts_with(b"node::modules::BindingData::")
}

/// Whether a function of Ruby's (libruby) is its `require`: `rb_require_string` and the
/// rest of `rb_require*`, which resolve each feature's path (a `realpath` per load-path
/// entry: rake's start-up resolves /usr and /usr/lib ~300 times each) and load it once.
fn is_ruby_loader(function: &[u8]) -> bool {
    function.starts_with(b"rb_require") || function.starts_with(b"rb_feature_p")
}

/// What frame `f` is, in a process running `prog`. In a dependency's program
/// ([`Program::dependency_build`]: a fetched crate's build script, esbuild's executable in
/// node_modules) the executable's own code is that dependency's, Go's and Rust's too.
pub fn classify(f: &Frame, strings: &Strings, prog: &Program) -> Class {
    match frame_class(f, strings, prog) {
        Class::Own if prog.dependency_build && f.kind == FrameKind::Native => Class::Dependency,
        c => c,
    }
}

fn frame_class(f: &Frame, strings: &Strings, prog: &Program) -> Class {
    let get = |id: Option<dejavu_trace::StrId>| id.map_or(&[][..], |i| strings.get(i));
    let file = get(f.file);
    let function = get(f.function);
    match f.kind {
        FrameKind::Js => {
            if file.is_empty() || file.ends_with(b"dejavu-agent.js") {
                return Class::Plumbing;
            }
            let internal = file.strip_prefix(b"node:").unwrap_or(file);
            if internal.starts_with(b"internal/modules/")
                || internal.starts_with(b"internal/main/")
                || internal.starts_with(b"internal/bootstrap/")
                || internal.starts_with(b"internal/process/pre_execution")
                || internal == b"module"
            {
                return Class::Loader;
            }
            if file.starts_with(b"node:") || file.starts_with(b"internal/") {
                if internal.starts_with(b"internal/fs/")
                    || internal == b"fs"
                    || internal == b"fs/promises"
                    || internal == b"path"
                    || internal.starts_with(b"internal/")
                {
                    return Class::Plumbing;
                }
                return Class::Stdlib;
            }
            // jest's module system: it resolves, loads and transforms every module a test
            // file requires, in a fresh registry per test file (its reads of jest's own
            // modules, 7,725 in a 10-file suite, were the program's "high" row), and
            // runs the transformer (babel-jest) whose config look-ups had been the test
            // file's `require` line's, as the program's own.
            if contains(file, b"/node_modules/jest-runtime/")
                || contains(file, b"/node_modules/jest-resolve/")
                || contains(file, b"/node_modules/@jest/transform/")
            {
                return Class::Loader;
            }
            js_owner(file, prog)
        }
        FrameKind::Python => {
            if file.is_empty()
                || contains(file, b"/dejavu-agent/")
                || file.ends_with(b"dejavu_agent.py")
            {
                return Class::Plumbing;
            }
            if let Some(own) = &prog.own_module {
                // `python -m http.server`: http/server.py is the program.
                let own = own.as_bytes();
                let hit = |suffix: &[u8]| {
                    file.len() > own.len() + suffix.len()
                        && file.ends_with(suffix)
                        && file[..file.len() - suffix.len()].ends_with(own)
                        && file[file.len() - suffix.len() - own.len() - 1] == b'/'
                };
                // An installed package run as a tool (`python -m pytest`): the `<module>`
                // of its __main__.py is the entry point, as a console script's (below):
                // `raise SystemExit(pytest.console_main())` names every call of the run;
                // the line that made a call is in the package's code it leads to.
                if hit(b"/__main__.py") && function == b"<module>" && contains(file, b"-packages/")
                {
                    return Class::Plumbing;
                }
                if hit(b".py") || hit(b"/__main__.py") || hit(b"/__init__.py") {
                    return Class::Own;
                }
            }
            let frozen = file.starts_with(b"<frozen ");
            let m = py_module(file);
            if frozen || is_py_stdlib(file) {
                if (m.starts_with(b"importlib") || contains(file, b"/importlib/"))
                    && !is_importlib_library(file)
                    || m == b"zipimport"
                    || m == b"runpy"
                    || m == b"site"
                    || m == b"sitecustomize"
                    // gettext looking for a translation catalog (`find`: messages.mo in
                    // each language's LC_MESSAGES, four ENOENT a call): the runtime's locale
                    // data, as libc's is, looked up at each argparse parser made (pre-commit:
                    // 236 calls named at the line that builds its parser).
                    || (m == b"gettext" && function == b"find")
                {
                    return Class::Loader;
                }
                if PY_WRAPPERS.iter().any(|w| w.as_bytes() == m) {
                    return Class::Plumbing;
                }
                return Class::Stdlib;
            }
            if file.starts_with(b"<") {
                return Class::Plumbing; // <string>, <stdin>: no file to name
            }
            // A console script pip wrote (venv/bin/black: `sys.exit(main())`): the entry
            // point, not code anyone wrote.
            if contains(file, b"/bin/") && !file.ends_with(b".py") && function == b"<module>" {
                return Class::Plumbing;
            }
            // So is the manage.py `django-admin startproject` writes: its `main()` calls
            // `execute_from_command_line(sys.argv)`, under which Django runs the command (a
            // test run's discovery, argparse's and gettext's look-ups). Its line had been the
            // site of every call the command made with no other frame of the project's, as
            // the program's own. (The project's code under it, its tests, settings and
            // apps, is still its own.)
            if base(file) == b"manage.py" && (function == b"main" || function == b"<module>") {
                return Class::Plumbing;
            }
            if contains(file, b"-packages/") {
                return site_packages_class(file, prog);
            }
            Class::Own
        }
        FrameKind::Native => {
            if function.starts_with(b"std::")
                || function.starts_with(b"core::")
                || function.starts_with(b"alloc::")
                || function.starts_with(b"<std::")
                || function.starts_with(b"<core::")
                || function.starts_with(b"<alloc::")
                || function.starts_with(b"__libc_")
                || function.starts_with(b"__GI_")
            {
                return Class::Plumbing;
            }
            let module = get(f.module);
            if module.is_empty() && file.is_empty() && function.is_empty() {
                // Code in no file: a JIT's (V8's, a JVM's) or generated code: nothing to
                // name, and in an interpreter it is the runtime's own.
                return Class::Plumbing;
            }
            if dejavu_trace::is_runtime_module(module) {
                let b = base(module);
                return if b.starts_with(b"ld-linux")
                    || b.starts_with(b"ld-2.")
                    || b.starts_with(b"ld64")
                {
                    Class::Loader
                } else {
                    Class::Plumbing
                };
            }
            if file.ends_with(b".go") || is_go_symbol(function) {
                return go_class(function, file);
            }
            // Rust's test harness (libtest: `cargo test`'s runner, its output): the
            // runtime a test binary runs on, as an interpreter is a script's. The `main`
            // it calls from is the one `rustc --test` generates (named at the crate
            // root's line 1), not a line of the program's.
            if (contains(file, b"/rustc/") && contains(file, b"/library/test/"))
                || (file.is_empty()
                    && (function.starts_with(b"test::") || function.starts_with(b"<test::")))
            {
                return Class::Loader;
            }
            if contains(file, b"/rustc/") {
                return Class::Plumbing;
            }
            // A JDK's native code in a JVM: the runtime's, as libpython's is a script's. The
            // Java code that called it is not on the stack (dejavu has no JVM agent, and
            // the JIT's frames cannot be unwound), so the call names no line, rather than
            // libjava's `handleRead` as the line of a dependency or of the program.
            if prog.runtime == Runtime::Jvm && is_jvm_module(module) {
                return Class::Interpreter;
            }
            // So is a shell's C code under a script it runs (bash's `make_child`,
            // `file_status`: configure's rows had been named at them): the script's lines
            // are not on the stack.
            if prog.runtime == Runtime::Shell && is_shell_module(module) {
                return Class::Interpreter;
            }
            // python, libpython, node, ...: asked once, for the three tests below.
            let interpreter = is_interpreter_module(module);
            if interpreter
                && (is_cpython_import(function)
                    || is_node_loader(function)
                    || is_cpython_error_source(function)
                    || is_ruby_loader(function))
            {
                // CPython's import system entered from C (a C extension's or a
                // mypyc-compiled module's `import`, PyImport_ImportModule): its look-ups
                // of the sys.path directories are the runtime's, as those it makes for
                // an `import` statement (run by <frozen importlib._bootstrap>). Node.js's
                // loader stats each folder it looks in through a binding of its own
                // (the global folders, $HOME/.node_modules and the rest, have no
                // node_modules in their path to tell them by). CPython's reads of a
                // source file for an error's line are its own too.
                return Class::Loader;
            }
            if interpreter && prog.runtime != Runtime::Native {
                return Class::Interpreter;
            }
            // So is an interpreter's that dejavu has no agent for (PHP's `php_stat`, and
            // the extensions PHP, Ruby and Perl load: Ruby's openssl.so, whose `Init_*`
            // run at a `require`): no line of the script's is on the stack, and the
            // interpreter's C code is not one to change.
            if matches!(prog.runtime, Runtime::Script(_)) && is_script_module(module) {
                return Class::Interpreter;
            }
            if let Some(c) = fetched_class(file, prog) {
                return c;
            }
            // A Python program's extension modules in site-packages are their
            // distribution's, as its .py files are: the program's own when it ships them
            // (mypy's code, compiled by mypyc into `<hash>__mypyc.cpython-311-*.so`, which
            // its top_level.txt lists: `CPyDef_metastore___connect_db`, under which
            // SQLite's calls had been named at a stripped `sub_acfb0 (libsqlite3.so)`).
            if prog.runtime == Runtime::Python && !interpreter && contains(module, b"-packages/") {
                return site_packages_class(module, prog);
            }
            if interpreter {
                return Class::Interpreter;
            }
            module_class(module, prog)
        }
    }
}

/// Whose a Python file in site-packages is: the program's own distribution's (its console
/// script's: black's files when the program is `venv/bin/black`), but for the libraries it
/// vendors (pip/_vendor/urllib3, setuptools/_vendor: their code is theirs, fixed there);
/// else a dependency's.
fn site_packages_class(file: &[u8], prog: &Program) -> Class {
    if contains(file, b"/_vendor/") || contains(file, b"/vendored/") {
        return Class::Dependency;
    }
    let name = file.rsplit(|&c| c == b'/').next().unwrap_or_default();
    for p in &prog.own_packages {
        let dir = [&b"-packages/"[..], p, b"/"].concat();
        let module = [&b"-packages/"[..], p, b".py"].concat();
        // An extension module at the top: `<p>.so`, `<p>.cpython-311-x86_64-linux-gnu.so`.
        let extension = name.len() > p.len()
            && name.starts_with(p)
            && name[p.len()] == b'.'
            && (name.ends_with(b".so") || name.ends_with(b".pyd"))
            && contains(file, &[&b"-packages/"[..], name].concat());
        if contains(file, &dir) || file.ends_with(&module) || extension {
            return Class::Own;
        }
    }
    Class::Dependency
}

/// A source file of code fetched from elsewhere (cargo's registry and git checkouts, a
/// vendored or third-party tree): a dependency's, except the package `cargo install`
/// built the program from ([`Program::own_crate`]), which is its own. None for others.
fn fetched_class(file: &[u8], prog: &Program) -> Option<Class> {
    if contains(file, b"/.cargo/registry/") {
        return Some(match &prog.own_crate {
            Some(c) if contains(file, c) => Class::Own,
            _ => Class::Dependency,
        });
    }
    (contains(file, b"/.cargo/git/")
        || contains(file, b"/vendor/")
        || contains(file, b"/third_party/")
        || contains(file, b"/third-party/"))
    .then_some(Class::Dependency)
}

/// Whose code a native module without a source file to tell by is: the executable itself
/// is the program's own (not a shared object: `cc` runs x86_64-linux-gnu-gcc-12 through a
/// symlink, so names need not match); a shared object a library's. A Node.js addon (a
/// shared object named `.node`) is a package's when node_modules holds it (Rolldown's
/// binding under `npx vite build`, of a package of its own), the program's own in its
/// own tree (build/Release/addon.node). A dependency's build script (cargo's, of a crate
/// it fetched: [`Program::dependency_build`]) is that dependency's code.
fn module_class(module: &[u8], prog: &Program) -> Class {
    let b = base(module);
    if b.ends_with(b".node") {
        return js_owner(module, prog);
    }
    if module.is_empty() || !(b.ends_with(b".so") || contains(b, b".so.")) {
        return if prog.dependency_build {
            Class::Dependency
        } else {
            Class::Own
        };
    }
    // (A native program's: an interpreter's lib/ holds its standard library's and its
    // packages' extension modules, which are not the script's own.)
    if prog.runtime == Runtime::Native && !prog.dependency_build && shipped_with(module, &prog.exe)
    {
        return Class::Own;
    }
    Class::Dependency
}

/// Whether shared object `module` was installed with executable `exe`, in the `lib/`
/// beside its `bin/` under a prefix of its own (not the system's `/usr`, `/usr/local`), and
/// is named after it: rustc's compiler is `librustc_driver-*.so` beside `bin/rustc` in its
/// toolchain, the program's own code (all of rustc's findings were "its dependencies"), as
/// is an application's `/opt/app/lib/libapp.so`. (Not a JDK's `lib/server/libjvm.so`
/// beside `bin/java`: the runtime a Java program runs on.)
fn shipped_with(module: &[u8], exe: &[u8]) -> bool {
    let name = base(exe);
    if name.len() < 2 || !contains(base(module), name) {
        return false;
    }
    let Some(bin) = exe.rsplitn(2, |&c| c == b'/').nth(1) else {
        return false;
    };
    let Some(prefix) = bin.strip_suffix(b"/bin") else {
        return false;
    };
    if prefix.is_empty() || prefix == b"/usr" || prefix == b"/usr/local" {
        return false;
    }
    module
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix(b"/lib"))
        .is_some_and(|rest| rest.starts_with(b"/") || rest.starts_with(b"64/"))
}

/// Go's standard packages a frame without a file can be told by (`syscall.RawSyscall6`).
const GO_STD_PREFIXES: &[&[u8]] = &[
    b"main.",
    b"runtime.",
    b"syscall.",
    b"os.",
    b"io.",
    b"sync.",
    b"time.",
    b"net.",
    b"fmt.",
    b"bufio.",
    b"reflect.",
];

fn is_go_symbol(function: &[u8]) -> bool {
    // `main.main`, `os.Stat`, `cmd/go/internal/work.(*Builder).Do`: a package path then
    // a dot; C and C++ names have no '/' and '.' in that shape.
    GO_STD_PREFIXES.iter().any(|p| function.starts_with(p))
        || (contains(function, b"/") && !contains(function, b"::") && contains(function, b"."))
}

fn go_class(function: &[u8], file: &[u8]) -> Class {
    // A wrapper the compiler wrote (a pointer method's for an embedded value, a method
    // value's): no line of it to change; its caller is the site.
    if file == b"<autogenerated>" {
        return Class::Plumbing;
    }
    let pkg = go_package(function);
    if GO_PLUMBING.iter().any(|p| {
        pkg == *p
            || (p.ends_with(b"/") && pkg.starts_with(p))
            || pkg.starts_with(&[p, &b"/"[..]].concat())
    }) {
        return Class::Plumbing;
    }
    if contains(file, b"/pkg/mod/") || contains(file, b"/vendor/") {
        return Class::Dependency;
    }
    let first = pkg.split(|&c| c == b'/').next().unwrap_or(pkg);
    if pkg == b"main" || pkg.starts_with(b"cmd/") || first.contains(&b'.') {
        return Class::Own;
    }
    // A standard-library package (no dot in its first element): net/http, encoding/json.
    Class::Stdlib
}

fn js_owner(file: &[u8], prog: &Program) -> Class {
    const NM: &[u8] = b"/node_modules/";
    if let Some(root) = &prog.own_root {
        if let Some(rest) = file.strip_prefix(root.as_slice()) {
            return if contains(rest, NM) || rest.starts_with(b"node_modules/") {
                Class::Dependency
            } else {
                Class::Own
            };
        }
    }
    if contains(file, NM) {
        Class::Dependency
    } else {
        Class::Own
    }
}

/// Where a stack points: the frame to name, and whose code it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    /// Index of the frame to name (innermost first), None when no frame says anything
    /// (only plumbing, or only the interpreter's C code).
    pub frame: Option<usize>,
    /// Whose call it is; None when the stack does not tell (then `owner_by_path`).
    pub owner: Option<Owner>,
}

/// The frame to name for a stack, and whose code made the call: the innermost frame of
/// the program's own code; with none, the innermost of a third-party dependency, else of
/// the standard library (a library's call into the standard library is named at the
/// library's line). A loader frame (module loader, import system, ld.so) met before either makes
/// the call the runtime's (named at the program's line that led there, a `require` or an
/// `import`); met after a library frame, it means the library's code ran as it was loaded:
/// the library's call.
pub fn pick(frames: &[Frame], strings: &Strings, prog: &Program) -> Pick {
    // Inside a tracer's callback, the frames outside it did not make the call.
    let frames = match frames.iter().position(|f| is_trace_callback(f, strings)) {
        Some(b) => &frames[..=b],
        None => frames,
    };
    let mut loader: Option<usize> = None;
    let mut library: Option<usize> = None;
    // The innermost third-party frame: named before the standard library's frames it
    // called (setuptools' `log.info` line, not logging's flush: `made in` says that one).
    let mut third_party: Option<usize> = None;
    for (i, f) in frames.iter().enumerate() {
        let class = classify(f, strings, prog);
        if class == Class::Dependency && loader.is_none() && third_party.is_none() {
            third_party = Some(i);
        }
        match class {
            Class::Plumbing | Class::Interpreter => {}
            Class::Loader => match third_party.or(library) {
                Some(lib) => {
                    return Pick {
                        frame: Some(lib),
                        owner: Some(Owner::Dependency),
                    }
                }
                None => {
                    loader.get_or_insert(i);
                }
            },
            Class::Own if foreign_in_exe(frames, i, strings, prog) => {
                if loader.is_none() && third_party.is_none() {
                    third_party = Some(i);
                }
            }
            Class::Own => {
                let owner = if loader.is_some() {
                    Owner::Runtime
                } else if frames[..i].iter().any(|f| is_sqlite(f, strings)) {
                    // SQLite's own calls (its journal and WAL probes, the size and lock
                    // checks of its files, its WAL's frame headers) under the program's
                    // line: the protocol it keeps with every other process that opens the
                    // database, not answers the program could keep. The program's line
                    // that led there is named; the calls are the library's.
                    Owner::Dependency
                } else {
                    Owner::Own
                };
                return Pick {
                    frame: Some(i),
                    owner: Some(owner),
                };
            }
            Class::Stdlib | Class::Dependency => {
                if loader.is_none() && library.is_none() {
                    library = Some(i);
                }
            }
        }
    }
    if let Some(i) = third_party.or(library) {
        return Pick {
            frame: Some(i),
            owner: Some(Owner::Dependency),
        };
    }
    if let Some(i) = loader {
        return Pick {
            frame: Some(i),
            owner: Some(Owner::Runtime),
        };
    }
    Pick {
        frame: None,
        owner: None,
    }
}

/// Whether frame `f` is where a tracer's callback begins: coverage.py's, which the
/// interpreter calls as a frame of the traced program starts, runs or returns
/// (`Coverage._should_trace` deciding whether to trace a new file: `realpath` of it, three
/// times a file). The frame it was called in did not make those calls: a test module's
/// `<module>` line had been named, as the program's own, for coverage's look-ups of the
/// module's file.
fn is_trace_callback(f: &Frame, strings: &Strings) -> bool {
    const CALLBACKS: [&[u8]; 12] = [
        b"_should_trace",
        b"_check_include_omit_etc",
        b"_trace",
        b"_installation_trace",
        b"sysmon_py_start",
        b"sysmon_py_resume",
        b"sysmon_py_return",
        b"sysmon_py_yield",
        b"sysmon_line_lines",
        b"sysmon_line_arcs",
        b"sysmon_branch_either",
        b"sysmon_branch",
    ];
    let get = |id: Option<dejavu_trace::StrId>| id.map_or(&[][..], |s| strings.get(s));
    if f.kind != FrameKind::Python || !contains(get(f.file), b"/coverage/") {
        return false;
    }
    let function = get(f.function);
    let name = function.rsplit(|&c| c == b'.').next().unwrap_or(function);
    CALLBACKS.contains(&name)
}

/// Whether frame `f` is SQLite's code: libsqlite3's, or SQLite compiled into another
/// module (its `sqlite3*` functions).
fn is_sqlite(f: &Frame, strings: &Strings) -> bool {
    let get = |id: Option<dejavu_trace::StrId>| id.map_or(&[][..], |s| strings.get(s));
    f.kind == FrameKind::Native
        && (base(get(f.module)).starts_with(b"libsqlite3")
            || get(f.function).starts_with(b"sqlite3"))
}

/// Whether own frame `i` (native, without a source file: a release build without line
/// tables, as rustup's cargo) is a dependency's code compiled into the executable:
/// - C code called from a Rust or C++ path further out in the same executable: a vendored
///   library (libgit2 and SQLite inside cargo: `git_fs_path_exists`, called from
///   `cargo::util::network::proxy::http_proxy`);
/// - a function of another crate than the executable's own (a Rust binary's crate is named
///   after it: `cargo`, `rg`) that a function of its own crate called:
///   `git2::config::Config::open_default`, `cargo_util::paths::read_bytes` in cargo.
///
/// Such a frame is named as a dependency's, and the program's frame that called it is the
/// call site (`made in` names the library's).
fn foreign_in_exe(frames: &[Frame], i: usize, strings: &Strings, prog: &Program) -> bool {
    let f = &frames[i];
    let get = |id: Option<dejavu_trace::StrId>| id.map_or(&[][..], |s| strings.get(s));
    let function = get(f.function);
    if f.kind != dejavu_trace::FrameKind::Native
        || !get(f.file).is_empty()
        || function.is_empty()
        || function == b"main"
    {
        return false;
    }
    let is_path = |name: &[u8]| contains(name, b"::");
    if !is_path(function) && !function.starts_with(b"<") {
        return frames[i + 1..].iter().any(|o| {
            o.module == f.module
                && is_path(get(o.function))
                && classify(o, strings, prog) == Class::Own
        });
    }
    let krate = rust_crate(function);
    let own = rust_crate_of_exe(&prog.exe);
    if krate.is_empty() || own.is_empty() || krate == own.as_slice() {
        return false;
    }
    // The executable's own crate calls it (further out: `cargo::main`, `cargo::init_git`).
    frames[i + 1..].iter().any(|o| {
        let n = get(o.function);
        o.module == f.module && is_path(n) && rust_crate(n) == own.as_slice()
    })
}

/// The crate of a demangled Rust path: its first segment (`git2` of
/// `<git2::config::Config>::open_default`).
fn rust_crate(function: &[u8]) -> &[u8] {
    let f = function.strip_prefix(b"<").unwrap_or(function);
    let end = f.windows(2).position(|w| w == b"::").unwrap_or(0);
    &f[..end]
}

/// The crate a Rust binary's own code is in: its target's name, which is the
/// executable's, with `-` as `_` (`cargo-clippy` -> `cargo_clippy`).
fn rust_crate_of_exe(exe: &[u8]) -> Vec<u8> {
    base(exe)
        .iter()
        .map(|&c| if c == b'-' { b'_' } else { c })
        .collect()
}

/// Whose call it is when the stack does not tell: the runtime's for what the dynamic
/// loader and libc's start-up read, and for an interpreter's module files (its import
/// system or module loader) or anything before its agent said start-up was over;
/// otherwise the program's own. `unnamed_by_agent`: the calls had stacks, of the
/// interpreter's own code only, in a process whose agent ran (so no line of the
/// program's led to them: in CPython, the import system, which calls posix.stat itself,
/// not the os.stat the agent wraps: importlib's FileFinder stats a package's directory
/// at each import from it, zipimport each new sys.path entry).
pub fn owner_by_path(
    path: &[u8],
    prog: &Program,
    before_ready: bool,
    unnamed_by_agent: bool,
) -> Owner {
    if is_loader_path(path) {
        return Owner::Runtime;
    }
    match prog.runtime {
        Runtime::Python => {
            // The script and its directory: sys.path[0], where the import system looks
            // first for every module it imports.
            let script = prog.script.as_deref();
            let script_dir = script.map(|s| &s[..s.iter().rposition(|&c| c == b'/').unwrap_or(0)]);
            if before_ready
                || unnamed_by_agent
                || is_python_module_path(path)
                || Some(path) == script
                || Some(path) == script_dir
            {
                return Owner::Runtime;
            }
        }
        Runtime::Node => {
            if before_ready || is_node_module_path(path) {
                return Owner::Runtime;
            }
        }
        Runtime::Jvm => {
            // The JDK reading its own files (its class library's image, its configuration):
            // the runtime's start-up, whatever the Java program does.
            if is_jvm_path(path) {
                return Owner::Runtime;
            }
        }
        Runtime::Script(_) => {
            // The interpreter reading its own files (configuration, its library, the
            // packages a `require` looks through): its start-up and loading.
            if is_script_runtime_path(path) {
                return Owner::Runtime;
            }
        }
        Runtime::Native if prog.dependency_build => return Owner::Dependency,
        Runtime::Shell | Runtime::Native => {}
    }
    Owner::Own
}

/// Hardware-capability subdirectories of library search paths (glibc's `tls`, platform
/// and hwcaps names): only the dynamic loader looks these up.
const HWCAP_DIRS: &[&[u8]] = &[
    b"tls",
    b"x86_64",
    b"haswell",
    b"avx512_1",
    b"x86-64-v2",
    b"x86-64-v3",
    b"x86-64-v4",
    b"i686",
    b"sse2",
    b"xeon_phi",
    b"aarch64",
    b"atomics",
];

/// What the dynamic loader and libc read on their own: the preload list and cache, shared
/// objects and the directories searched for them, locale and charset data.
pub fn is_loader_path(p: &[u8]) -> bool {
    let name = base(p);
    p.starts_with(b"/etc/ld.so.")
        || p.starts_with(b"/usr/lib/locale/")
        || p.starts_with(b"/usr/share/locale/")
        || p.starts_with(b"/usr/share/locale-langpack/")
        || contains(p, b"/gconv/")
        || contains(p, b"/glibc-hwcaps/")
        || name.ends_with(b".so")
        || contains(name, b".so.")
        || p == b"/etc/localtime"
        || p == b"/etc/nsswitch.conf"
        || p.starts_with(b"/sys/devices/system/cpu")
        // The subdirectories the dynamic loader tries under each library search directory.
        || HWCAP_DIRS.contains(&name)
        || p.starts_with(b"/proc/sys/vm/overcommit")
}

fn is_python_module_path(p: &[u8]) -> bool {
    let name = base(p);
    name.ends_with(b".py")
        || name.ends_with(b".pyc")
        || name.ends_with(b".pth")
        || name.ends_with(b".zip")
        || name == b"pyvenv.cfg"
        || name == b"__pycache__"
        || contains(p, b"/__pycache__/")
        || contains(p, b".dist-info")
        || contains(p, b".egg-info")
        || name.ends_with(b"-packages")
        || contains(p, b"/lib/python")
        || name.starts_with(b"python3")
}

/// Whether a path is one of the global folders Node.js's CommonJS loader looks in after
/// the node_modules directories (`$HOME/.node_modules`, `$HOME/.node_libraries`,
/// `PREFIX/lib/node`), or inside one: its look-ups, not the program's.
fn is_node_global_folder(p: &[u8]) -> bool {
    [&b"/.node_modules"[..], b"/.node_libraries"]
        .iter()
        .any(|d| p.ends_with(d) || contains(p, &[d, &b"/"[..]].concat()))
        || p.ends_with(b"/lib/node")
        || p.starts_with(b"/usr/lib/node/")
        || p.starts_with(b"/usr/local/lib/node/")
}

/// Whether a path is Node.js's module loading's: a module file (`.js`, `.mjs`, `.cjs`,
/// `.node`), a `package.json`, a `node_modules` directory or anything in one, a global
/// folder of the CommonJS loader.
pub(crate) fn is_node_module_path(p: &[u8]) -> bool {
    let name = base(p);
    contains(p, b"/node_modules/")
        || p.ends_with(b"/node_modules")
        || is_node_global_folder(p)
        || name == b"package.json"
        || [&b".js"[..], b".mjs", b".cjs", b".node"]
            .iter()
            .any(|e| name.ends_with(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_packages_split_std_plumbing_and_own() {
        assert_eq!(
            go_class(
                b"internal/runtime/syscall.Syscall6",
                b"/go/src/internal/runtime/syscall/x.go"
            ),
            Class::Plumbing
        );
        assert_eq!(
            go_class(b"syscall.fstatat", b"/go/src/syscall/zsyscall.go"),
            Class::Plumbing
        );
        assert_eq!(go_class(b"os.Stat", b"/go/src/os/stat.go"), Class::Plumbing);
        assert_eq!(
            go_class(b"os.(*File).Write", b"/go/src/os/file.go"),
            Class::Plumbing
        );
        assert_eq!(
            go_class(
                b"cmd/go/internal/work.showStdout",
                b"/go/src/cmd/go/internal/work/exec.go"
            ),
            Class::Own
        );
        assert_eq!(go_class(b"main.probeAll", b"/src/main.go"), Class::Own);
        assert_eq!(
            go_class(
                b"github.com/spf13/afero.(*BasePathFile).Close",
                b"<autogenerated>"
            ),
            Class::Plumbing
        );
        assert_eq!(
            go_class(b"net/http.(*conn).serve", b"/go/src/net/http/server.go"),
            Class::Stdlib
        );
        assert_eq!(
            go_class(
                b"github.com/x/y.Z",
                b"/root/go/pkg/mod/github.com/x/y@v1/z.go"
            ),
            Class::Dependency
        );
        assert_eq!(
            go_class(b"example.com/app/store.Load", b"/src/store/load.go"),
            Class::Own
        );
    }

    #[test]
    fn code_of_other_crates_and_c_inside_a_rust_binary_without_lines_is_a_dependencys() {
        use crate::testkit::{file, TraceBuilder};
        const CARGO: &str = "/opt/rust/bin/cargo";
        const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";
        let run = |frames: &[(&str, &str)]| {
            let mut b = TraceBuilder::new();
            b.exec(CARGO, &["cargo", "check"]);
            let st = b.native_stack(frames);
            b.stack = Some(st);
            for _ in 0..12 {
                b.stat("/root/.gitconfig", Ok(file(5, 10, 1)));
            }
            let f = b.findings("repeated-lookup");
            assert_eq!(f.len(), 1, "{f:#?}");
            (f[0].owner, f[0].callsites[0].function.clone())
        };
        // libgit2 (C) under git2 (another crate) under cargo's own: cargo's line.
        assert_eq!(
            run(&[
                ("__access", LIBC),
                ("git_fs_path_exists", CARGO),
                ("<git2::config::Config>::open_default", CARGO),
                ("cargo::util::network::proxy::http_proxy", CARGO),
                ("cargo::main", CARGO),
            ]),
            (
                Owner::Own,
                "cargo::util::network::proxy::http_proxy".to_string()
            )
        );
        // A C program's own function without lines stays its own.
        assert_eq!(
            run(&[("__access", LIBC), ("load_config", CARGO), ("main", CARGO)]),
            (Owner::Own, "load_config".to_string())
        );
        // Another crate's function with no frame of cargo's own crate further out (a
        // thread's stack): left as it was.
        assert_eq!(
            run(&[
                ("__access", LIBC),
                ("<git2::config::Config>::open_default", CARGO),
                ("std::sys::thread::start", CARGO),
            ])
            .1,
            "<git2::config::Config>::open_default"
        );
    }

    #[test]
    fn the_crate_cargo_installed_the_program_from_is_its_own() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("bin")).unwrap();
        std::fs::write(
            d.path().join(".crates2.json"),
            r#"{"installs":{
                "fd-find 10.2.0 (registry+https://github.com/rust-lang/crates.io-index)":{"bins":["fd"]},
                "ripgrep 15.2.0 (registry+https://github.com/rust-lang/crates.io-index)":{"bins":["rg"]},
                "tool 0.1.0 (git+https://example.com/tool#abc)":{"bins":["tool"]}}}"#,
        )
        .unwrap();
        let reg = b"/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/";
        let file = |pkg: &str| [&reg[..], pkg.as_bytes(), b"/crates/core/main.rs"].concat();
        let exe = d.path().join("bin/rg");
        let mut rg = Program::of(exe.as_os_str().as_encoded_bytes(), &[b"rg", b"fn"]);
        rg.resolve_cargo_install();
        assert_eq!(rg.own_crate.as_deref(), Some(&b"/ripgrep-15.2.0/"[..]));
        assert_eq!(
            fetched_class(&file("ripgrep-15.2.0"), &rg),
            Some(Class::Own)
        );
        // Its dependencies, another version of it, and code outside the registry.
        for dep in ["grep-printer-0.3.1", "ripgrep-14.1.0", "regex-1.12.2"] {
            assert_eq!(
                fetched_class(&file(dep), &rg),
                Some(Class::Dependency),
                "{dep}"
            );
        }
        assert_eq!(fetched_class(b"/src/rg/main.rs", &rg), None);
        // A binary from git, one cargo did not install, one outside bin/: no own crate.
        for (path, name) in [("bin/tool", "tool"), ("bin/other", "other"), ("rg", "rg")] {
            let exe = d.path().join(path);
            let mut p = Program::of(exe.as_os_str().as_encoded_bytes(), &[name.as_bytes()]);
            p.resolve_cargo_install();
            assert_eq!(p.own_crate, None, "{path}");
        }
    }

    #[test]
    fn a_shared_object_installed_with_the_executable_is_its_own() {
        let rustc = Program::of(
            b"/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/bin/rustc",
            &[b"rustc", b"h.rs"],
        );
        let driver =
            b"/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/lib/librustc_driver-6108105cd7e839cf.so";
        assert_eq!(module_class(driver, &rustc), Class::Own);
        assert_eq!(
            module_class(b"/usr/lib/x86_64-linux-gnu/libz.so.1", &rustc),
            Class::Dependency
        );
        // The system's prefixes hold every program's libraries.
        let git = Program::of(b"/usr/bin/git", &[b"git", b"status"]);
        assert_eq!(
            module_class(b"/usr/lib/x86_64-linux-gnu/libpcre2-8.so.0", &git),
            Class::Dependency
        );
        let app = Program::of(b"/opt/app/bin/app", &[b"app"]);
        assert_eq!(module_class(b"/opt/app/lib/libapp.so", &app), Class::Own);
        assert_eq!(
            module_class(b"/opt/app/lib64/libapp.so.2", &app),
            Class::Own
        );
        assert_eq!(
            module_class(b"/opt/other/lib/libx.so", &app),
            Class::Dependency
        );
        assert_eq!(
            module_class(b"/opt/app/lib/libz.so.1", &app),
            Class::Dependency
        );
        let java = Program::of(
            b"/usr/lib/jvm/java-17/bin/java",
            &[b"java", b"-jar", b"a.jar"],
        );
        assert_eq!(
            module_class(b"/usr/lib/jvm/java-17/lib/server/libjvm.so", &java),
            Class::Dependency
        );
        // (classify never asks module_class about a JDK's code in a JVM: it is the
        // runtime's, tests/findings.rs `a_java_programs_reread_is_its_own...`.)
        assert!(is_jvm_module(b"/usr/lib/jvm/java-17/lib/server/libjvm.so"));
        assert!(is_jvm_module(b"/opt/java/openjdk/lib/libjava.so"));
        assert!(!is_jvm_module(b"/usr/lib/x86_64-linux-gnu/libzip.so.4"));
        // The JDK reading its own files is its start-up; the program's files are its own.
        assert_eq!(java.runtime, Runtime::Jvm);
        for jdk in [
            &b"/usr/lib/jvm/java-17/lib/modules"[..],
            b"/usr/lib/jvm/java-17/conf/security/java.security",
            b"/etc/java-17-openjdk/security/java.security",
        ] {
            assert_eq!(owner_by_path(jdk, &java, false, false), Owner::Runtime);
        }
        assert_eq!(
            owner_by_path(b"/srv/app/app.properties", &java, false, false),
            Owner::Own
        );
        // An interpreter dejavu has no agent for: its C code and extensions, its files.
        let rb = Program::of(b"/usr/bin/ruby3.1", &[b"/usr/bin/ruby3.1", b"/usr/bin/gem"]);
        assert!(is_script_module(
            b"/usr/lib/x86_64-linux-gnu/ruby/3.1.0/openssl.so"
        ));
        assert!(is_script_module(b"/usr/lib/php/20220829/opcache.so"));
        assert!(is_script_module(b"/usr/bin/php8.2"));
        assert!(is_script_module(
            b"/usr/lib/x86_64-linux-gnu/perl5/5.36/auto/List/Util/Util.so"
        ));
        assert!(!is_script_module(b"/usr/lib/x86_64-linux-gnu/libssl.so.3"));
        assert!(is_ruby_loader(b"rb_require_string"));
        for rt in [
            &b"/var/lib/gems/3.1.0/specifications/rake-13.0.gemspec"[..],
            b"/usr/lib/ruby/3.1.0/rubygems.rb",
            b"/etc/php/8.2/cli/conf.d/10-opcache.ini",
            b"/usr/share/perl/5.36/strict.pm",
        ] {
            assert_eq!(owner_by_path(rt, &rb, false, false), Owner::Runtime);
        }
        assert_eq!(
            owner_by_path(b"/srv/app/config.yml", &rb, false, false),
            Owner::Own
        );
        // An interpreter's lib/ holds extension modules: not a script's own.
        let py = Program::of(b"/venv/bin/python3", &[b"python3", b"/src/app.py"]);
        assert_eq!(
            module_class(
                b"/venv/lib/python3.11/site-packages/numpy/_core/_multiarray_umath.so",
                &py
            ),
            Class::Dependency
        );
    }

    #[test]
    fn a_node_addon_is_its_packages_and_the_executable_the_programs() {
        let vite = Program::of(
            b"/usr/bin/node",
            &[b"node", b"/p/node_modules/vite/bin/vite.js", b"build"],
        );
        let binding = b"/p/node_modules/@rolldown/binding-linux-x64-gnu/rolldown.node";
        assert_eq!(module_class(binding, &vite), Class::Dependency);
        let app = Program::of(b"/usr/bin/node", &[b"node", b"/p/index.js"]);
        assert_eq!(
            module_class(b"/p/build/Release/addon.node", &app),
            Class::Own
        );
        assert_eq!(module_class(binding, &app), Class::Dependency);
        let c = Program::of(b"/p/a.out", &[b"./a.out"]);
        assert_eq!(module_class(b"/p/a.out", &c), Class::Own);
        assert_eq!(module_class(b"/usr/lib/libz.so.1.2", &c), Class::Dependency);
    }

    #[test]
    fn a_python_tools_vendored_libraries_are_dependencies() {
        let mut pip = Program::of(b"/venv/bin/python3", &[b"python3", b"-m", b"pip", b"list"]);
        pip.own_packages = vec![b"pip".to_vec()];
        let sp = "/venv/lib/python3.11/site-packages";
        let class = |f: &str| site_packages_class(format!("{sp}/{f}").as_bytes(), &pip);
        assert_eq!(class("pip/_internal/cli/main.py"), Class::Own);
        assert_eq!(
            class("pip/_vendor/urllib3/connection.py"),
            Class::Dependency
        );
        assert_eq!(class("requests/api.py"), Class::Dependency);
    }

    #[test]
    fn a_python_scripts_directory_is_where_imports_look() {
        let prog = Program::of(
            b"/venv/bin/python3",
            &[b"/venv/bin/python3", b"/venv/bin/black", b"."],
        );
        assert_eq!(
            owner_by_path(b"/venv/bin", &prog, false, false),
            Owner::Runtime
        );
        assert_eq!(
            owner_by_path(b"/venv/bin/black", &prog, false, false),
            Owner::Runtime
        );
        assert_eq!(
            owner_by_path(b"/srv/code/a.txt", &prog, false, false),
            Owner::Own
        );
        // Stacks of the interpreter's code alone, where the agent ran: the import system.
        assert_eq!(
            owner_by_path(b"/srv/code/pkg", &prog, false, true),
            Owner::Runtime
        );
        let native = Program::of(b"/srv/app", &[b"/srv/app"]);
        assert_eq!(
            owner_by_path(b"/srv/code/pkg", &native, false, true),
            Owner::Own
        );
    }

    #[test]
    fn cpythons_import_functions_are_its_import_system() {
        for f in [
            &b"PyImport_ImportModuleLevelObject"[..],
            b"PyImport_ImportModule",
            b"PyImport_Import",
            b"import_find_and_load",
            b"import_find_and_load.lto_priv.0",
            b"builtin___import___impl",
            b"_PyImport_LoadDynamicModuleWithSpec",
            b"_imp_create_dynamic",
        ] {
            assert!(is_cpython_import(f), "{}", String::from_utf8_lossy(f));
        }
        for f in [
            &b"_PyEval_EvalFrameDefault"[..],
            b"posix_do_stat",
            b"PyObject_CallMethodObjArgs",
            b"import_name",
            b"CPyImport_ImportMany",
        ] {
            assert!(!is_cpython_import(f), "{}", String::from_utf8_lossy(f));
        }
    }

    #[test]
    fn cpythons_reads_of_source_for_an_error_are_its_own() {
        for f in [
            &b"_PyErr_ProgramDecodedTextObject"[..],
            b"PyErr_ProgramTextObject",
            b"_PyPegen_raise_error_known_location",
            b"_Py_DisplaySourceLine",
            b"display_source_line.lto_priv.0",
        ] {
            assert!(is_cpython_error_source(f), "{}", String::from_utf8_lossy(f));
        }
        for f in [&b"_Py_fopen_obj"[..], b"builtin_compile", b"posix_do_stat"] {
            assert!(
                !is_cpython_error_source(f),
                "{}",
                String::from_utf8_lossy(f)
            );
        }
    }

    #[test]
    fn nodes_loader_bindings_are_its_module_loader() {
        for f in [
            &b"node::fs::InternalModuleStat(v8::FunctionCallbackInfo<v8::Value> const&)"[..],
            b"node::fs::InternalModuleReadJSON(v8::FunctionCallbackInfo<v8::Value> const&)",
            b"node::modules::BindingData::ReadPackageJSON(v8::FunctionCallbackInfo<v8::Value> const&)",
        ] {
            assert!(is_node_loader(f), "{}", String::from_utf8_lossy(f));
        }
        for f in [
            &b"node::fs::Stat(v8::FunctionCallbackInfo<v8::Value> const&)"[..],
            b"node::fs::ReadFileUtf8(v8::FunctionCallbackInfo<v8::Value> const&)",
            b"uv_fs_stat",
        ] {
            assert!(!is_node_loader(f), "{}", String::from_utf8_lossy(f));
        }
    }

    #[test]
    fn loader_and_module_paths() {
        assert!(is_loader_path(b"/etc/ld.so.preload"));
        assert!(is_loader_path(b"/usr/lib/x86_64-linux-gnu/libz.so.1"));
        assert!(is_loader_path(
            b"/usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v3"
        ));
        assert!(!is_loader_path(b"/srv/app/config.json"));
        assert!(is_python_module_path(
            b"/usr/lib/python3.11/json/__init__.py"
        ));
        assert!(!is_python_module_path(b"/etc/hostname"));
        assert!(is_node_module_path(
            b"/app/node_modules/express/package.json"
        ));
        assert!(!is_node_module_path(b"/app/config.json"));
    }
}

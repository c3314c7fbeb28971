"""dejavu's Python loader: `dejavu record` puts a zip holding this file first on
PYTHONPATH, so Python runs it as `sitecustomize` at startup. It runs _dejavu_site.py,
beside the zip, with its bytecode: the zip importer compiles a module's source at every
import (twice in CPython 3.11), so what is here is only what finds that file.
"""

import sys as _sys


def _exec(spec, module):
    """Runs `module` (of `spec`, a file of ours), its bytecode written beside it whatever
    the program's setting for its own files: compiling it at every start would cost
    milliseconds. No code of the program runs while the setting is changed."""
    keep = _sys.dont_write_bytecode
    _sys.dont_write_bytecode = False
    try:
        spec.loader.exec_module(module)
    finally:
        _sys.dont_write_bytecode = keep


def _site():
    """_dejavu_site, loaded from beside the zip; None if it cannot be."""
    try:
        external = _sys.modules["_frozen_importlib_external"]
        bootstrap = _sys.modules["_frozen_importlib"]
        entry = __file__.rpartition("/")[0]
        here = entry.rpartition("/")[0] if entry.endswith(".zip") else entry
        spec = external.spec_from_file_location("_dejavu_site", here + "/_dejavu_site.py")
        module = bootstrap.module_from_spec(spec)
        _exec(spec, module)
        return module
    except Exception:
        return None


_SITE = _site()
if _SITE is None:
    # Never into the program: without the loader it runs as without dejavu (our entry
    # off sys.path; the program's own sitecustomize is not run).
    _ENTRY = __file__.rpartition("/")[0]
    while _ENTRY in _sys.path:
        _sys.path.remove(_ENTRY)
if _SITE is None or not _SITE.run(__file__, _exec):
    # Without dejavu there is no sitecustomize: site ignores exactly this error, and the
    # import system takes this module out of sys.modules, so the program finds no
    # `sitecustomize`, as without dejavu.
    raise ImportError("No module named 'sitecustomize'", name="sitecustomize")

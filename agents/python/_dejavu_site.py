"""dejavu's Python loader, run by the `sitecustomize` that `dejavu record` puts first on
PYTHONPATH in a zip (agents/python/sitecustomize.py; Python runs it at startup). It loads
the agent (_dejavu_agent.py, beside the zip) when dejavu is recording, then runs the
sitecustomize the program would have loaded without dejavu, and takes the zip off
sys.path.

Why a zip: every import during startup looks in each sys.path entry before the one that
has the module; a directory costs a stat per import (dozens, all recorded), a zip is
looked up in memory. Why this file and the agent are not in the zip: the zip importer
never caches bytecode (it compiles a module's source at every import, twice in CPython
3.11), and compiling the agent at every start would cost milliseconds, this file ~0.4 ms;
beside the zip each is compiled once, and dejavu keeps their bytecode between recordings.
A Python that loads this while dejavu is not recording pays next to nothing.
"""

import os as _os
import sys as _sys


def _load_agent(here, run_module):
    """Loads the agent from `here` when dejavu is recording (`run_module`: the stub's
    `_exec`, which keeps the agent's bytecode)."""
    if not _os.environ.get("DEJAVU_AGENT_FD"):
        return
    external = _sys.modules["_frozen_importlib_external"]
    bootstrap = _sys.modules["_frozen_importlib"]
    path = _os.path.join(here, "_dejavu_agent.py")
    spec = external.spec_from_file_location("_dejavu_agent", path)
    module = bootstrap.module_from_spec(spec)
    _sys.modules["_dejavu_agent"] = module
    try:
        run_module(spec, module)
    finally:
        if getattr(module, "_fd", -1) < 0:
            # Not recording (no valid channel): nothing of ours stays visible.
            _sys.modules.pop("_dejavu_agent", None)


def _chain(entry):
    """Takes `entry` (ours) off sys.path, then loads the sitecustomize the program would
    have loaded without us: the next one on sys.path, as the module `sitecustomize`. Its
    exceptions propagate, so site reports them exactly as it would have. Returns whether
    there was one."""
    while entry in _sys.path:
        _sys.path.remove(entry)
    _sys.path_importer_cache.pop(entry, None)
    external = _sys.modules.get("_frozen_importlib_external")
    bootstrap = _sys.modules.get("_frozen_importlib")
    if external is None or bootstrap is None:
        return False
    spec = external.PathFinder.find_spec("sitecustomize", _sys.path)
    if spec is None or spec.loader is None:
        return False
    module = bootstrap.module_from_spec(spec)
    # The import that runs us returns whatever sys.modules holds when we are done.
    _sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)
    return True


def _entry(stub):
    """Our sys.path entry (the zip, or a plain directory in tests), the `sitecustomize` at
    `stub`'s, and the directory the agent is in."""
    entry = _os.path.dirname(stub)
    here = _os.path.dirname(entry) if entry.endswith(".zip") else entry
    return entry, here


def run(stub, run_module):
    """Everything the loader does, for the `sitecustomize` at `stub` (its __file__; and
    its `_exec`, `run_module`): whether the program had a sitecustomize of its own (now
    sys.modules' `sitecustomize`, run). Its exceptions are that sitecustomize's (_chain)."""
    entry, here = _entry(stub)
    try:
        _load_agent(here, run_module)
    except Exception:
        # Never into the program: without an agent it runs as without dejavu.
        pass
    return _chain(entry)

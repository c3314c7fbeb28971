"""c_import.py: imports made through CPython's C API (as a C extension or a mypyc-compiled
module makes them), for the owner test in crates/dejavu/tests/findings.rs: the import
system's look-ups of the sys.path directories are the runtime's, even when the innermost
frame that is not the interpreter's is a library's (here libffi's, under ctypes).

usage: python3 c_import.py N   (N imports of a module that does not exist; 1 is the twin)"""
import ctypes
import sys

n = int(sys.argv[1])
import_module = ctypes.pythonapi.PyImport_ImportModule
import_module.restype = ctypes.py_object
import_module.argtypes = [ctypes.c_char_p]
missing = 0
for _ in range(n):
    try:
        import_module(b"dejavu_no_such_module")  # C_IMPORT
    except ModuleNotFoundError:
        missing += 1
print(f"c_import.py: {missing} of {n} imports found no module")

"""An installed tool's entry, run as `python -m tool` (the test lays this out as
site-packages/tool/__main__.py): as pytest's, it only calls the package's code.
"""
import sys

import _tool

raise SystemExit(_tool.main(sys.argv[1:]))

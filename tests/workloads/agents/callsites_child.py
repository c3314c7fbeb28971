"""callsites_child.py: a child process of callsites.py (started by subprocess, which
closes inherited descriptors); its agent reports over the pipe the agent kept open."""
import os
import sys


def child_site(p):
    return os.lstat(p)  # @site child child_site


child_site(sys.argv[1])

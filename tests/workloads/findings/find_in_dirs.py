"""One loop, two lookup findings: every translator looks its stylesheet up in two
directories (docutils' find_file_in_dirs under sphinx-build): the first has no such file
(a failure asked again: negative-probe), the second has it (an answer asked again:
repeated-lookup). One cache of the found path fixes both.

usage: python3 find_in_dirs.py N   (N translators; N = 1 is the clean twin: the path is
looked up once and kept)"""
import os
import sys

here = os.getcwd()
dirs = [os.path.join(here, "theme"), os.path.join(here, "base")]
os.makedirs(dirs[1], exist_ok=True)
with open(os.path.join(dirs[1], "style.css"), "w") as f:
    f.write("body {}\n")


def find(name):
    for d in dirs:
        p = os.path.join(d, name)
        if os.path.exists(p):  # the lookup
            return p
    return None


class Translator:
    def __init__(self):
        self.css = find("style.css")


for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 60):
    Translator()

"""listing.py: a directory listed again and again through os.scandir, whose reads of the
directory (getdents64) come after the wrapped call returned, as the program iterates:
they must name the scandir line (crates/dejavu/tests/agent_gaps.rs,
python_a_directory_listed_through_scandir_names_the_scandir_line_on_its_reads).

usage: python3 listing.py DIR"""
import os
import sys


def listing(d, n):
    names = 0
    for _ in range(n):
        with os.scandir(d) as it:  # @site scandir listing
            for _e in it:
                names += 1
    return names


print(f"listing.py: {listing(sys.argv[1], 20)} names")

"""Prints the project's build requirements ([build-system] requires), one per line.

Usage: TOOLS/bin/python build_requires.py ROOT

scripts/test installs them in its tools venv, so that the builds without a compiler can run
without build isolation (no fresh build environment per build) and with the same pins.
"""

import sys

from build import ProjectBuilder

if __name__ == "__main__":
    print("\n".join(sorted(ProjectBuilder(sys.argv[1]).build_system_requires)))

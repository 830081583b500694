"""Names the Debian packages this Python lacks to build and test crawldedup, one per line.

Usage: python missing_python_parts.py

Fails on a Python older than 3.9. Prints python3-dev when Python.h is missing (the extensions
compile against it) and python3-venv when ensurepip or venv is (the tests run in a fresh venv).
"""

import importlib.util
import os
import sysconfig

if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
    print("python3-dev")
if not all(importlib.util.find_spec(name) for name in ("ensurepip", "venv")):
    print("python3-venv")

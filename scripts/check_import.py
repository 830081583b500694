"""Checks that ``import crawldedup`` finds the package installed in a venv, not the checkout.

Usage: VENV/bin/python check_import.py ROOT VENV
"""

import sys
from pathlib import Path

import crawldedup


def main(root: Path, venv: Path) -> None:
    location = Path(crawldedup.__file__).resolve()
    print(f"crawldedup {crawldedup.__version__} imported from {location}")
    if root in location.parents or venv not in location.parents:
        sys.exit(f"crawldedup was imported from {location}, not from the package installed in {venv}")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())

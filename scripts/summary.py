"""Prints each test run's counts from its JUnit XML, then one closing line for all runs.

Usage: summary.py JUNIT_XML...   (files named junit-RUN.xml)
"""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def counts(path: str) -> tuple[int, int, int]:
    """Passed, failed (failures and errors) and skipped tests of one run."""
    suite = ET.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    tests, skipped = int(suite.get("tests")), int(suite.get("skipped"))
    failed = int(suite.get("failures")) + int(suite.get("errors"))
    return tests - skipped - failed, failed, skipped


def main(paths: list[str]) -> None:
    totals = [0, 0, 0]
    for path in paths:
        passed, failed, skipped = counts(path)
        name = Path(path).stem.removeprefix("junit-")
        print(f"{name} run: {passed} passed, {failed} failed, {skipped} skipped")
        totals = [t + n for t, n in zip(totals, (passed, failed, skipped))]
    print(f"total: {totals[0]} passed, {totals[1]} failed, {totals[2]} skipped")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Checks auditwheel's verdict on the repaired wheel.

Usage: check_auditwheel.py SHOW_LOG REPAIRED_WHEEL

SHOW_LOG is the output of ``auditwheel -v show``. Fails unless the wheel has a manylinux tag,
needs no library outside the manylinux policy, and had none grafted into it.
"""

import re
import sys
import zipfile


def main(show_log: str, wheel: str) -> None:
    with open(show_log, encoding="utf-8") as log:
        report = " ".join(log.read().split())  # show wraps its sentences at any width
    tag = re.search(r'consistent with the following platform tag: "([^"]+)"', report)
    with zipfile.ZipFile(wheel) as whl:
        grafted = [n for n in whl.namelist() if ".libs/" in n]
    if not tag or not tag.group(1).startswith("manylinux_"):
        sys.exit(f"auditwheel show: no manylinux_* platform tag ({tag.group(1) if tag else 'none found'})")
    if "requires no external shared libraries" not in report or grafted:
        sys.exit(f"the wheel needs libraries beyond the manylinux policy: {grafted or 'see auditwheel show above'}")
    print(f"\nauditwheel show: {tag.group(1)}, no external libraries beyond the policy's")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

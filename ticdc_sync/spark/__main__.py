"""`python -m ticdc_sync.spark --fetch DIR [--s3]`: download the connector jars a run needs
into DIR, for machines that cannot reach Maven Central (`spark.jars_dir` in profiles.yml).

A maintenance helper with a path that does not follow the package's inner layout.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ticdc_sync.spark.runtime.session import fetch_all

USAGE = "usage: python -m ticdc_sync.spark --fetch DIR [--s3]"


def main(argv: list[str]) -> int:
    if len(argv) in (2, 3) and argv[0] == "--fetch" and argv[2:] in ([], ["--s3"]):
        for p in fetch_all(Path(argv[1]), s3=argv[2:] == ["--s3"]):
            print(p)
        return 0
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover - run as a process by the tests
    sys.exit(main(sys.argv[1:]))

"""``python -m compat report``: run the compat suite and write ``compat/REPORT.md``.

``report`` runs ``pytest compat/test_compat.py`` (extra arguments after ``--`` go to pytest,
e.g. ``-k produce``) with ``COMPAT_RESULTS`` set, then renders the report from the results;
``report --results FILE`` only renders an existing results file. The exit status is 0 when
the report was written, whatever the differences (they are in the report).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from compat import report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rep = commands.add_parser("report", help="run the compat suite and write compat/REPORT.md")
    rep.add_argument("--results", type=Path, help="render this results file instead of running the suite")
    rep.add_argument("--out", type=Path, default=report.REPORT, help="where to write the report")
    rep.add_argument("--keep-results", type=Path, help="also save the raw results (JSON) here")
    rep.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)

    if args.results is not None:
        print(report.write(args.results, out=args.out))
        return 0
    with tempfile.TemporaryDirectory(prefix="compat-report-") as tmp:
        results = Path(tmp) / "results.json"
        env = {**os.environ, "COMPAT_RESULTS": str(results)}
        started = time.monotonic()
        cmd = [sys.executable, "-m", "pytest", str(Path(__file__).with_name("test_compat.py")), "-q",
               "-p", "no:cacheprovider", *args.pytest_args]  # fmt: skip
        subprocess.run(cmd, env=env, cwd=Path(__file__).resolve().parent.parent, check=False)
        seconds = time.monotonic() - started
        if not results.exists():
            print("compat report: the suite wrote no results (did the targets start?)", file=sys.stderr)
            return 1
        if args.keep_results is not None:
            args.keep_results.write_text(results.read_text())
        print(report.write(results, seconds, out=args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

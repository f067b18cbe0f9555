"""How long one `agefacts facts` takes end to end, as a person types it: a new process each
time (interpreter, imports, connecting, the read), against an engine that is already running.

    python scripts/start_time.py [--runs 20] [--namespace nina] [-- extra facts arguments]

Load something first (``agefacts load agefacts/examples``); the engine (or AGEFACTS_DSN) is the
one the command would use. Prints the minimum and the median wall time of the runs, and the
time of importing what the command imports, measured in the same way."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def timed(argv: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--namespace", default="nina")
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    command = [sys.executable, "-m", "agefacts", "facts", "user", "--namespace", args.namespace, *args.extra]
    cases = {
        "python alone": [sys.executable, "-c", "pass"],
        "imports of facts": [sys.executable, "-c", "import agefacts.cli, agefacts.reads, agefacts.output"],
        "agefacts facts": command,
    }
    for name, argv in cases.items():
        times = timed(argv, args.runs)
        print(f"{name:18} min {1000 * min(times):6.0f} ms   median {1000 * statistics.median(times):6.0f} ms")


if __name__ == "__main__":
    main()

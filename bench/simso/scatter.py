#!/usr/bin/env python3
"""How much one set's timed run scatters between fresh processes: the
`sim` figure of compare.py (punctual's "s of CPU", the run of its built
machine) over N fresh runs of the set of SEED under POLICY, late jobs
aborted, and the spread of the medians of consecutive groups of three
runs (what compare.py took per set before it repeated short runs).

Usage: scatter.py WORKDIR PUNCTUAL_BIN SEED POLICY [N]   (N default 30)
"""
import statistics
import sys

sys.path.insert(0, sys.path[0])
from compare import draw, punctual  # noqa: E402
from gen_taskset import write  # noqa: E402


def main():
    work, binary, seed, policy = sys.argv[1:5]
    n_runs = int(sys.argv[5]) if len(sys.argv) > 5 else 30
    n, u, tasks = draw(int(seed))
    write(work, "scatter", tasks, 2, f"{policy.upper()} seed {seed}", policy)
    us = [punctual(binary, f"{work}/scatter.toml")[1][0] * 1e6 for _ in range(n_runs)]
    threes = [statistics.median(us[i:i + 3]) for i in range(0, n_runs - 2, 3)]
    print(f"seed {seed} {policy.upper()} ({n} tasks, U {u}): {n_runs} runs, "
          f"min {min(us):.0f} us, median {statistics.median(us):.0f} us, "
          f"max {max(us):.0f} us; medians of three {min(threes):.0f}"
          f"-{max(threes):.0f} us")


if __name__ == "__main__":
    main()

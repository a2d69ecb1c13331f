#!/usr/bin/env python3
"""Side-by-side SimSo vs punctual on the same EDF task sets (issue 3).

Outcomes: per task jobs completed, deadline misses, preemptions, over the
same 10 s window. Speed: job events (releases + completions) per second of
wall time, SimSo timed around run_model() alone and punctual as the whole
process (parsing and record writing included, so punctual's side is the
conservative one); punctual also runs 100x longer so that its time is not
dominated by process start. Several alternating rounds, medians.

Usage: compare.py WORKDIR PUNCTUAL_BIN SIMSO_PYTHON [ROUNDS]
"""
import json
import statistics
import subprocess
import sys
import time

HERE = sys.path[0]


def punctual(binary, toml, duration=None):
    cmd = [binary, "simulate", toml, "--json", toml + ".out.json"]
    if duration:
        cmd += ["--duration", duration]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    rec = json.load(open(toml + ".out.json"))
    return wall, rec["extra"]["sim"]["tasks"]


def simso(py, js):
    out = subprocess.run([py, f"{HERE}/run_simso.py", js], check=True,
                         capture_output=True, text=True).stdout
    d = json.loads(out)
    return d["wall_s"], d["tasks"]


def job_events(tasks):
    return sum(t["releases"] + t["jobs"] for t in tasks.values())


def main():
    work, binary, py = sys.argv[1:4]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    all_same = True
    for name in ("edf3", "edf20"):
        toml, js = f"{work}/{name}.toml", f"{work}/{name}.json"
        s_walls, p_walls, p_long = [], [], []
        for _ in range(rounds):
            sw, st = simso(py, js)
            pw, pt = punctual(binary, toml)
            lw, lt = punctual(binary, toml, "1000s")
            s_walls.append(sw)
            p_walls.append(pw)
            p_long.append(lw)
        print(f"\n== {name}: {len(st)} tasks, 10 s simulated, EDF ==")
        print(f"{'task':6} {'jobs S/P':>13} {'misses S/P':>11} "
              f"{'preempt S/P':>13} {'simso raw':>9}  same")
        for t in st:
            a, b = st[t], pt[t]
            same = (a["jobs"] == b["jobs"]
                    and a["deadline_misses"] == b["deadline_misses"]
                    and a["preemptions"] == b["preemptions"])
            all_same &= same
            print(f"{t:6} {a['jobs']:>6}/{b['jobs']:<6} "
                  f"{a['deadline_misses']:>5}/{b['deadline_misses']:<5} "
                  f"{a['preemptions']:>6}/{b['preemptions']:<6} "
                  f"{a['preemptions_raw']:>9}  {'yes' if same else 'NO'}")
        ev_s, ev_p, ev_l = job_events(st), job_events(pt), job_events(lt)
        rs = ev_s / statistics.median(s_walls)
        rp = ev_p / statistics.median(p_walls)
        rl = ev_l / statistics.median(p_long)
        print(f"job events/s: simso {rs:,.0f}  punctual(10 s, whole process) "
              f"{rp:,.0f} ({rp / rs:,.0f}x)  punctual(1000 s) {rl:,.0f} "
              f"({rl / rs:,.0f}x)   medians of {rounds} rounds")
    print("\nall job outcomes identical:", "yes" if all_same else "NO")
    sys.exit(0 if all_same else 1)


if __name__ == "__main__":
    main()

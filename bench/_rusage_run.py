#!/usr/bin/env python3
"""Runs a command, saving stdout to PREFIX.out and its CPU time (user sys,
seconds, from wait4 rusage: the child and its threads) to PREFIX.rusage.
usage: _rusage_run.py PREFIX CMD ARGS..."""
import os, subprocess, sys
prefix, cmd = sys.argv[1], sys.argv[2:]
with open(prefix + '.out', 'w') as out:
    p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
with open(prefix + '.rusage', 'w') as f:
    f.write(f"{ru.ru_utime} {ru.ru_stime}\n")
sys.exit(os.waitstatus_to_exitcode(status))

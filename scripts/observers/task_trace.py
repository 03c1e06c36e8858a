#!/usr/bin/env python3
"""Summarizes a task trace of `fp4forge quantize` (a build with task_trace.patch applied, run with
FP4FORGE_TRACE=FILE): phase marks, the pool's occupancy between the first task's start and the last one's end,
busy workers per half second, task durations, and where the workers' time went (S line: encoding, searching,
pwrite, sync_file_range; thread-seconds)."""
import sys

marks, tasks = {}, []
for line in open(sys.argv[1]):
    p = line.split()
    if p[0] == "S":
        print(line.strip())
    elif p[0] == "M":
        marks[p[1]] = float(p[2])
    else:
        tasks.append((p[1], float(p[3]), float(p[4])))
threads = len({t[0] for t in tasks})
first, last = min(t[1] for t in tasks), max(t[2] for t in tasks)
busy = sum(b - a for _, a, b in tasks)
print("marks", {k: round(v, 3) for k, v in marks.items()}, "workers", threads, "first", round(first, 3), "last", round(last, 3))
print("busy thread-s %.1f of %.1f (%.1f%%), %d tasks" % (busy, threads * (last - first), 100 * busy / (threads * (last - first)), len(tasks)))
B = 0.5
occ = [0.0] * (int(last / B) + 1)
for _, a, b in tasks:
    i = int(a / B)
    while a < b:
        e = min(b, (i + 1) * B)
        occ[i] += e - a
        a, i = e, i + 1
print("busy workers per %.1f s:" % B, " ".join("%.1f" % (o / B) for o in occ))
d = sorted(b - a for _, a, b in tasks)
print("task s: median %.4f p90 %.4f max %.4f" % (d[len(d) // 2], d[int(len(d) * 0.9)], d[-1]))

#!/usr/bin/env python3
"""Markdown tables comparing fp4forge's scheme encoders with compressed-tensors upstream, from one run of
each on the same machine (docs/performance.md, "Schemes against compressed-tensors"):

    python3 scripts/schemes_compare.py FP4FORGE_BENCH.json UPSTREAM.json

FP4FORGE_BENCH.json: `codec_schemes_bench --benchmark_out=... --benchmark_out_format=json` (single-thread
BM_Encode per path, BM_EncodeThreads per thread count; medians when it ran with repetitions).
UPSTREAM.json: `scripts/upstream_schemes_bench.py --json ...`.
Per scheme and shape: fp4forge's dispatched (best-target) path on one core (CPU time) against upstream's CPU math on one thread
(the per-core goal: >= 10x), and fp4forge on every core (wall clock, rows split across threads) against
upstream's GPU pipeline end to end (host -> device, quantize + compress, device -> host; the goal: ahead).
"""
import json
import sys


def load_fp4forge(path):
    doc = json.load(open(path))
    rows = {}
    for b in doc["benchmarks"]:
        name = b.get("run_name", b["name"])
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        parts = name.split("/")
        if parts[0] == "BM_Encode":  # BM_Encode/SCHEME/SHAPE_dtype/PATH
            rows.setdefault(("one", parts[1], parts[2].split("_")[0]), []).append((parts[3], b["bytes_per_second"]))
        elif parts[0] == "BM_EncodeThreads":  # BM_EncodeThreads/SCHEME/SHAPE_dtype/T/real_time
            rows.setdefault(("threads", parts[1], parts[2].split("_")[0]), []).append(
                (int(parts[3]), b["bytes_per_second"], b["real_time"], b["time_unit"]))
        elif parts[0] == "BM_Memcpy":
            rows.setdefault(("memcpy", parts[1].split("_")[0]), []).append(b["bytes_per_second"])
    return doc["context"], rows


def ms(t, unit):
    return t * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[unit]


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    ctx, ff = load_fp4forge(argv[1])
    up = json.load(open(argv[2]))
    urows = {(r["scheme"], r["shape"], r["kind"], r["threads"]): r for r in up["rows"]}
    schemes = []
    shapes = []
    for r in up["rows"]:
        if r["scheme"] not in schemes:
            schemes.append(r["scheme"])
        if r["shape"] not in shapes:
            shapes.append(r["shape"])
    print(f"fp4forge: {ctx.get('num_cpus')} CPUs, load average {ctx.get('load_avg')}; upstream: torch "
          f"{up['meta']['torch']}, {up['meta'].get('cpu')}, {up['meta'].get('cuda')}")
    print()
    print("Per core (fp4forge's dispatched path, CPU time of one thread; upstream torch CPU math, 1 thread), "
          "MB/s of BF16 source:")
    print()
    print("| scheme | shape | fp4forge path | fp4forge MB/s | scalar ref MB/s | upstream CPU MB/s | x upstream | goal >= 10x |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for sh in shapes:
        for s in schemes:
            one = ff.get(("one", s, sh), [])
            simd = [(p, v) for p, v in one if p != "scalar"]
            if not simd:
                continue
            p, v = simd[0]  # the dispatched path: the bench lists the paths best first
            sc = next((v2 for p2, v2 in one if p2 == "scalar"), None)
            u = urows.get((s, sh, "cpu_math", 1))
            um = u["MB_per_s"] if u else None
            x = v / 1e6 / um if um else None
            print(f"| {s} | {sh} | {p} | {v / 1e6:.0f} | {'' if sc is None else f'{sc / 1e6:.0f}'} | "
                  f"{'' if um is None else f'{um:.0f}'} | {'' if x is None else f'{x:.1f}'} | "
                  f"{'' if x is None else ('met' if x >= 10 else f'missed by {10 / x:.1f}x')} |")
    print()
    print("Whole tensor, all cores (fp4forge: rows split across threads, wall clock; upstream: 16 torch threads "
          "on the CPU, and the GPU pipeline end to end), milliseconds:")
    print()
    print("| scheme | shape | fp4forge threads | fp4forge ms | upstream CPU math ms | upstream CPU model_free ms | "
          "upstream GPU end to end ms | upstream GPU math ms | fp4forge vs GPU end to end |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for sh in shapes:
        for s in schemes:
            th = ff.get(("threads", s, sh), [])
            if not th:
                continue
            t, _, rt, unit = max(th, key=lambda x: x[0])
            f_ms = ms(rt, unit)
            cm = [r for k, r in urows.items() if k[:3] == (s, sh, "cpu_math") and k[3] != 1]
            ce = [r for k, r in urows.items() if k[:3] == (s, sh, "cpu_e2e")]
            ge = urows.get((s, sh, "cuda_e2e", None))
            gm = urows.get((s, sh, "cuda_math", None))
            cell = lambda r: "" if not r else f"{r['seconds'] * 1e3:.1f}"
            verdict = ""
            if ge:
                ratio = ge["seconds"] * 1e3 / f_ms
                verdict = f"{ratio:.1f}x faster" if ratio >= 1 else f"{1 / ratio:.1f}x slower"
            print(f"| {s} | {sh} | {t} | {f_ms:.1f} | {cell(cm[0] if cm else None)} | {cell(ce[0] if ce else None)} | "
                  f"{cell(ge)} | {cell(gm)} | {verdict} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

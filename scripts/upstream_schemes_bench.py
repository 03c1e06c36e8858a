#!/usr/bin/env python3
"""Times compressed-tensors 0.18's per-tensor quantize + compress of one Linear weight per scheme, the
upstream side of docs/performance.md's comparison with fp4forge's encoders.

It runs the same code the golden vectors come from: the harness schemes_golden.py (golden/schemes/ of the
shared data) extracts compressed-tensors' own functions from a source tree unmodified and rewrites
llm-compressor's model_free glue around them; this script imports that harness and times, per scheme and
tensor shape (BF16 weights, N(0, 0.02) with rare outliers):

  cpu_math   torch on the CPU with T threads (T = 1 and every --threads value): observe (min/max) +
             calculate_qparams + compress_module + state_dict on an initialized module (built untimed),
             i.e. the quantization math alone (what fp4forge's encoders do);
  cpu_e2e    the whole per-tensor model_free path on the CPU (validate on meta, Linear in the weight
             dtype, initialize_qparams, the math above, state_dict to the CPU), no file I/O;
  cuda_e2e   the same path on the GPU, as model_free runs when CUDA is present: the CPU weight is copied
             to the device, quantized and compressed there, and every saved tensor copied back to the CPU
             (the timing ends after that copy; torch.cuda.synchronize before and after);
  cuda_math  the math alone on the GPU, the weight already there (no transfers).

Each figure is the median of --reps timed runs after one warm-up (fewer reps when one run is long).

Usage (CT_SRC: src/compressed_tensors of compressed-tensors ac8e2ba8 = 0.18.0):
    python3 scripts/upstream_schemes_bench.py --harness PATH/schemes_golden.py --ct CT_SRC \
        [--schemes MXFP4A16,FP8_DYNAMIC,FP8_BLOCK,W4A16] [--shapes 4096x4096,14336x4096,2048x7168] \
        [--threads 16] [--reps 3] [--devices cpu,cuda] [--json OUT.json]
Prints one line per measurement and a markdown table; --json writes every figure.
"""
import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time

DEFAULT_SCHEMES = "MXFP4A16,FP8_DYNAMIC,FP8_BLOCK,W4A16"
DEFAULT_SHAPES = "4096x4096,14336x4096,2048x7168"


def load_harness(path):
    spec = importlib.util.spec_from_file_location("schemes_golden", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["schemes_golden"] = mod
    spec.loader.exec_module(mod)
    return mod


def make_weight(torch, n, k):
    g = torch.Generator().manual_seed(1234 + n + k)
    w = torch.randn((n, k), generator=g, dtype=torch.float32) * 0.02
    w.view(-1)[::100003] = 0.75  # a few outliers, like bench/codec_*_bench.cc
    return w.to(torch.bfloat16).contiguous()


def timed(work, reps, sync, setup=None):
    """Median seconds of work(setup()) over reps runs after one warm-up; setup is not timed."""
    def once():
        state = setup() if setup else None
        sync()
        t0 = time.perf_counter()
        work(state)
        sync()
        return time.perf_counter() - t0

    once()  # warm-up (allocator, kernels, first-use caches)
    times = []
    for _ in range(reps):
        times.append(once())
        if times[0] > 20.0:  # long runs: one is enough
            break
    return statistics.median(times), len(times)


def math_parts(H, NS, scheme_name, w, device):
    """(setup, work): setup builds the initialized module (Linear in the weight dtype holding w, qparams
    initialized); work runs the quantization math on it: observe (min/max), calculate_qparams and the
    parameter update, compress_module, state_dict."""
    T = NS["torch"]
    scheme = NS["preset_name_to_scheme"](scheme_name, [])
    H.lc_validate_scheme(NS, scheme)

    def setup():
        with T.no_grad():
            return H.lc_initialize_quantized_linear(NS, w, scheme, device)

    def work(m):
        with T.no_grad():
            stats = H.lc_observe(NS, m, scheme.weights)
            H.lc_update_qparams(NS, m, H.lc_get_qparams(NS, scheme.weights, stats, [stats]))
            NS["compress_module"](m)
            return m.state_dict()

    return setup, work


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--harness", required=True, help="schemes_golden.py")
    ap.add_argument("--ct", required=True, help="src/compressed_tensors of compressed-tensors 0.18")
    ap.add_argument("--schemes", default=DEFAULT_SCHEMES)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--threads", default="16", help="comma list of CPU thread counts besides 1")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--devices", default=None, help="cpu,cuda (default: cpu, plus cuda when available)")
    ap.add_argument("--skip-e2e-cpu", action="store_true", help="time only the math on the CPU")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)

    import torch

    H = load_harness(a.harness)
    NS, report = H.build_namespace(a.ct, torch)
    if report["unresolved_names"]:
        print("unresolved upstream names:", report["unresolved_names"], file=sys.stderr)
        return 2
    devices = a.devices.split(",") if a.devices else ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    threads = sorted({1} | {int(t) for t in a.threads.split(",") if t})
    shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",")]
    schemes = [s for s in a.schemes.split(",") if s]
    meta = {"torch": torch.__version__, "python": platform.python_version(), "cpu": platform.processor(),
            "cpus": os.cpu_count(), "cuda": torch.cuda.get_device_name(0) if "cuda" in devices else None,
            "ct_src": os.path.abspath(a.ct), "files_differing_from_checked": report["files_differing_from_checked"],
            "harness": os.path.abspath(a.harness)}
    try:
        with open("/proc/cpuinfo") as f:
            meta["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except Exception:
        pass
    print(json.dumps(meta), flush=True)
    rows = []
    cpu_sync = lambda: None
    cuda_sync = (lambda: torch.cuda.synchronize()) if "cuda" in devices else cpu_sync
    for n, k in shapes:
        w = make_weight(torch, n, k)
        mb = w.numel() * w.element_size() / 1e6
        for scheme in schemes:
            def rec(kind, dev, thr, sec, reps):
                r = {"scheme": scheme, "shape": f"{n}x{k}", "kind": kind, "device": dev, "threads": thr,
                     "seconds": sec, "source_MB": mb, "MB_per_s": mb / sec, "reps": reps}
                if thr:
                    r["MB_per_s_per_core"] = mb / sec / thr
                rows.append(r)
                print(json.dumps(r), flush=True)

            if "cpu" in devices:
                for t in threads:
                    torch.set_num_threads(t)
                    setup, work = math_parts(H, NS, scheme, w, "cpu")
                    sec, reps = timed(work, a.reps, cpu_sync, setup)
                    rec("cpu_math", "cpu", t, sec, reps)
                    if not a.skip_e2e_cpu and t == max(threads):
                        sec, reps = timed(lambda _: H.model_free_tensors(NS, scheme, [(H.MODULE, w)], "cpu", False),
                                          a.reps, cpu_sync)
                        rec("cpu_e2e", "cpu", t, sec, reps)
            if "cuda" in devices:
                torch.set_num_threads(max(threads))
                sec, reps = timed(lambda _: H.model_free_tensors(NS, scheme, [(H.MODULE, w)], "cuda", False),
                                  a.reps, cuda_sync)
                rec("cuda_e2e", "cuda", None, sec, reps)
                wd = w.to("cuda")
                setup, work = math_parts(H, NS, scheme, wd, "cuda")
                sec, reps = timed(work, a.reps, cuda_sync, setup)
                rec("cuda_math", "cuda", None, sec, reps)
                del wd
    print()
    print("| scheme | shape | kind | device | threads | ms | MB/s | MB/s per core |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    for r in rows:
        pc = f"{r['MB_per_s_per_core']:.0f}" if "MB_per_s_per_core" in r else ""
        print(f"| {r['scheme']} | {r['shape']} | {r['kind']} | {r['device']} | {r['threads'] or ''} | "
              f"{r['seconds'] * 1e3:.1f} | {r['MB_per_s']:.0f} | {pc} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

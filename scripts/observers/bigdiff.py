#!/usr/bin/env python3
"""Large differential vectors for the searched observers: upstream's own pipeline (observers_golden.py's
extraction of llm-compressor's _grid_search_mse and compressed-tensors) on big random tensors, CPU and
CUDA, with timings. Writes OUT/<obs>_<dtype>_<dev>.{in,packed,scale,gs}.bin and OUT/bigdiff.json."""
import json, os, sys, time, hashlib
import torch
HERE = os.path.dirname(os.path.abspath(__file__))
# The upstream harness (observers_golden.py beside schemes_golden.py: the shared golden/schemes/ folder).
sys.path.insert(0, os.environ.get("FP4FORGE_HARNESS", HERE))
import observers_golden as O
G = O.G
ct, lc, out = sys.argv[1], sys.argv[2], sys.argv[3]
rows, cols = int(os.environ.get("BIG_ROWS", "512")), int(os.environ.get("BIG_COLS", "2048"))
os.makedirs(out, exist_ok=True)
NS, report = G.build_namespace(ct, torch, lc)
res = {"torch": torch.__version__, "rows": rows, "cols": cols, "unresolved": report["unresolved_names"], "runs": {}}
devs = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
for obs in ("nvfp4_expanded_mse", "memoryless_mse", "memoryless_minmax"):
    O.OBSERVER = obs
    for dt_name, dt in (("bf16", torch.bfloat16), ("f16", torch.float16), ("f32", torch.float32)):
        g = torch.Generator().manual_seed(777 + len(dt_name))
        w = torch.randn(rows, cols, generator=g) * 0.02
        # heavy tails: a few outliers per row, some near-zero groups, exact zero groups
        idx = torch.randint(0, cols, (rows, 4), generator=g)
        w.scatter_(1, idx, torch.randn(rows, 4, generator=g) * 0.5)
        w[::7, :16] = 0.0
        w[::11, 32:48] *= 1e-3
        w = w.to(dt)
        tag = f"{obs}_{dt_name}"
        if obs == "nvfp4_expanded_mse":
            open(os.path.join(out, f"{dt_name}.in.bin"), "wb").write(w.view(torch.uint8).numpy().tobytes() if dt != torch.float32 else w.numpy().tobytes())
        outs = {}
        for dev in devs:
            O.OBSERVER = obs
            t0 = time.time()
            saved, _ = G.model_free_tensors(NS, "NVFP4A16", [("m", w)], dev, False)
            if dev == "cuda":
                torch.cuda.synchronize()
            dt_s = time.time() - t0
            b = {k.split(".")[-1]: v.contiguous().view(torch.uint8).numpy().tobytes() for k, v in saved.items()}
            outs[dev] = b
            for k, v in b.items():
                open(os.path.join(out, f"{tag}_{dev}.{k}.bin"), "wb").write(v)
            res["runs"][f"{tag}_{dev}"] = {"seconds": dt_s, "sha": {k: hashlib.sha256(v).hexdigest()[:16] for k, v in b.items()}}
            print(tag, dev, f"{dt_s:.2f}s", flush=True)
        if len(outs) == 2:
            res["runs"][f"{tag}_cuda"]["identical_to_cpu"] = outs["cpu"] == outs["cuda"]
            diffs = {k: sum(x != y for x, y in zip(outs["cpu"][k], outs["cuda"][k])) for k in outs["cpu"]}
            res["runs"][f"{tag}_cuda"]["differing_bytes"] = diffs
json.dump(res, open(os.path.join(out, "bigdiff.json"), "w"), indent=1)
# timing of the upstream search on an 8B-sized layer (CUDA, eager): 4096 x 14336 bf16
if torch.cuda.is_available() and os.environ.get("BIG_TIMING", "1") == "1":
    O.OBSERVER = "nvfp4_expanded_mse"
    t = {}
    for shape in ((4096, 4096), (14336, 4096), (4096, 14336)):
        w = (torch.randn(*shape, device="cuda") * 0.02).to(torch.bfloat16)
        G.model_free_tensors(NS, "NVFP4A16", [("m", w)], "cuda", False)
        torch.cuda.synchronize(); t0 = time.time()
        G.model_free_tensors(NS, "NVFP4A16", [("m", w)], "cuda", False)
        torch.cuda.synchronize(); t[str(shape)] = time.time() - t0
        O.OBSERVER = "memoryless_minmax"
        torch.cuda.synchronize(); t0 = time.time()
        G.model_free_tensors(NS, "NVFP4A16", [("m", w)], "cuda", False)
        torch.cuda.synchronize(); t[str(shape) + "_minmax"] = time.time() - t0
        O.OBSERVER = "nvfp4_expanded_mse"
    res["cuda_timing_s"] = t
    json.dump(res, open(os.path.join(out, "bigdiff.json"), "w"), indent=1)
    print(json.dumps(t))

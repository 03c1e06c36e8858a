#!/usr/bin/env python3
"""Upstream's searched observer end to end on a whole checkpoint, on the H200: every shard read (safetensors
load_file), each Linear of the text stack through llm-compressor model_free's per-tensor pipeline on CUDA
(observers_golden.py's extraction: _grid_search_eager + compressed-tensors 0.18, q/k/v and gate/up fused),
the results back on the CPU and saved with save_file. Prints wall time, GPU math time, bytes."""
import glob, json, os, re, sys, time
import torch
from safetensors.torch import load_file, save_file
HERE = os.path.dirname(os.path.abspath(__file__))
# The upstream harness (observers_golden.py beside schemes_golden.py: the shared golden/schemes/ folder).
sys.path.insert(0, os.environ.get("FP4FORGE_HARNESS", HERE))
import observers_golden as O
G = O.G
ct, lc, src, out, obs = sys.argv[1:6]
O.OBSERVER = obs
NS, _ = G.build_namespace(ct, torch, lc)
os.makedirs(out, exist_ok=True)
lin = re.compile(r"(.*\.layers\.\d+\.(?:self_attn|mlp))\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)\.weight$")
t0 = time.time(); gpu = 0.0; n = 0
for f in sorted(glob.glob(os.path.join(src, "*.safetensors"))):
    T = load_file(f)
    res = {}
    sets = {}
    for k, v in T.items():
        m = lin.match(k)
        if not m:
            res[k] = v
            continue
        key = (m.group(1), "qkv" if m.group(2) in ("q_proj", "k_proj", "v_proj") else "gu" if m.group(2) in ("gate_proj", "up_proj") else m.group(2))
        sets.setdefault(key, []).append((k[: -len(".weight")], v))
    for key, members in sets.items():
        torch.cuda.synchronize(); g0 = time.time()
        saved, _ = G.model_free_tensors(NS, "NVFP4A16", members, "cuda", len(members) > 1)
        torch.cuda.synchronize(); gpu += time.time() - g0
        res.update(saved); n += len(members)
    save_file(res, os.path.join(out, os.path.basename(f)))
wall = time.time() - t0
print(json.dumps({"observer": obs, "linears": n, "wall_s": round(wall, 2), "gpu_pipeline_s": round(gpu, 2)}))

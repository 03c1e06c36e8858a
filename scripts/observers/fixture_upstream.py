#!/usr/bin/env python3
"""Upstream's bytes for whole fixtures: every Linear that fp4forge's output quantizes (read from OURS/*.safetensors
names), through llm-compressor model_free's per-tensor pipeline (observers_golden.py's extraction: the searched
observer and compressed-tensors' own functions), with q/k/v and gate/up as fused sets (one global scale, as
process_file_microscale_scheme groups them). Writes OUT.json {observer: {tensor: hex}} and compares with OURS."""
import glob, json, os, re, sys
import torch
from safetensors.torch import load_file
HERE = os.path.dirname(os.path.abspath(__file__))
# The upstream harness (observers_golden.py beside schemes_golden.py: the shared golden/schemes/ folder).
sys.path.insert(0, os.environ.get("FP4FORGE_HARNESS", HERE))
import observers_golden as O
G = O.G
ct, lc, src, ours, out = sys.argv[1:6]
observers = sys.argv[6].split(",")
# The preset (default NVFP4A16); the group schemes (W4A16, MXFP4A16) are processed tensor by tensor
# (process_file: no global scale, nothing shared by a fused set).
SCHEME = sys.argv[7] if len(sys.argv) > 7 else "NVFP4A16"
NS, report = G.build_namespace(ct, torch, lc)
S = {}
for f in sorted(glob.glob(os.path.join(src, "*.safetensors"))):
    S.update(load_file(f))
Q = {}
for f in sorted(glob.glob(os.path.join(ours, "*.safetensors"))):
    Q.update(load_file(f))
mods = sorted(k[: -len(".weight_packed")] for k in Q if k.endswith(".weight_packed"))
sets = {}
for m in mods:
    mm = re.match(r"(.*)\.(q_proj|k_proj|v_proj|gate_proj|up_proj)$", m) if SCHEME == "NVFP4A16" else None
    key = (mm.group(1), "qkv" if mm.group(2) in ("q_proj", "k_proj", "v_proj") else "gu") if mm else (m, "")
    sets.setdefault(key, []).append(m)
res = {"modules": len(mods), "sets": len(sets), "observers": {}}
for obs in observers:
    O.OBSERVER = obs
    hexes, diffs = {}, []
    for key, ms in sets.items():
        members = [(m, S[m + ".weight"]) for m in ms]
        saved, _ = G.model_free_tensors(NS, SCHEME, members, "cpu", len(members) > 1)
        for k, v in saved.items():
            if k.endswith(".weight_shape"):
                continue
            b = v.contiguous().view(torch.uint8).numpy().tobytes()
            hexes[k] = b.hex()
            ob = Q[k].contiguous().view(torch.uint8).numpy().tobytes() if k in Q else None
            if ob != b:
                diffs.append(k)
    res["observers"][obs] = {"tensors": len(hexes), "differ_from_ours": diffs[:20], "n_differ": len(diffs)}
    json.dump(hexes, open(f"{out}.{obs}.json", "w"), separators=(",", ":"))
print(json.dumps(res, indent=1))
json.dump(res, open(f"{out}.summary.json", "w"), indent=1)

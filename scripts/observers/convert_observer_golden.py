#!/usr/bin/env python3
"""Converts the output of ../shared/golden/schemes/observers_golden.py (run on the GPU host against
compressed-tensors ac8e2ba8 and llm-compressor ab1ba3e; its NVFP4A16.json per observer and seed) into the
NVFP4A16 golden-file schema of include/fp4forge/codec/golden.h, plus the fields the observer tests read:

    {"format": "nvfp4-pack-quantized", "observer": NAME, "seed": GOLDEN_SEED, "source": ...,
     "quantization_config_weights": {...}, "cuda_identical_to_cpu": {case: bool},
     "cases": [{"name", "dtype", "note", "members": [{"shape", "weight"}],
                "expected": [{"weight_packed", "weight_scale", "weight_global_scale"}]}],
     "refused": [{"name", "dtype", "shape"}]}

    python3 scripts/convert_observer_golden.py IN/NVFP4A16.json[.xz] OUT.json
Only the CPU bytes are written (the reference device); the CUDA run's agreement is recorded per case."""
import json, lzma, sys


def load(p):
    return json.load(lzma.open(p) if p.endswith(".xz") else open(p))


def main(src, dst):
    d = load(src)
    obs = d.get("observer")
    cases, refused, cuda = [], [], {}
    for c in d["cases"]:
        ins = c["inputs"]
        if c["status"] != "ok":
            refused.append({"name": c["name"], "dtype": ins[0]["dtype"], "shape": ins[0]["shape"],
                            "weight": ins[0]["hex"]})
            continue
        dev = c.get("devices", {}).get("cuda")
        if dev is not None:
            cuda[c["name"]] = dev.get("identical_to_cpu")
        saved = {s["name"]: s for s in c["saved"]}
        members, expected = [], []
        for i in ins:
            mod = i["tensor"][: -len(".weight")]
            members.append({"shape": i["shape"], "weight": i["hex"]})
            expected.append({k: saved[f"{mod}.{k}"]["hex"] for k in ("weight_packed", "weight_scale", "weight_global_scale")})
        cases.append({"name": c["name"], "dtype": ins[0]["dtype"], "note": c.get("note", ""),
                      "members": members, "expected": expected})
    seed = d["cases"][0].get("seed")
    out = {"format": d["format"], "observer": obs, "encoding": "hex of little-endian bytes, row-major",
           "source": f"observers_golden.py ({d.get('harness_sha256', '')[:12]}) on torch {d.get('torch')}, "
                     f"devices {d.get('devices')}: llm-compressor _grid_search_mse/_grid_search_eager/"
                     f"_calculate_error + compressed-tensors 0.18 (ac8e2ba8), run unmodified; CPU bytes",
           "first_case_seed": seed,
           "quantization_config_weights": d["quantization_config"]["config_groups"]["NVFP4A16"]["weights"],
           "cuda_identical_to_cpu": cuda, "cases": cases, "refused": refused}
    json.dump(out, open(dst, "w"), separators=(",", ":"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

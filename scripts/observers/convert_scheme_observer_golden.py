#!/usr/bin/env python3
"""Converts the harness's <SCHEME>.json for a searched observer on the schemes beside NVFP4A16
(observers_golden.py --schemes W4A16,MXFP4A16 --observer memoryless_mse, run on the GPU host) into the
trimmed scheme-golden schema of include/fp4forge/codec/scheme_golden.h, plus the observer and whether
upstream's CUDA run wrote the CPU bytes:

    {"scheme", "source", "format", "observer", "first_case_seed", "cuda_identical_to_cpu": {case: bool},
     "cases": [{"name", "status", "inputs": [{"dtype", "shape", "hex"}], "saved": [{"suffix", "dtype", "shape", "hex"}]}]}

    python3 convert_scheme_observer_golden.py IN/<SCHEME>.json OUT.json [--drop case,case]
Only the CPU bytes are written (the reference device)."""
import json, lzma, sys


def load(p):
    return json.load(lzma.open(p) if p.endswith(".xz") else open(p))


def main(argv):
    drop = set()
    if "--drop" in argv:
        i = argv.index("--drop"); drop = set(argv[i + 1].split(",")); del argv[i:i + 2]
    src, dst = argv
    d = load(src)
    cases, cuda = [], {}
    for c in d["cases"]:
        if c["name"] in drop:
            continue
        dev = c.get("devices", {}).get("cuda")
        if dev is not None and c["status"] == "ok":
            cuda[c["name"]] = dev.get("identical_to_cpu")
        rec = {"name": c["name"], "status": c["status"],
               "inputs": [{"dtype": i["dtype"], "shape": i["shape"], "hex": i["hex"]} for i in c["inputs"]]}
        if c["status"] == "ok":
            rec["saved"] = [{"suffix": s["suffix"], "dtype": s["dtype"], "shape": s["shape"], "hex": s["hex"]}
                            for s in c["saved"]]
        cases.append(rec)
    out = {"scheme": d["scheme"], "format": d["format"], "observer": d.get("observer"),
           "source": f"observers_golden.py ({d.get('harness_sha256', '')[:12]}) on torch {d.get('torch')}, devices "
                     f"{d.get('devices')}: llm-compressor _grid_search_mse/_grid_search_eager/_calculate_error + "
                     f"compressed-tensors 0.18 (ac8e2ba8), run unmodified; CPU bytes",
           "first_case_seed": d["cases"][0].get("seed"), "dropped": sorted(drop),
           "cuda_identical_to_cpu": cuda, "cases": cases}
    json.dump(out, open(dst, "w"), separators=(",", ":"))


if __name__ == "__main__":
    main(sys.argv[1:])

#!/usr/bin/env python3
"""Derives tests/data/qwen3_vl_moe-sep3d from tests/data/qwen3_vl_moe: the same weights with each layer's fused
`mlp.experts.gate_up_proj [E, 2I, H]` stored as two separate 3-D tensors `mlp.experts.gate_proj [E, I, H]`
(= gate_up[:, :I, :]) and `mlp.experts.up_proj [E, I, H]` (= gate_up[:, I:, :]), `down_proj [E, H, I]` unchanged:
the three-separate-stacks storage Step-3.x writes (issue 26). Pure Python (no torch): safetensors bytes are
sliced and rewritten shard by shard; the index and every other file are copied, total_size unchanged.

  python3 scripts/derive_sep3d.py tests/data/qwen3_vl_moe tests/data/qwen3_vl_moe-sep3d
"""
import json
import os
import shutil
import struct
import sys


def read_shard(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", None)
    return header, data, meta


def write_shard(path, tensors, meta):
    """tensors: list of (name, dtype, shape, bytes), written in name order with 8-byte aligned header."""
    header = {}
    off = 0
    for name, dtype, shape, b in sorted(tensors):
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
    if meta is not None:
        header = {"__metadata__": meta, **header}
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for _, _, _, b in sorted(tensors):
            f.write(b)


def main(src, dst):
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    ixp = os.path.join(dst, "model.safetensors.index.json")
    ix = json.load(open(ixp))
    wm = ix["weight_map"]
    for shard in sorted(set(wm.values())):
        p = os.path.join(dst, shard)
        header, data, meta = read_shard(p)
        out = []
        for name, t in header.items():
            b0, b1 = t["data_offsets"]
            raw = data[b0:b1]
            if name.endswith(".mlp.experts.gate_up_proj"):
                e, two_i, h = t["shape"]
                i = two_i // 2
                es = 2  # BF16
                gate, up = bytearray(), bytearray()
                for k in range(e):
                    base = k * two_i * h * es
                    gate += raw[base:base + i * h * es]
                    up += raw[base + i * h * es:base + two_i * h * es]
                stem = name[: -len("gate_up_proj")]
                out.append((stem + "gate_proj", t["dtype"], [e, i, h], bytes(gate)))
                out.append((stem + "up_proj", t["dtype"], [e, i, h], bytes(up)))
                del wm[name]
                wm[stem + "gate_proj"] = shard
                wm[stem + "up_proj"] = shard
            else:
                out.append((name, t["dtype"], t["shape"], raw))
        write_shard(p, out, meta)
    ix["weight_map"] = dict(sorted(wm.items()))
    with open(ixp, "w") as f:
        f.write(json.dumps(ix, indent=2, sort_keys=True) + "\n")
    listing = {}
    for shard in sorted(set(wm.values())):
        header, _, _ = read_shard(os.path.join(dst, shard))
        for k, v in header.items():
            listing[k] = [shard, v["dtype"], v["shape"]]
    with open(dst.rstrip("/") + ".tensors.json", "w") as f:
        f.write(json.dumps(dict(sorted(listing.items())), indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

#!/usr/bin/env python3
"""A DeepSeek-V4-style low-bit release for measuring (bench_device_fp4src.sh): random payloads, no model behind them.

    python3 synth_fp4src.py OUT LAYERS EXPERTS

config.json: model_type deepseek_v4 (hidden 4096, 2 heads of 128 with q_lora 1024 / o_groups 2 x o_lora 1024, routed
experts of 2048, 1 shared expert), quantization_config {quant_method fp8, fmt e4m3, scale_fmt ue8m0,
weight_block_size [128, 128]}, expert_dtype fp4. Per layer: attention wq_a / wq_b / wkv / wo_a / wo_b and the shared
expert's w1 / w2 / w3 in F8_E4M3 (random codes, never the NaN codes 0x7F / 0xFF) with F8_E8M0 `X.scale` 128 x 128
blocks; routed experts w1 / w2 / w3 as I8 [N, K/2] (random bytes) with F8_E8M0 `weight_scale_inv` [N, K/32] whose
exponents lie in 2^-20 .. 2^-4 (a span the NVFP4 cast holds); norms and the router in BF16. One shard per layer.
Python's standard library only (safetensors written by hand, random.Random(0) bytes)."""
import json
import os
import random
import struct
import sys

H, I, Q, O, HD, NH, V = 4096, 2048, 1024, 1024, 128, 2, 1024
RNG = random.Random(0)
NO_NAN = bytes(0x7E if (b & 0x7F) == 0x7F else b for b in range(256))  # E4M3 codes without the NaN ones


def span(lo, hi):
    """A byte table mapping every byte into [lo, hi)."""
    return bytes(lo + b % (hi - lo) for b in range(256))


def write(path, tensors):
    header, off = {}, 0
    for name, (dt, shape, b) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for _, (_, _, b) in tensors.items():
            f.write(b)


def fp8(n, k):
    sr, sc = -(-n // 128), -(-k // 128)
    return ("F8_E4M3", (n, k), RNG.randbytes(n * k).translate(NO_NAN)), \
           ("F8_E8M0", (sr, sc), RNG.randbytes(sr * sc).translate(span(110, 125)))


def fp4(n, k):
    return ("I8", (n, k // 2), RNG.randbytes(n * k // 2)), \
           ("F8_E8M0", (n, k // 32), RNG.randbytes(n * k // 32).translate(span(107, 124)))


def bf16(*shape):
    """Small random bf16 values: a random low byte under a high byte of +-2^-7..2^-6 (0x3C / 0xBC)."""
    n = 1
    for d in shape:
        n *= d
    lo = RNG.randbytes(n)
    hi = RNG.randbytes(n).translate(bytes(0x3C if b % 2 == 0 else 0xBC for b in range(256)))
    out = bytearray(2 * n)
    out[0::2], out[1::2] = lo, hi
    return ("BF16", shape, bytes(out))


def main():
    out, layers, experts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    weight_map = {}
    for L in range(layers):
        t = {}
        p = f"model.layers.{L}."
        for name, (n, k) in {"attn.wq_a": (Q, H), "attn.wq_b": (NH * HD, Q), "attn.wkv": (HD, H),
                             "attn.wo_a": (2 * O, NH * HD // 2), "attn.wo_b": (H, 2 * O),
                             "ffn.shared_experts.w1": (I, H), "ffn.shared_experts.w3": (I, H),
                             "ffn.shared_experts.w2": (H, I)}.items():
            w, s = fp8(n, k)
            t[p + name + ".weight"], t[p + name + ".scale"] = w, s
        for e in range(experts):
            for name, (n, k) in {"w1": (I, H), "w3": (I, H), "w2": (H, I)}.items():
                w, s = fp4(n, k)
                q = f"{p}ffn.experts.{e}.{name}."
                t[q + "weight"], t[q + "weight_scale_inv"] = w, s
        t[p + "ffn.gate.weight"] = bf16(experts, H)
        t[p + "attn_norm.weight"] = bf16(H)
        t[p + "ffn_norm.weight"] = bf16(H)
        shard = f"model-{L + 1:05d}-of-{layers + 1:05d}.safetensors"
        write(os.path.join(out, shard), t)
        weight_map.update({k: shard for k in t})
    shard = f"model-{layers + 1:05d}-of-{layers + 1:05d}.safetensors"
    t = {"model.embed_tokens.weight": bf16(V, H), "model.norm.weight": bf16(H), "lm_head.weight": bf16(V, H)}
    write(os.path.join(out, shard), t)
    weight_map.update({k: shard for k in t})
    json.dump({"metadata": {}, "weight_map": weight_map}, open(os.path.join(out, "model.safetensors.index.json"), "w"))
    cfg = {"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "hidden_size": H,
           "num_hidden_layers": layers, "num_attention_heads": NH, "num_key_value_heads": 1, "head_dim": HD,
           "q_lora_rank": Q, "o_groups": 2, "o_lora_rank": O, "moe_intermediate_size": I, "n_routed_experts": experts,
           "n_shared_experts": 1, "num_experts_per_tok": 8, "vocab_size": V, "tie_word_embeddings": False,
           "num_nextn_predict_layers": 0, "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
           "expert_dtype": "fp4",
           "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                   "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}}
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)


if __name__ == "__main__":
    main()

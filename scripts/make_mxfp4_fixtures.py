#!/usr/bin/env python3
"""Tiny MXFP4 / E8M0 source checkpoints (tests/data/mxfp4/NAME/), each beside its reference bf16 expansion
(NAME.bf16/), and the E8M0 x E2M1 golden table (golden_e8m0_e2m1.json) of transformers' own dequantizers.

Run on the GPU host (torch 2.11, transformers 5.17.0, safetensors 0.8):

    python3 scripts/make_mxfp4_fixtures.py OUTDIR [STEP,STEP...]   (default: every step)

then copy OUTDIR/NAME, OUTDIR/NAME.bf16 and OUTDIR/golden_e8m0_e2m1.json into tests/data/mxfp4/.
OUTDIR/_summary.json records every cross-check (each .bf16 weight against the rule below and against
transformers' own dequantizing load of the fixture).

The rule both dequantizers of transformers 5.17 implement (checked here over all 256 scale bytes x 256
packed bytes):  out = bf16_rne(fl32(E2M1[nibble]) * 2^(e - 127)), low nibble first; scale byte 0xFF is NaN
(float8_e8m0fnu) or 2^128 = inf (uint8 / ldexp).
  - DeepSeek-V4 (`integrations/finegrained_fp8.py`, `Fp8Dequantize._dequantize_one`): int8 payload [N, K/2],
    scale [N, K/32] float8_e8m0fnu (or uint8, or a float32 container), block derived from the grid.
  - gpt-oss (`integrations/mxfp4.py`, `convert_moe_packed_tensors`): `X_blocks` U8 [E, R, G, 16] +
    `X_scales` U8 [E, R, G]; lut in bf16, ldexp in float32 rounded into bf16; out [E, G*32, R] (transposed).

Fixtures (weights redrawn as N(0,0.02) x 2^U(-1,1) per row x 2^U(-1,1) per column, as make_fp8_fixtures.py):
  dsv4-fp8-fp4  DeepseekV4Config H 384, routed experts of 256 (4, hash routing), 1 shared expert, q_lora 128,
                head_dim 128, o_groups 2 x o_lora 128. Linear weights of attention and the shared expert in FP8
                E4M3 with 128x128 E8M0 `weight_scale_inv` (transformers' Fp8Quantize._quantize_one with
                scale_fmt ue8m0: power-of-two scales rounded up), routed experts `ffn.experts.E.w{1,2,3}.weight`
                as packed E2M1 (I8 [N, K/2]) with E8M0 `weight_scale_inv` [N, K/32]; config
                quant_method fp8, fmt e4m3, scale_fmt ue8m0, weight_block_size [128, 128], expert_dtype fp4.
                The MXFP4 encoding of the experts is this script's (transformers has no FP4 writer): per 32
                values e = ceil(log2(amax / 6)) + 127, codes the nearest E2M1 value (ties to the even code).
  dsv4-release-scales  the same tensors with DeepSeek's own scale name `X.scale` and the experts' scales in a
                float32 container (dsv4-flash-base's form, which transformers' quantizer renames and casts).
  dsv4-release-names   dsv4-fp8-fp4 under DeepSeek's own top-level names (no `model.` prefix), headers rewritten.
  dsv4-fp8-block32     dsv4-fp8-fp4's model with DeepSeek-V4.1's [32, 32] FP8 blocks (weight_block_size [32, 32]).
  gpt_oss-mxfp4 GptOssConfig H 96, I 64 (gate_up [E, 96, 128] interleaved), 4 experts: experts as
                `gate_up_proj_blocks` / `_scales` and `down_proj_blocks` / `_scales`, config quant_method mxfp4.
"""
import json
import math
import os
import shutil
import sys

import torch

VOCAB = 128
DEV = "cuda:0" if torch.cuda.is_available() else "cpu"
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
SUMMARY = {}


def log(*a):
    print(*a, flush=True)


def st_dtype(dt):
    return {torch.float8_e4m3fn: "F8_E4M3", torch.bfloat16: "BF16", torch.float32: "F32", torch.int8: "I8",
            torch.uint8: "U8", torch.int64: "I64", torch.float8_e8m0fnu: "F8_E8M0"}.get(dt, str(dt))


def load_dir(d):
    from safetensors.torch import load_file
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            out.update(load_file(os.path.join(d, f)))
    return out


def bits_equal(a, b):
    a, b = a.cpu().contiguous(), b.cpu().contiguous()
    if a.shape != b.shape or a.dtype != b.dtype:
        return {"shape": [list(a.shape), list(b.shape)], "dtype": [str(a.dtype), str(b.dtype)]}
    eq = a.view(torch.int16) == b.view(torch.int16)
    return {"n": a.numel(), "bit_equal": int(eq.sum())}


def rule(codes, ebytes):
    """The rule above, in float32 then bf16; codes int tensor of nibbles, ebytes int tensor (broadcast)."""
    lut = torch.tensor(E2M1, dtype=torch.float32)
    p = lut[codes] * torch.pow(torch.tensor(2.0, dtype=torch.float64), (ebytes - 127).double()).float()
    return p.to(torch.bfloat16)


# ------------------------------------------------------------------------------------------ golden
def golden(out):
    from transformers.integrations.finegrained_fp8 import Fp8Dequantize
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    deq = Fp8Dequantize(None)
    e = torch.arange(256, dtype=torch.int32)
    packed = torch.arange(256, dtype=torch.int32).to(torch.uint8).repeat(256, 1)  # row r: every byte, scale r
    lo, hi = (packed & 15).long(), (packed >> 4).long()
    codes = torch.stack([lo, hi], dim=-1).reshape(256, 512)
    want = rule(codes, e.reshape(256, 1))
    res, tables = {}, {}
    paths = {
        "dsv4_e8m0": (packed.view(torch.int8), e.to(torch.uint8).view(torch.float8_e8m0fnu).reshape(256, 1).repeat(1, 16)),
        "dsv4_u8": (packed.view(torch.int8), e.to(torch.uint8).reshape(256, 1).repeat(1, 16)),
        "dsv4_f32": (packed.view(torch.int8), e.to(torch.uint8).view(torch.float8_e8m0fnu).float().reshape(256, 1).repeat(1, 16)),
    }
    for name, (w, s) in paths.items():
        got = deq._dequantize_one(w, s, output_dtype=torch.bfloat16)
        res[name] = {"vs_rule": bits_equal_nan(got, want), "default_output_dtype": str(deq._dequantize_one(w, s).dtype)}
        tables[name] = got
    blocks = packed.reshape(1, 256, 16, 16)
    scales = e.to(torch.uint8).reshape(1, 256, 1).repeat(1, 1, 16)
    got = convert_moe_packed_tensors(blocks, scales)  # [1, 512, 256]
    got = got[0].transpose(0, 1).contiguous()
    res["gpt_oss"] = {"vs_rule": bits_equal_nan(got, want)}
    tables["gpt_oss"] = got
    SUMMARY["golden"] = res
    # the table a test reads: value of code c (0..15) under scale byte r, each path (byte c packs lo=c, hi=0)
    js = {"rule": "bf16_rne(fl32(E2M1[code]) * 2^(e-127)); hex bf16 bits, [scale byte][code]",
          "transformers": "5.17.0", "torch": torch.__version__}
    for name, t in tables.items():
        v = t[:, 0:32:2].contiguous().view(torch.int16).to(torch.int32) & 0xFFFF
        js[name] = ["".join(f"{int(x):04x}" for x in row) for row in v]
    with open(os.path.join(out, "golden_e8m0_e2m1.json"), "w") as f:
        json.dump(js, f, indent=2)
        f.write("\n")


def bits_equal_nan(a, b):
    a, b = a.float(), b.float()
    both_nan = torch.isnan(a) & torch.isnan(b)
    eq = (a.view(torch.int32) == b.view(torch.int32)) | both_nan
    return {"n": a.numel(), "equal": int(eq.sum()), "nan": int(torch.isnan(a).sum()), "inf": int(torch.isinf(a).sum())}


# ------------------------------------------------------------------------------------------ helpers
def redraw(model):
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.ndim >= 2 and p.is_floating_point():
                r = 2.0 ** (2 * torch.rand(p.shape[-2], 1, generator=g) - 1)
                c = 2.0 ** (2 * torch.rand(1, p.shape[-1], generator=g) - 1)
                p.copy_((torch.randn(p.shape, generator=g) * 0.02 * r * c).to(p.dtype))
            elif "norm" in n and p.is_floating_point():
                p.copy_((1 + 0.1 * torch.randn(p.shape, generator=g)).to(p.dtype))


def mxfp4_encode(w):
    """[..., K] float -> (codes uint8 [..., K] nibbles, e uint8 [..., K/32])."""
    x = w.float().reshape(*w.shape[:-1], w.shape[-1] // 32, 32)
    amax = x.abs().amax(dim=-1)
    e = torch.where(amax > 0, torch.ceil(torch.log2(amax / 6.0)), torch.full_like(amax, -127.0))
    e = e.clamp(-127, 127)
    y = x / torch.pow(2.0, e).unsqueeze(-1)
    mags = torch.tensor(E2M1[:8])
    d = (y.abs().unsqueeze(-1) - mags).abs()
    best = d.argmin(dim=-1)
    # ties: prefer the even code
    dmin = d.min(dim=-1).values
    tie = (d == dmin.unsqueeze(-1)).sum(-1) > 1
    best = torch.where(tie & (best % 2 == 1), best + 1, best).clamp(max=7)
    code = best + 8 * (y < 0).long() * (best > 0).long()
    return code.reshape(w.shape).to(torch.uint8), (e + 127).to(torch.uint8)


def pack(codes):
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)


# ------------------------------------------------------------------------------------------ dsv4
def dsv4(out, block=128, name="dsv4-fp8-fp4", variants=True):
    from transformers import AutoModelForCausalLM, DeepseekV4Config
    from transformers.integrations.finegrained_fp8 import Fp8Dequantize, Fp8Quantize
    from safetensors.torch import save_file
    cfg = DeepseekV4Config(
        vocab_size=VOCAB, hidden_size=384, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        head_dim=128, q_lora_rank=128, o_groups=2, o_lora_rank=128, qk_rope_head_dim=32,
        partial_rotary_factor=0.25, moe_intermediate_size=256, n_routed_experts=4, n_shared_experts=1,
        num_experts_per_tok=2, index_head_dim=32, index_n_heads=2, index_topk=4, max_position_embeddings=512,
        tie_word_embeddings=False, sliding_window=64, num_nextn_predict_layers=0,
        layer_types=["heavily_compressed_attention", "heavily_compressed_attention"],
        mlp_layer_types=["hash_moe", "hash_moe"])
    torch.manual_seed(0)
    m = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    redraw(m)
    src = os.path.join(out, "_src", "dsv4")
    m.save_pretrained(src)
    del m
    tensors = load_dir(src)

    class _QC:
        scale_fmt = "ue8m0"
        weight_block_size = (block, block)

    class _HQ:
        quantization_config = _QC()

    q = Fp8Quantize(_HQ())
    fp8_re = ("attn.wq_a.", "attn.wq_b.", "attn.wkv.", "attn.wo_a.", "attn.wo_b.", "compressor.wkv.",
              "compressor.wgate.", "indexer.wq_b.", "shared_experts.w")
    outt, notes = {}, {"fp8": [], "fp8_passed_through": [], "fp4": []}
    for k, v in tensors.items():
        if ".experts." in k and ".shared_experts." not in k and k.endswith(".weight"):
            codes, e = mxfp4_encode(v)
            outt[k] = pack(codes).view(torch.int8)
            outt[k[: -len("weight")] + "weight_scale_inv"] = e.view(torch.float8_e8m0fnu)
            notes["fp4"].append(k)
        elif k.endswith(".weight") and v.ndim == 2 and any(p in k for p in fp8_re):
            r = q._quantize_one(k, v)
            outt.update(r)
            (notes["fp8"] if len(r) == 2 else notes["fp8_passed_through"]).append(k)
        else:
            outt[k] = v
    fx = os.path.join(out, name)
    os.makedirs(fx, exist_ok=True)
    c = json.load(open(os.path.join(src, "config.json")))
    c["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                "scale_fmt": "ue8m0", "weight_block_size": [block, block]}
    c["expert_dtype"] = "fp4"
    json.dump(c, open(os.path.join(fx, "config.json"), "w"), indent=2, sort_keys=True)
    for f in ("generation_config.json",):
        if os.path.exists(os.path.join(src, f)):
            shutil.copyfile(os.path.join(src, f), os.path.join(fx, f))
    save_file(outt, os.path.join(fx, "model.safetensors"), metadata={"format": "pt"})
    # expansion: transformers' Fp8Dequantize per (weight, scale) pair, output bf16
    deq = Fp8Dequantize(None)
    exp, checks = {}, {}
    for k, v in outt.items():
        if k.endswith("weight_scale_inv"):
            continue
        sk = k[: -len("weight")] + "weight_scale_inv"
        if sk in outt:
            d = deq._dequantize_one(v, outt[sk], output_dtype=torch.bfloat16)
            exp[k] = d
            if v.dtype == torch.int8:
                u8 = v.view(torch.uint8)
                codes = torch.stack([(u8 & 15).long(), (u8 >> 4).long()], -1).reshape(v.shape[0], -1)
                eb = outt[sk].view(torch.uint8).long().repeat_interleave(32, dim=-1)
                checks[k] = bits_equal_nan(d, rule(codes, eb))
        else:
            exp[k] = v
    b = fx + ".bf16"
    os.makedirs(b, exist_ok=True)
    cb = json.load(open(os.path.join(src, "config.json")))
    json.dump(cb, open(os.path.join(b, "config.json"), "w"), indent=2, sort_keys=True)
    if os.path.exists(os.path.join(src, "generation_config.json")):
        shutil.copyfile(os.path.join(src, "generation_config.json"), os.path.join(b, "generation_config.json"))
    save_file(exp, os.path.join(b, "model.safetensors"), metadata={"format": "pt"})
    # error against the source
    err = {k: float((exp[k].float() - tensors[k].float()).abs().max() / tensors[k].float().abs().max())
           for k in notes["fp4"] + notes["fp8"]}
    # transformers' own dequantizing load of the fixture vs a plain load of the expansion
    load = {}
    try:
        from transformers import FineGrainedFP8Config
        m1 = AutoModelForCausalLM.from_pretrained(fx, quantization_config=FineGrainedFP8Config(dequantize=True),
                                                  dtype=torch.bfloat16)
        m2 = AutoModelForCausalLM.from_pretrained(b, dtype=torch.bfloat16)
        s1, s2 = m1.state_dict(), m2.state_dict()
        load = {"keys_equal": sorted(s1) == sorted(s2),
                "bit_equal_params": sum(1 for k in s1 if k in s2 and s1[k].dtype == s2[k].dtype and s1[k].shape == s2[k].shape and torch.equal(s1[k].view(torch.uint8) if s1[k].dtype.itemsize == 1 else s1[k], s2[k].view(torch.uint8) if s2[k].dtype.itemsize == 1 else s2[k])),
                "params": len(s1),
                "differing": [k for k in s1 if k in s2 and not (s1[k].shape == s2[k].shape and torch.equal(s1[k].float(), s2[k].float()))][:20]}
    except Exception as ex:  # recorded, not fatal
        load = {"error": f"{type(ex).__name__}: {str(ex)[:600]}"}
    SUMMARY[name] = {"notes": notes, "fp4_vs_rule": checks, "max_rel_err_vs_source": err,
                     "transformers_dequantize_load": load,
                     "tensors": {k: [st_dtype(v.dtype), list(v.shape)] for k, v in sorted(outt.items())}}
    if not variants:
        return
    # the release's names: X.scale, expert scales in a float32 container
    name2 = "dsv4-release-scales"
    fx2 = os.path.join(out, name2)
    os.makedirs(fx2, exist_ok=True)
    for f in ("config.json", "generation_config.json"):
        if os.path.exists(os.path.join(fx, f)):
            shutil.copyfile(os.path.join(fx, f), os.path.join(fx2, f))
    t2 = {}
    for k, v in outt.items():
        if k.endswith(".weight_scale_inv"):
            nk = k[: -len(".weight_scale_inv")] + ".scale"
            t2[nk] = v.float() if ".experts." in k and ".shared_experts." not in k else v
        else:
            t2[k] = v
    save_file(t2, os.path.join(fx2, "model.safetensors"), metadata={"format": "pt"})
    SUMMARY[name2] = {"tensors": {k: [st_dtype(v.dtype), list(v.shape)] for k, v in sorted(t2.items())
                                  if "layers.0." in k}}


def dsv4_block32(out):
    """dsv4-fp8-block32 (and .bf16): dsv4-fp8-fp4 with DeepSeek-V4.1's [32, 32] FP8 blocks (weight_block_size
    [32, 32]: one E8M0 scale per 32x32 block of the FP8 weights, Fp8Quantize with that block size)."""
    dsv4(out, block=32, name="dsv4-fp8-block32", variants=False)


def release_names(out):
    """dsv4-release-names (and .bf16): dsv4-fp8-fp4 under DeepSeek's own top-level names, as its releases ship them
    (no `model.` prefix: `layers.L.*`, `embed.weight`, `norm.weight`, `hc_head_fn/base/scale`; the reverse of
    transformers' conversion_mapping.py renames). Only the safetensors headers are rewritten; every byte of data is
    dsv4-fp8-fp4's."""
    import struct

    def ren(k):
        if k.startswith("model.layers."):
            return k[len("model."):]
        return {"model.embed_tokens.weight": "embed.weight", "model.norm.weight": "norm.weight",
                "model.hc_head.hc_fn": "hc_head_fn", "model.hc_head.hc_base": "hc_head_base",
                "model.hc_head.hc_scale": "hc_head_scale"}.get(k, k)

    for suffix in ("", ".bf16"):
        src, dst = os.path.join(out, "dsv4-fp8-fp4" + suffix), os.path.join(out, "dsv4-release-names" + suffix)
        os.makedirs(dst, exist_ok=True)
        for f in os.listdir(src):
            if not f.endswith(".safetensors"):
                shutil.copyfile(os.path.join(src, f), os.path.join(dst, f))
                continue
            b = open(os.path.join(src, f), "rb").read()
            n = struct.unpack("<Q", b[:8])[0]
            h = {(k if k == "__metadata__" else ren(k)): v for k, v in json.loads(b[8:8 + n]).items()}
            hb = json.dumps(h, separators=(",", ":")).encode()
            hb += b" " * ((8 - len(hb) % 8) % 8)
            open(os.path.join(dst, f), "wb").write(struct.pack("<Q", len(hb)) + hb + b[8 + n:])


# ------------------------------------------------------------------------------------------ gpt-oss
def gpt_oss(out):
    from transformers import AutoModelForCausalLM, GptOssConfig
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    from safetensors.torch import save_file
    cfg = GptOssConfig(vocab_size=VOCAB, hidden_size=96, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=32, num_local_experts=4,
                       num_experts_per_tok=2, sliding_window=64, max_position_embeddings=512,
                       tie_word_embeddings=False, layer_types=["sliding_attention", "full_attention"])
    torch.manual_seed(0)
    m = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    redraw(m)
    src = os.path.join(out, "_src", "gpt_oss")
    m.save_pretrained(src)
    del m
    tensors = load_dir(src)
    outt, exp, checks = {}, {}, {}
    for k, v in tensors.items():
        if k.endswith(".experts.gate_up_proj") or k.endswith(".experts.down_proj"):
            wt = v.transpose(1, 2).contiguous()  # [E, out, in]
            codes, e = mxfp4_encode(wt)
            blocks = pack(codes).reshape(wt.shape[0], wt.shape[1], wt.shape[2] // 32, 16)
            outt[k + "_blocks"], outt[k + "_scales"] = blocks, e
            d = convert_moe_packed_tensors(blocks, e)
            exp[k] = d
            eb = e.long().repeat_interleave(32, dim=-1)
            checks[k] = bits_equal_nan(d, rule(codes.long(), eb).transpose(1, 2))
        else:
            outt[k] = v
            exp[k] = v
    name = "gpt_oss-mxfp4"
    fx = os.path.join(out, name)
    os.makedirs(fx, exist_ok=True)
    c = json.load(open(os.path.join(src, "config.json")))
    c["quantization_config"] = {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                           "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"}
    json.dump(c, open(os.path.join(fx, "config.json"), "w"), indent=2, sort_keys=True)
    save_file(outt, os.path.join(fx, "model.safetensors"), metadata={"format": "pt"})
    b = fx + ".bf16"
    os.makedirs(b, exist_ok=True)
    shutil.copyfile(os.path.join(src, "config.json"), os.path.join(b, "config.json"))
    for f in ("generation_config.json",):
        if os.path.exists(os.path.join(src, f)):
            shutil.copyfile(os.path.join(src, f), os.path.join(fx, f))
            shutil.copyfile(os.path.join(src, f), os.path.join(b, f))
    save_file(exp, os.path.join(b, "model.safetensors"), metadata={"format": "pt"})
    load = {}
    try:
        from transformers import Mxfp4Config
        m1 = AutoModelForCausalLM.from_pretrained(fx, quantization_config=Mxfp4Config(dequantize=True),
                                                  dtype=torch.bfloat16)
        s1 = m1.state_dict()
        load = {"params": len(s1), "experts": {k: bits_equal(s1[k], exp[k]) for k in exp if ".experts." in k and k in s1}}
    except Exception as ex:
        load = {"error": f"{type(ex).__name__}: {str(ex)[:600]}"}
    SUMMARY[name] = {"vs_rule": checks, "transformers_dequantize_load": load,
                     "tensors": {k: [st_dtype(v.dtype), list(v.shape)] for k, v in sorted(outt.items())}}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    import transformers
    SUMMARY["versions"] = {"transformers": transformers.__version__, "torch": torch.__version__}
    steps = (golden, dsv4, dsv4_block32, release_names, gpt_oss)
    if len(sys.argv) > 2:  # a comma-separated subset of the steps, by name
        steps = tuple(s for s in steps if s.__name__ in sys.argv[2].split(","))
    for step in steps:
        try:
            step(out)
        except Exception as ex:
            import traceback
            SUMMARY[step.__name__ + "_error"] = traceback.format_exc()[-3000:]
        log(step.__name__, "done")
    with open(os.path.join(out, "_summary.json"), "w") as f:
        json.dump(SUMMARY, f, indent=1)


if __name__ == "__main__":
    main()

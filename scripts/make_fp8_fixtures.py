#!/usr/bin/env python3
"""Tiny FP8 source checkpoints of each FP8 dialect (tests/data/fp8/NAME/), each beside its reference bf16
expansion (tests/data/fp8/NAME.bf16/), written by the libraries that define the dialect.

Run (torch 2.11, transformers 5.17.0, safetensors 0.8; a CUDA GPU of compute capability >= 8.9 for
transformers' FP8 quantize-on-load; written and run on one H200, ~25 s):

    python3 scripts/make_fp8_fixtures.py OUTDIR \
        --ct-src  CT/src/compressed_tensors   # compressed-tensors ac8e2ba8 (= 0.18.0): git archive of src/
        --harness CT/schemes_golden.py        # shared/golden/schemes/schemes_golden.py (the CT-extraction harness)
        --lc-src  LC/src/llmcompressor        # llm-compressor ab1ba3e: observers/helpers.py, observers/min_max.py,
                                              #   entrypoints/model_free/process.py
        [--only NAME,NAME]
    (or CT_SRC / CT_HARNESS / LC_SRC in the environment), then copy OUTDIR/NAME and OUTDIR/NAME.bf16 into
    tests/data/fp8/. OUTDIR/_src holds the bf16 sources, OUTDIR/_summary/NAME.json the tensor lists,
    configs and cross-checks (every .bf16 weight against w.float() * expanded scale), OUTDIR/_probe the
    transformers source files read. Deterministic: two runs gave byte-identical folders.

bf16 sources (real transformers config classes, tie_word_embeddings false, vocab 128, 2 layers; built with
torch.manual_seed(0) and then redrawn from a Generator seeded 0 as N(0, 0.02) x 2^U(-1,1) per row x
2^U(-1,1) per column, norms 1 + 0.1 N(0,1): transformers 5.17's truncated-normal init reaches its clip
value 0.06640625 in every 128x128 block, which would make every block/tensor scale the same number):
  qwen3        Qwen3Config H 128, I 256, 4 heads x 64 (q [256,128], o [128,256]), 2 kv heads (k/v [128,128])
  qwen3-i320   the same with I 320 (gate/up [320,128], down [128,320]: a partial 64-wide last block)
  deepseek_v3  DeepseekV3Config H 128, 2 heads, q_lora 256, kv_lora 128, nope 64, rope 128, v 64 (q_a [256,128],
               q_b [384,256], kv_a_proj_with_mqa [256,128], kv_b [256,128], o [128,128]); layer 0 dense (I 256),
               layer 1 MoE: 3 routed experts of 256 (gate/up [256,128], down [128,256]), top-2, n_group 1,
               1 shared expert, first_k_dense_replace 1. (rope 64 is tried first, giving kv_a [192,128] = a
               partial block as in DeepSeek-V3's [576,7168]; transformers 5.17 writes that layer broken, see
               below, so the script falls back to rope 128.)
  qwen3_moe    Qwen3MoeConfig H 128, 4x64 heads, 2 kv heads, both layers MoE: 3 experts of 192 (gate/up [192,128],
               down [128,192]: partial blocks), top-2, router mlp.gate [3,128]

Fixtures (writer -> reference dequantizer used for NAME.bf16):
  native-qwen3 (qwen3), native-deepseek_v3 (deepseek_v3): quant_method "fp8", weight_block_size [128,128];
      X.weight F8_E4M3 + X.weight_scale_inv F32 [ceil(N/128), ceil(K/128)].
      writer: transformers 5.17.0 AutoModelForCausalLM.from_pretrained(src, quantization_config=
              FineGrainedFP8Config(weight_block_size=(128, 128)), device_map="cuda:0", dtype=bfloat16) ->
              save_pretrained (quantize-on-load: integrations/finegrained_fp8.py Fp8Quantize._quantize_one;
              MoE experts in memory FP8Experts gate_up_proj [E,2I,H] + gate_up_proj_scale_inv [E,2I/128,H/128],
              written back per expert by core_model_loading.py SplitModulelist, whose chunk.squeeze() drops
              every unit dim of the per-expert scale_inv: [2,1] and [1,2] are written as [2], [1,1] as []).
              The loader casts the bf16 weight into FP8Linear's float8 parameter before Fp8Quantize runs, so
              the stored bytes are Fp8Quantize of fp8(bf16 weight) (unscaled cast first; 100% of bytes match
              that, ~47% match a direct quantization) and scale_inv = 1/(448/amax of that fp8 tensor's block).
              A weight whose dims are not multiples of 128 (kv_a [192,128]) is passed through unquantized by
              Fp8Quantize and then stored as the unscaled fp8 cast beside a scale_inv that is never written
              (MISSING in transformers' load report; garbage values such as 7168.0): the script detects that
              (dequantized fixture vs source, max |err|/amax > 0.25) and falls back to rope 128.
      .bf16:  transformers' FP8 dequantization, integrations/finegrained_fp8.py Fp8Dequantize._dequantize_one
              ((fp8.to(float32) * scale_inv.to(float32)).to(bfloat16) per block): native-qwen3 through
              from_pretrained(fixture, quantization_config=FineGrainedFP8Config(dequantize=True)), its
              state_dict loaded into a plain from_config bf16 model and save_pretrained (a save_pretrained of
              the dequantized model itself re-quantizes: Fp8Dequantize.reverse_op is Fp8Quantize);
              native-deepseek_v3 by calling Fp8Dequantize()._dequantize_one per tensor with the scale_inv put
              back on its [ceil(N/128), ceil(K/128)] grid, because the dequantize=True load of transformers'
              own MoE output fails on the squeezed expert scales (reshape error), then safetensors save_file.
  ct-fp8-dynamic (qwen3, FP8_DYNAMIC, ignore ["lm_head"]: model.embed_tokens is quantized too),
  ct-fp8-block (qwen3-i320, FP8_BLOCK, ignore ["model.embed_tokens", "lm_head"]),
  ct-fp8-tensor (qwen3, QuantizationScheme(weights = the FP8 preset's per-tensor weights, input_activations =
      FP8_DYNAMIC's dynamic per-token), ignore ["model.embed_tokens", "lm_head"]; group "config_group_0"),
  ct-fp8-block-qwen3_moe (qwen3_moe, FP8_BLOCK, ignore ["model.embed_tokens", "lm_head", "re:.*mlp.gate$"]):
      quant_method "compressed-tensors", format "float-quantized"; X.weight F8_E4M3 + X.weight_scale BF16
      (the weight's dtype): [N,1] channel, [ceil(N/128), ceil(K/128)] block, [1] tensor.
      writer: compressed-tensors 0.18.0 (ac8e2ba8) code, unmodified, extracted and run by schemes_golden.py
              (llm-compressor's model_free glue rewritten there from llm-compressor ab1ba3e), driven as
              llm-compressor entrypoints/model_free/__init__.py::model_free_ptq + process.py::process_file run a
              checkpoint on cuda:0: copy the non-safetensors files, per shard load to the GPU,
              split_fused_moe_experts (llm-compressor process.py, extracted), CT utils/match.py::
              match_quantizable_tensors (extracted; module names ending in "norm" skipped, targets ["Linear"]
              = every ".weight", then the ignore list), per tensor: validate, Linear in the weight dtype,
              initialize_qparams, memoryless min/max observer, calculate_qparams, compress_module, state_dict to
              CPU; safetensors save_file (no metadata), model.safetensors.index.json and config.json
              (quantization_config added, whole file json.dump(indent=2, sort_keys=True)) as
              save_utils.update_config / update_safetensors_index write them. Ignore lists: ["lm_head"] is the
              default of llm-compressor's FP8 skill template; the others follow examples/model_free_ptq/
              qwen3_fp8_block.py and glm_4.6_fp8_block.py.
      .bf16:  CT quantization/lifecycle/forward.py::dequantize(x_q=weight, scale=weight_scale, args=
              scheme.weights, dtype=torch.bfloat16) -> _process_quantization -> forward_helpers.py::
              _process_block (zero-pads x_q to whole blocks, per block, slices back) | _apply_quantize_op ->
              _dequantize: x_q.to(scale.dtype) * scale (bf16 product), .to(dtype). CT's own decompressor,
              FloatQuantizationCompressor.decompress (naive_quantized/base.py), calls dequantize WITHOUT args
              and infers the strategy from the scale shape: it fails on block scales [n,1] (read as channel)
              and on partial blocks, and silently uses group_size 96 for a [128,192] weight with a [1,2] block
              scale; its outcome per tensor is in _summary.
  modelopt-fp8 (qwen3): hf_quant_config.json {"producer": {"name": "modelopt", ...}, "quantization": {"quant_algo":
      "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}}, config.json quantization_config
      quant_method "modelopt"; X.weight F8_E4M3, X.weight_scale F32 [], X.input_scale F32 [],
      self_attn.k_proj.k_scale / self_attn.v_proj.v_scale F32 [].
      writer: NOT ModelOpt (nvidia-modelopt is not installed on, and cannot be installed onto, the GPU machine):
              this script, following ModelOpt's export source NVIDIA/Model-Optimizer a2fbac7ba (0.47.0dev-81):
              torch/export/unified_export_hf.py::_export_quantized_weight (QUANTIZATION_FP8: weight_scale =
              amax/maxbound, maxbound 448, fp32 0-d; input_scale = quant_utils.get_activation_scaling_factor =
              input amax.float()/448, squeezed), quant_utils.to_quantized_weight ((weight.to(bf16) /
              weight_scale).to(float8_e4m3fn) on the GPU), quant_utils.postprocess_state_dict
              (k_bmm_quantizer._amax -> k_proj.k_scale = amax.float()/448, v likewise),
              get_quant_config/process_layer_quant_config (lm_head's quantizers are disabled by
              default_disabled_quantizers -> exclude_modules), convert_hf_config.py::
              convert_hf_quant_config_format, export_hf_checkpoint (model.save_pretrained(state_dict=...) with
              transformers' revert_weight_conversion patched to a no-op; hf_quant_config.json and config.json
              then json.dump(indent=4)); producer version "0.47.0.dev81+ga2fbac7ba" names that source. No
              q/k/v or gate/up scale unification: requantize_resmooth_fused_llm_layers skips FP8. Calibration
              as mtq.quantize(FP8_DEFAULT_CFG + FP8_KV_CFG, max): per-tensor max |x| of every Linear input and
              of the key/value states handed to the attention function (post-RoPE, as _QuantAttention's
              k_bmm_quantizer sees them) over 2 batches of 4x64 random token ids (hf_ptq.py uses text).
      .bf16:  (weight.float() * weight_scale).to(bfloat16) (fp32 product, one rounding). ModelOpt's own
              qtensor/fp8_tensor.py FP8QTensor.dequantize(dtype) computes quantized.to(dtype) * scale.to(dtype)
              (scale rounded to bf16, product in bf16) and vLLM's w8a8_utils.per_tensor_dequantize
              tensor.to(float16) * scale (fp16 result); _summary counts where those differ.

Every NAME.bf16: config.json of the bf16 source (no quantization_config), generation_config.json, one
model.safetensors with the fixture's tensor names minus its scale tensors (weight_scale_inv, weight_scale,
input_scale, k_scale, v_scale), every weight bf16.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import re
import shutil
import sys
import traceback

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEV = "cuda:0"
VOCAB = 128
SUMMARY = {}


def log(*a):
    print(*a, flush=True)


# --------------------------------------------------------------------------------------- helpers
def st_dtype(dt):
    return {torch.float8_e4m3fn: "F8_E4M3", torch.bfloat16: "BF16", torch.float32: "F32", torch.float16: "F16",
            torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8"}.get(dt, str(dt))


def load_dir(d):
    from safetensors.torch import load_file
    out = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            for k, v in load_file(os.path.join(d, f)).items():
                out[k] = v
    return out


def tensor_list(d):
    from safetensors import safe_open
    res = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            with safe_open(os.path.join(d, f), "pt") as fh:
                for k in fh.keys():
                    t = fh.get_slice(k)
                    res[k] = [f, t.get_dtype(), list(t.get_shape())]
    return res


def read_json(p):
    with open(p) as f:
        return json.load(f)


def files_of(d):
    return {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}


def write_bf16_dir(src_dir, out_dir, tensors):
    """config.json / generation_config.json of the bf16 source + model.safetensors (format pt)."""
    from safetensors.torch import save_file
    os.makedirs(out_dir, exist_ok=True)
    for f in ("config.json", "generation_config.json"):
        if os.path.exists(os.path.join(src_dir, f)):
            shutil.copyfile(os.path.join(src_dir, f), os.path.join(out_dir, f))
    save_file({k: v.contiguous().cpu() for k, v in tensors.items()}, os.path.join(out_dir, "model.safetensors"),
              metadata={"format": "pt"})


def scale_grid(scale, shape, bs=(128, 128)):
    """The scale as a [..., ceil(N/bn), ceil(K/bk)] grid (transformers may save squeezed per-expert scales)."""
    grid = (-(-shape[-2] // bs[0]), -(-shape[-1] // bs[1]))
    if scale.ndim >= 2 and tuple(scale.shape[-2:]) == grid:
        return scale
    if scale.numel() == grid[0] * grid[1] * (1 if len(shape) == 2 else shape[0]):
        return scale.reshape(*shape[:-2], *grid)
    raise ValueError(f"scale {list(scale.shape)} does not fit weight {list(shape)} in {bs} blocks")


def expand_blocks(scale, shape, bs):
    s = scale_grid(scale, shape, bs)
    for dim, b in ((-2, bs[0]), (-1, bs[1])):
        s = s.repeat_interleave(b, dim=dim)
    return s[..., : shape[-2], : shape[-1]]


def cmp(a, b):
    a, b = a.cpu(), b.cpu()
    if a.shape != b.shape:
        return {"shape_mismatch": [list(a.shape), list(b.shape)]}
    if a.dtype != b.dtype:
        return {"dtype_mismatch": [str(a.dtype), str(b.dtype)]}
    eq = (a.view(torch.int16) == b.view(torch.int16)) if a.dtype == b.dtype == torch.bfloat16 else (a == b)
    return {"n": a.numel(), "bit_equal": int(eq.sum()), "max_abs_diff": float((a.float() - b.float()).abs().max())}


# --------------------------------------------------------------------------------------- sources
def qwen3_cfg(inter=256):
    from transformers import Qwen3Config
    return Qwen3Config(vocab_size=VOCAB, hidden_size=128, intermediate_size=inter, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=64, tie_word_embeddings=False,
                       max_position_embeddings=512)


def deepseek_cfg(rope):
    from transformers import DeepseekV3Config
    return DeepseekV3Config(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, moe_intermediate_size=256,
                            num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, n_shared_experts=1,
                            n_routed_experts=3, num_experts_per_tok=2, n_group=1, topk_group=1,
                            first_k_dense_replace=1, q_lora_rank=256, kv_lora_rank=128, qk_nope_head_dim=64,
                            qk_rope_head_dim=rope, v_head_dim=64, tie_word_embeddings=False,
                            max_position_embeddings=512)


def qwen3_moe_cfg():
    from transformers import Qwen3MoeConfig
    return Qwen3MoeConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=384, moe_intermediate_size=192,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                          num_experts=3, num_experts_per_tok=2, decoder_sparse_step=1, mlp_only_layers=[],
                          norm_topk_prob=True, tie_word_embeddings=False, max_position_embeddings=512)


def make_source(out, cfg):
    """Random bf16 model of the real class. transformers 5.17 initialises Linear weights with a truncated
    normal whose clip value (0.06640625 in bf16) is reached inside every 128x128 block, so every block
    and per-tensor FP8 scale would be the same number; the weights are therefore redrawn as
    N(0, 0.02) x 2^U(-1,1) per row x 2^U(-1,1) per column, norms as 1 + 0.1 N(0,1)."""
    from transformers import AutoModelForCausalLM
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if p.ndim >= 2:
                r = 2.0 ** (2 * torch.rand(p.shape[-2], 1, generator=g) - 1)
                c = 2.0 ** (2 * torch.rand(1, p.shape[-1], generator=g) - 1)
                p.copy_((torch.randn(p.shape, generator=g) * 0.02 * r * c).to(p.dtype))
            elif "norm" in n:
                p.copy_((1 + 0.1 * torch.randn(p.shape, generator=g)).to(p.dtype))
    model.save_pretrained(out)
    del model
    return out


# --------------------------------------------------------------------------------------- native
def transformers_sources():
    import transformers
    base = os.path.dirname(transformers.__file__)
    out = {}
    for rel in ("integrations/finegrained_fp8.py", "quantizers/quantizer_finegrained_fp8.py",
                "core_model_loading.py", "conversion_mapping.py"):
        p = os.path.join(base, rel)
        if os.path.exists(p):
            out[rel] = open(p).read()
    return out


def dequant_lines(srcs):
    """The lines of transformers' FP8 dequantization (class Fp8Dequantize / any 'dequant' function)."""
    res = {}
    for rel, text in srcs.items():
        lines = text.splitlines()
        for i, l in enumerate(lines):
            if re.match(r"\s*(class|def)\s+\w*[Dd]equant", l):
                j = i + 1
                ind = len(l) - len(l.lstrip())
                while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > ind):
                    j += 1
                res[f"{rel}:{i + 1}"] = "\n".join(lines[i:j])
    return res


def native(name, src, out_root, summ):
    from transformers import AutoModelForCausalLM, FineGrainedFP8Config
    out = os.path.join(out_root, name)
    qc = FineGrainedFP8Config(weight_block_size=(128, 128))
    summ["writer_config_repr"] = repr(qc.to_dict())
    m = AutoModelForCausalLM.from_pretrained(src, quantization_config=qc, device_map=DEV, dtype=torch.bfloat16)
    summ["in_memory_fp8_params"] = {n: [str(p.dtype), list(p.shape)] for n, p in m.named_parameters()
                                    if p.dtype == torch.float8_e4m3fn or "scale" in n}
    summ["in_memory_module_classes"] = sorted({type(x).__name__ for x in m.modules()})
    fp8_modules = [n for n, x in m.named_modules() if type(x).__name__ in ("FP8Linear", "FP8Experts")]
    m.save_pretrained(out)
    del m
    torch.cuda.empty_cache()
    # quantization error against the bf16 source, and which recipe reproduces the stored bytes:
    # "direct"  fp8(clamp(x * 448/amax(x)))            (amax over the block, x the bf16 source in fp32)
    # "via_fp8" the same applied to x first cast to fp8 unscaled (what a load into an fp8 param does)
    srcw, fx = load_dir(src), load_dir(out)
    err, recipe = {}, {}
    for k, w in fx.items():
        if w.dtype != torch.float8_e4m3fn:
            continue
        sk = k[: -len("weight")] + "weight_scale_inv"
        x = srcw[k].float()
        sc = expand_blocks(fx[sk].float(), w.shape, (128, 128))
        d = w.float() * sc
        err[k] = float((d - x).abs().max() / x.abs().max())
        if w.shape[-2] % 128 == 0 and w.shape[-1] % 128 == 0:
            def q(xf):
                rb = xf.reshape(w.shape[-2] // 128, 128, w.shape[-1] // 128, 128)
                mx = rb.abs().amax(dim=(1, 3), keepdim=True)
                return torch.clamp(rb * (448.0 / mx), -448, 448).to(torch.float8_e4m3fn).reshape(w.shape)
            recipe[k] = {h: int((q(xx).view(torch.uint8) == w.view(torch.uint8)).sum())
                         for h, xx in (("direct", x), ("via_fp8", x.to(torch.float8_e4m3fn).float()))}
            recipe[k]["n"] = w.numel()
    summ["max_rel_error_vs_source"] = err
    summ["which_quantization_recipe_matches_bytes"] = recipe
    bad = {k: v for k, v in err.items() if v > 0.25}
    if bad:  # e.g. Fp8Quantize passes a weight whose dims are not multiples of 128 through unquantized
        raise RuntimeError(f"fixture weights do not dequantize to the source (max |err|/amax): {bad}")
    outb = out + ".bf16"
    try:
        m2 = AutoModelForCausalLM.from_pretrained(out, quantization_config=FineGrainedFP8Config(dequantize=True),
                                                  device_map=DEV, dtype=torch.bfloat16)
        summ["dequant_in_memory_dtypes"] = sorted({str(p.dtype) for p in m2.parameters()})
        # what save_pretrained does with the dequantized model (its revert re-applies Fp8Quantize)
        tmp = os.path.join(out_root, "_tmp_naive_save", name)
        try:
            m2.save_pretrained(tmp)
            tl = tensor_list(tmp)
            summ["naive_save_of_dequantized_model"] = {"dtypes": sorted({v[1] for v in tl.values()}),
                                                       "n_scale_inv": sum(k.endswith("_scale_inv") for k in tl)}
        except Exception as e:
            summ["naive_save_of_dequantized_model"] = f"{type(e).__name__}: {e}"
        shutil.rmtree(os.path.join(out_root, "_tmp_naive_save"), ignore_errors=True)
        # the dequantized weights, saved by a plain bf16 model of the source config (no quantizer on save)
        from transformers import AutoConfig
        torch.manual_seed(0)
        fresh = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(src), dtype=torch.bfloat16)
        r = fresh.load_state_dict({k: v.detach().cpu() for k, v in m2.state_dict().items()}, strict=False)
        summ["load_state_dict"] = {"missing": list(r.missing_keys), "unexpected": list(r.unexpected_keys)}
        if r.missing_keys:
            raise RuntimeError(f"dequantized state dict lacks {r.missing_keys}")
        fresh.save_pretrained(outb)
        summ["bf16_written_by"] = ("from_pretrained(fixture, FineGrainedFP8Config(dequantize=True)); state_dict -> "
                                   "from_config(source config) bf16 model -> save_pretrained")
        del m2, fresh
    except Exception as e:
        summ["dequantize_load_error"] = f"{type(e).__name__}: {e}"
        summ["dequantize_load_traceback"] = traceback.format_exc()
        from transformers.integrations.finegrained_fp8 import Fp8Dequantize
        op = Fp8Dequantize(None)
        q = load_dir(out)
        res = {}
        for k, v in q.items():
            if k.endswith("_scale_inv"):
                continue
            sk = k[: -len("weight")] + "weight_scale_inv" if k.endswith("weight") else k + "_scale_inv"
            if sk in q:
                v = op._dequantize_one(v.to(DEV), scale_grid(q[sk], v.shape).to(DEV), output_dtype=torch.bfloat16).cpu()
            res[k] = v
        write_bf16_dir(src, outb, res)
        summ["bf16_written_by"] = ("fallback: transformers Fp8Dequantize._dequantize_one per tensor (scale reshaped "
                                   "to its [ceil(N/128), ceil(K/128)] grid), safetensors save_file")
    torch.cuda.empty_cache()
    # cross-check the expansion against w.float() * scale (fp32 product, one bf16 rounding) and a bf16 product
    q, b = load_dir(out), load_dir(outb)
    checks = {}
    for k, s in q.items():
        mm = re.match(r"(.*?)(_scales?_inv)$", k)
        if not mm:
            continue
        wk = mm.group(1)
        if wk not in q:
            wk = wk + ".weight" if wk + ".weight" in q else wk
        w = q.get(wk)
        if w is None:
            checks[k] = "weight not found"
            continue
        se = expand_blocks(s.float(), w.shape, (128, 128))
        f32 = (w.float() * se).to(torch.bfloat16)
        b16 = w.to(torch.bfloat16) * se.to(torch.bfloat16)
        ref = b.get(wk)
        if ref is None:
            checks[k] = {"expansion_tensor": "not under the same name", "fixture_weight_shape": list(w.shape)}
            continue
        checks[k] = {"vs_fp32_product": cmp(ref, f32), "vs_bf16_product": cmp(ref, b16)}
    summ["expansion_checks"] = checks


# --------------------------------------------------------------------------------------- compressed-tensors
class CT:
    def __init__(self, harness, ct_src, lc_src):
        spec = importlib.util.spec_from_file_location("schemes_golden", harness)
        H = importlib.util.module_from_spec(spec)
        sys.modules["schemes_golden"] = H
        spec.loader.exec_module(H)
        NS, report = H.build_namespace(ct_src, torch, lc_src)
        import collections.abc
        import typing
        NS.update(re=re, Mapping=collections.abc.Mapping, Iterator=typing.Iterator, Iterable=typing.Iterable)
        chunks = []
        H.exec_chunk(H.Source(ct_src, report), "utils/match.py", ["FusedMappping", "match_name",
                                                                  "match_quantizable_tensors"], NS, report, chunks)
        if lc_src:
            H.exec_chunk(H.Source(lc_src, {"files": report.setdefault("lc_files", {})}),
                         "entrypoints/model_free/process.py", ["split_fused_moe_experts"], NS, report, chunks, "lc")
        report["unresolved_after_extra"] = H.check_names(chunks, NS)
        self.H, self.NS, self.report = H, NS, report

    def scheme(self, spec):
        NS = self.NS
        if isinstance(spec, str):
            return spec, NS["preset_name_to_scheme"](spec, [])
        # per-tensor FP8 weights (the FP8 preset's weights) with FP8_DYNAMIC's dynamic token activations
        w = NS["preset_name_to_scheme"]("FP8", []).weights
        a = NS["preset_name_to_scheme"]("FP8_DYNAMIC", []).input_activations
        return "config_group_0", NS["QuantizationScheme"](targets=[], weights=w, input_activations=a)

    def model_free(self, src, out, spec, ignore, summ):
        from safetensors.torch import load_file, save_file
        H, NS, T = self.H, self.NS, torch
        key, scheme = self.scheme(spec)
        nrec = len(NS["_harness_logger"].records)
        H.lc_validate_scheme(NS, scheme)  # validate_config -> _validate_scheme (adds targets ["Linear"])
        os.makedirs(out, exist_ok=True)
        for f in sorted(os.listdir(src)):
            if not f.endswith("safetensors"):
                shutil.copyfile(os.path.join(src, f), os.path.join(out, f))
        shards = sorted(f for f in os.listdir(src) if f.endswith(".safetensors"))
        # validate_file on the meta device first (every shard), as model_free does
        for sh in shards:
            t = {k: v.to("meta") for k, v in load_file(os.path.join(src, sh)).items()}
            t = NS["split_fused_moe_experts"](t) if "split_fused_moe_experts" in NS else t
            for _mod, name in NS["match_quantizable_tensors"](t, ignore, scheme.targets):
                H.lc_validate_weight(NS, t[name], scheme, name)
        total, wmap, quantized = 0, {}, []
        for sh in shards:
            tensors = load_file(os.path.join(src, sh), device=DEV)
            tensors = NS["split_fused_moe_experts"](tensors) if "split_fused_moe_experts" in NS else tensors
            with T.no_grad():
                for mod, name in list(NS["match_quantizable_tensors"](tensors, ignore, scheme.targets)):
                    H.lc_validate_weight(NS, tensors[name], scheme, name)
                    m = H.lc_initialize_quantized_linear(NS, tensors[name], scheme, DEV)
                    st = H.lc_observe(NS, m, scheme.weights)
                    H.lc_update_qparams(NS, m, H.lc_get_qparams(NS, scheme.weights, st, [st]))
                    NS["compress_module"](m)
                    del tensors[name]
                    for k, v in m.state_dict(prefix=mod + ".").items():
                        tensors[k] = v.to("cpu")
                    quantized.append(mod)
            save_file(tensors, os.path.join(out, sh))
            total += sum(v.nbytes for v in tensors.values())
            wmap.update({k: sh for k in tensors})
        with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": wmap}, f, indent=2, sort_keys=True)
        # save_utils.update_config: QuantizationConfig(config_groups, kv_cache_scheme, ignore, COMPRESSED, format)
        group = scheme.model_dump()
        fmt = group.get("format")
        qcfg = {"version": self.H.CT_VERSION, "quant_method": "compressed-tensors", "transform_config": {},
                "config_groups": {key: group}, "format": fmt or "dense", "global_compression_ratio": None,
                "ignore": list(ignore), "kv_cache_scheme": None, "quantization_status": "compressed"}
        cp = os.path.join(out, "config.json")
        cfg = read_json(cp)
        cfg["quantization_config"] = qcfg
        with open(cp, "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
        summ["quantized_modules"] = quantized
        summ["harness_warnings"] = sorted(set(NS["_harness_logger"].records[nrec:]))
        return scheme

    def expand(self, src, out, scheme, summ):
        NS = self.NS
        q = load_dir(out)
        res, notes = {}, {}
        fmt = getattr(scheme.format, "value", scheme.format)
        comp = NS["BaseCompressor"].get_value_from_registry(fmt)
        summ["compressor"] = comp.__name__
        for k in list(q):
            if not k.endswith(".weight_scale"):
                res.setdefault(k, q[k])
                continue
        for k, s in q.items():
            if not k.endswith(".weight_scale"):
                continue
            mod = k[: -len(".weight_scale")]
            w = q[mod + ".weight"]
            d, where = None, None
            for where_try in ("cuda", "cpu", "cuda, x_q pre-cast to scale dtype"):
                try:
                    dev = "cpu" if where_try == "cpu" else DEV
                    xq = w.to(dev) if "pre-cast" not in where_try else w.to(dev).to(s.dtype)
                    d = NS["dequantize"](x_q=xq, scale=s.to(dev), zero_point=None, args=scheme.weights,
                                         dtype=torch.bfloat16).cpu()
                    where = where_try
                    break
                except Exception as e:
                    notes.setdefault("dequantize_errors", {})[mod + " @ " + where_try] = f"{type(e).__name__}: {e}"
            if d is None:
                raise RuntimeError(f"CT dequantize failed for {mod}")
            res[mod + ".weight"] = d
            res.pop(k, None)
            ent = {"device": where, "scale_dtype": str(s.dtype),
                   "vs_fp32_product": cmp(d, (w.float() * self._expand_scale(s, w, scheme).float()).to(torch.bfloat16)),
                   "vs_scale_dtype_product": cmp(d, (w.to(s.dtype) * self._expand_scale(s, w, scheme)).to(torch.bfloat16))}
            try:
                dd = comp.decompress({"weight": w, "weight_scale": s}, scheme)["weight"]
                ent["compressor_decompress"] = {"dtype": str(dd.dtype), "vs_reference": cmp(d, dd.to(torch.bfloat16))}
            except Exception as e:
                ent["compressor_decompress"] = f"{type(e).__name__}: {e}"
            notes[mod] = ent
        write_bf16_dir(src, out + ".bf16", res)
        summ["expansion_checks"] = notes

    @staticmethod
    def _expand_scale(s, w, scheme):
        st = scheme.weights.strategy
        st = getattr(st, "value", st)
        if st == "block":
            return expand_blocks(s, w.shape, scheme.weights.block_structure)
        if st == "channel":
            return s.expand(w.shape)
        return s.reshape(()).expand(w.shape)


# --------------------------------------------------------------------------------------- modelopt
MODELOPT_REF = "NVIDIA/Model-Optimizer a2fbac7ba (0.47.0dev-81)"
MODELOPT_VERSION = "0.47.0.dev81+ga2fbac7ba"


def modelopt(name, src, out_root, summ):
    import transformers
    from transformers import AutoModelForCausalLM
    out = os.path.join(out_root, name)
    kv_amax = {}

    def calib_attention(module, query, key, value, attention_mask, **kw):
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        i = module.layer_idx
        k, v = kv_amax.get(i, (None, None))
        ka, va = key.detach().abs().amax(), value.detach().abs().amax()
        kv_amax[i] = (ka if k is None else torch.maximum(k, ka), va if v is None else torch.maximum(v, va))
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kw)

    try:
        transformers.AttentionInterface.register("fp8_kv_calib", calib_attention)
        model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16, device_map=DEV,
                                                     attn_implementation="fp8_kv_calib")
    except Exception as e:
        summ["kv_calibration_error"] = f"{type(e).__name__}: {e}"
        model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.bfloat16, device_map=DEV)
    model.eval()
    excluded = ["lm_head"]  # default_disabled_quantizers: '*lm_head*'
    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and n not in excluded}
    in_amax, hooks = {}, []

    def hook(n):
        def f(mod, inp):
            a = inp[0].detach().abs().amax()
            in_amax[n] = a if n not in in_amax else torch.maximum(in_amax[n], a)
        return f
    for n, m in linears.items():
        hooks.append(m.register_forward_pre_hook(hook(n)))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _ in range(2):
            ids = torch.randint(0, VOCAB, (4, 64), generator=g).to(DEV)
            model(input_ids=ids, use_cache=False)
    for h in hooks:
        h.remove()
    sd = {}
    for k, v in model.state_dict().items():
        sd[k] = v
    maxbound = 448.0
    for n, m in linears.items():
        w = m.weight.data
        amax = w.abs().amax().to(torch.float32)                 # max calibrator, per tensor
        weight_scale = torch.tensor(amax.item() / maxbound)     # _export_quantized_weight, QUANTIZATION_FP8
        qw = (w.to(torch.bfloat16) / weight_scale.to(w.device)).to(torch.float8_e4m3fn)  # to_quantized_weight
        sd[n + ".weight"] = qw
        sd[n + ".weight_scale"] = weight_scale
        sd[n + ".input_scale"] = (in_amax[n].float() / maxbound).squeeze()
    for i, (ka, va) in sorted(kv_amax.items()):
        p = f"model.layers.{i}.self_attn."
        sd[p + "k_proj.k_scale"] = ka.float() / 448
        sd[p + "v_proj.v_scale"] = va.float() / 448
    summ["kv_layers_calibrated"] = sorted(kv_amax)
    quant_config = {"producer": {"name": "modelopt", "version": MODELOPT_VERSION},
                    "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8" if kv_amax else None,
                                     "exclude_modules": excluded}}
    # export_hf_checkpoint: transformers' revert_weight_conversion patched to a no-op around save_pretrained
    patches = []
    for mp in ("transformers.core_model_loading", "transformers.modeling_utils"):
        import importlib
        try:
            mod = importlib.import_module(mp)
            if hasattr(mod, "revert_weight_conversion"):
                patches.append((mod, mod.revert_weight_conversion))
                mod.revert_weight_conversion = lambda model, state_dict: state_dict
        except ImportError:
            pass
    try:
        model.config._attn_implementation = "sdpa"
    except Exception as e:
        summ["attn_reset_error"] = repr(e)
    try:
        model.save_pretrained(out, state_dict={k: v.contiguous() for k, v in sd.items()})
    finally:
        for mod, orig in patches:
            mod.revert_weight_conversion = orig
    with open(os.path.join(out, "hf_quant_config.json"), "w") as f:
        json.dump(quant_config, f, indent=4)
    qd = quant_config["quantization"]
    hfq = {"config_groups": {"group_0": {"input_activations": {"dynamic": False, "num_bits": 8, "type": "float"},
                                         "weights": {"dynamic": False, "num_bits": 8, "type": "float"},
                                         "targets": ["Linear"]}},
           "ignore": qd["exclude_modules"], "quant_algo": "FP8",
           "producer": quant_config["producer"], "quant_method": "modelopt"}
    if qd["kv_cache_quant_algo"] == "FP8":  # convert_hf_quant_config_format: only when kv_cache_quant_algo is set
        hfq = {k: hfq[k] for k in ("config_groups", "ignore", "quant_algo")} | {
            "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"},
            "producer": hfq["producer"], "quant_method": "modelopt"}
    cp = os.path.join(out, "config.json")
    cfg = read_json(cp)
    cfg["quantization_config"] = hfq
    with open(cp, "w") as f:
        json.dump(cfg, f, indent=4)
    summ["attn_implementation_in_saved_config"] = cfg.get("_attn_implementation", None)
    del model
    torch.cuda.empty_cache()
    # reference: weight.float() * weight_scale -> bf16
    q = load_dir(out)
    res, notes = {}, {}
    for k, v in q.items():
        if k.endswith((".weight_scale", ".input_scale", ".k_scale", ".v_scale")):
            continue
        res[k] = v
    for k, s in q.items():
        if not k.endswith(".weight_scale"):
            continue
        wk = k[: -len("_scale")]
        w = q[wk]
        d = (w.float() * s).to(torch.bfloat16)
        res[wk] = d
        notes[wk] = {"modelopt_FP8QTensor_dequantize_bf16": cmp(d, w.to(torch.bfloat16) * s.to(torch.bfloat16)),
                     "vllm_per_tensor_dequantize_fp16": cmp(d, (w.to(torch.float16) * s).to(torch.bfloat16))}
    write_bf16_dir(src, out + ".bf16", res)
    cb = read_json(os.path.join(out + ".bf16", "config.json"))
    summ["expansion_checks"] = notes
    summ["bf16_config_has_quantization_config"] = "quantization_config" in cb


# --------------------------------------------------------------------------------------- main
def summarize(out_root, name, summ):
    d = os.path.join(out_root, name)
    for tag, p in (("fixture", d), ("bf16", d + ".bf16")):
        if os.path.isdir(p):
            summ[tag] = {"files": files_of(p), "tensors": tensor_list(p)}
            cp = os.path.join(p, "config.json")
            if os.path.exists(cp):
                summ[tag]["quantization_config"] = read_json(cp).get("quantization_config")
            hq = os.path.join(p, "hf_quant_config.json")
            if os.path.exists(hq):
                summ[tag]["hf_quant_config"] = read_json(hq)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--ct-src", default=os.environ.get("CT_SRC"))
    ap.add_argument("--harness", default=os.environ.get("CT_HARNESS"))
    ap.add_argument("--lc-src", default=os.environ.get("LC_SRC"))
    ap.add_argument("--only", default="")
    a = ap.parse_args(argv)
    only = {x for x in a.only.split(",") if x}
    torch.manual_seed(0)
    import transformers
    import safetensors
    out = os.path.abspath(a.out)
    os.makedirs(os.path.join(out, "_summary"), exist_ok=True)
    srcd = os.path.join(out, "_src")
    env = {"torch": torch.__version__, "transformers": transformers.__version__,
           "safetensors": safetensors.__version__, "cuda": torch.cuda.get_device_name(0)}
    tsrc = transformers_sources()
    env["transformers_dequant_source"] = dequant_lines({k: v for k, v in tsrc.items() if "fp8" in k})
    os.makedirs(os.path.join(out, "_probe"), exist_ok=True)
    for rel, text in tsrc.items():
        with open(os.path.join(out, "_probe", rel.replace("/", "__")), "w") as f:
            f.write(text)
    log(json.dumps({k: v for k, v in env.items() if k != "transformers_dequant_source"}))

    def want(n):
        return not only or n in only

    def run(name, fn):
        if not want(name):
            return
        summ = {"name": name}
        log("==", name)
        try:
            fn(summ)
            summ["status"] = "ok"
        except Exception as e:
            summ["status"] = f"error: {type(e).__name__}: {e}"
            summ["traceback"] = traceback.format_exc()
            log(summ["traceback"])
        summarize(out, name, summ)
        # A release ships its tokenizer; save_pretrained of a model writes none (scripts/add_tokenizer.sh).
        for d in (name, name + ".bf16"):
            if os.path.isfile(os.path.join(out, d, "config.json")):
                subprocess.run([os.path.join(os.path.dirname(os.path.abspath(__file__)), "add_tokenizer.sh"),
                                os.path.join(out, d)], check=True)
        with open(os.path.join(out, "_summary", name + ".json"), "w") as f:
            json.dump(summ, f, indent=1, default=str)
        log(name, summ["status"])

    srcs = {}

    def src(tag, cfg_fn):
        if tag not in srcs:
            srcs[tag] = make_source(os.path.join(srcd, tag), cfg_fn())
        return srcs[tag]

    run("native-qwen3", lambda s: native("native-qwen3", src("qwen3", qwen3_cfg), out, s))

    def ds(s):
        try:
            native("native-deepseek_v3", src("deepseek_v3", lambda: deepseek_cfg(64)), out, s)
            s["deepseek_rope"] = 64
        except Exception as e:
            s["partial_block_attempt"] = f"{type(e).__name__}: {e}"
            s["partial_block_traceback"] = traceback.format_exc()
            for d in ("native-deepseek_v3", "native-deepseek_v3.bf16"):
                shutil.rmtree(os.path.join(out, d), ignore_errors=True)
            native("native-deepseek_v3", src("deepseek_v3-rope128", lambda: deepseek_cfg(128)), out, s)
            s["deepseek_rope"] = 128
    run("native-deepseek_v3", ds)

    ct = None
    if any(want(n) for n in ("ct-fp8-dynamic", "ct-fp8-block", "ct-fp8-tensor", "ct-fp8-block-qwen3_moe")):
        ct = CT(a.harness, a.ct_src, a.lc_src)
        env["ct_extraction"] = {k: ct.report.get(k) for k in ("files_differing_from_checked", "unresolved_names",
                                                              "unresolved_after_extra", "dispatch_warnings",
                                                              "checked_at", "llm_compressor")}

    def ctrun(name, tag, cfg_fn, spec, ignore):
        def f(s):
            sdir = src(tag, cfg_fn)
            scheme = ct.model_free(sdir, os.path.join(out, name), spec, ignore, s)
            ct.expand(sdir, os.path.join(out, name), scheme, s)
        run(name, f)

    if ct:
        ctrun("ct-fp8-dynamic", "qwen3", qwen3_cfg, "FP8_DYNAMIC", ["lm_head"])
        ctrun("ct-fp8-block", "qwen3-i320", lambda: qwen3_cfg(320), "FP8_BLOCK", ["model.embed_tokens", "lm_head"])
        ctrun("ct-fp8-tensor", "qwen3", qwen3_cfg, None, ["model.embed_tokens", "lm_head"])
        ctrun("ct-fp8-block-qwen3_moe", "qwen3_moe", qwen3_moe_cfg, "FP8_BLOCK",
              ["model.embed_tokens", "lm_head", "re:.*mlp.gate$"])
    run("modelopt-fp8", lambda s: modelopt("modelopt-fp8", src("qwen3", qwen3_cfg), out, s))
    env["sources"] = {t: {"tensors": tensor_list(p), "config": read_json(os.path.join(p, "config.json"))}
                      for t, p in srcs.items()}
    with open(os.path.join(out, "_summary", "_env.json"), "w") as f:
        json.dump(env, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())

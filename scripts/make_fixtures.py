#!/usr/bin/env python3
"""Generate tiny real checkpoints (tests/data/<name>/) with transformers save_pretrained.

Usage: python3 scripts/make_fixtures.py OUTDIR [name ...]
       MAKE_FIXTURES_WIDE=1 python3 scripts/make_fixtures.py OUTDIR qwen3_moe qwen3_5-moe-mm   (the -wide set)

Needs torch and transformers (written against transformers 5.17.0, torch 2.11). Every model is
built on the CPU from a tiny configuration of the real architecture class with torch.manual_seed(0),
cast to bf16 and written with save_pretrained(max_shard_size="128KB"). Tensors that transformers
drops on save but released checkpoints carry (multi-token-prediction layers) are added by hand in
their own shard `model-mtp.safetensors`, listed in the index. Orientation/storage variants
(`*-mtp2d`, `*-hub`) are derived from a written fixture by rewriting only the affected shards.
Multimodal folders get processor_config.json ({"image_processor": ..., "processor_class": ...}); the
processor classes need a tokenizer, so it is written from the image processor's to_dict() (the same
bytes the existing qwen3_5-dense-mm fixture carries).
The run is deterministic: two runs give byte-identical folders.
Beside each folder OUTDIR/<name>.tensors.json lists every tensor: {name: [shard, dtype, shape]}.
With MAKE_FIXTURES_LOG=DIR set, DIR/log.txt records what each family wrote and DIR/defaults.json
the default config of each configuration class used.
"""
import copy
import json
import math
import os
import shutil
import subprocess
import struct
import sys
import tempfile
import traceback

import torch
import transformers

SHARD = "128KB"
MTP_SHARD = "model-mtp.safetensors"

H, I_DENSE, I_MOE, I_SHARED = 64, 80, 48, 112
HEADS, HEAD_DIM, KV, VOCAB, E, TOPK = 4, 16, 2, 256, 4, 2
# MAKE_FIXTURES_WIDE=1: the "-wide" fixtures, whose Linear widths are multiples of 128 (W4A16's group,
# FP8_BLOCK's block) and still tell layouts apart (H 384, I 256, Im 128: 2*Im != H, I != H, Is 640).
WIDE = os.environ.get("MAKE_FIXTURES_WIDE") == "1"
if WIDE:
    H, I_DENSE, I_MOE, I_SHARED = 384, 256, 128, 640
    HEAD_DIM = 64

LOG = []
DEFAULTS = {}


def log(*a):
    s = " ".join(str(x) for x in a)
    print(s, flush=True)
    LOG.append(s)


# ----------------------------------------------------------------------------- configs

def tcls(name):
    c = getattr(transformers, name, None)
    if c is None:
        raise RuntimeError(f"transformers {transformers.__version__} has no class {name}")
    return c


def default_of(cls):
    key = cls.__name__
    if key not in DEFAULTS:
        d = cls()
        try:
            DEFAULTS[key] = json.loads(d.to_json_string(use_diff=False))
        except Exception as e:  # pragma: no cover - diagnostics only
            DEFAULTS[key] = {"error": repr(e)}
        return d
    return cls()


def cfg(cls_name, **kw):
    """Build config cls_name with the kwargs it knows; log the ones it does not."""
    cls = tcls(cls_name)
    d = default_of(cls)
    keep, drop = {}, []
    for k, v in kw.items():
        if hasattr(d, k) or k in ("tie_word_embeddings", "dtype"):
            keep[k] = v
        else:
            drop.append(k)
    if drop:
        log(f"  [{cls_name}] not a config key here, dropped: {drop}")
    c = cls(**keep)
    for k, v in keep.items():
        got = getattr(c, k, None)
        if isinstance(v, transformers.PretrainedConfig if hasattr(transformers, "PretrainedConfig")
                      else transformers.PreTrainedConfig):
            continue
        if got != v and not isinstance(v, dict):
            log(f"  [{cls_name}] {k}: asked {v!r}, config holds {got!r}")
    return c


def text_kw(**over):
    kw = dict(hidden_size=H, intermediate_size=I_DENSE, num_attention_heads=HEADS, head_dim=HEAD_DIM,
              num_key_value_heads=KV, vocab_size=VOCAB, num_hidden_layers=2, tie_word_embeddings=False)
    kw.update(over)
    return kw


def moe_kw(**over):
    kw = dict(moe_intermediate_size=I_MOE, num_experts=E, num_local_experts=E, n_routed_experts=E,
              num_experts_per_tok=TOPK)
    kw.update(over)
    return kw


def rope_with_mrope(cls_name, half_rot):
    """Default rope_parameters of cls_name with mrope_section resized to half the rotary dim."""
    d = default_of(tcls(cls_name))
    rp = copy.deepcopy(getattr(d, "rope_parameters", None) or {})
    if "mrope_section" in rp:
        n = len(rp["mrope_section"])
        base = [half_rot // n] * n
        for i in range(half_rot - sum(base)):
            base[i] += 1
        rp["mrope_section"] = base
    return rp


# ----------------------------------------------------------------------------- files

def st_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def load_tensors(folder):
    from safetensors.torch import load_file
    ix = json.load(open(os.path.join(folder, "model.safetensors.index.json")))
    out = {}
    for shard in sorted(set(ix["weight_map"].values())):
        out.update(load_file(os.path.join(folder, shard)))
    return out, ix


def write_json(path, obj, newline=True):
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=2, sort_keys=True) + ("\n" if newline else ""))


def tensors_json(folder, outpath):
    ix = json.load(open(os.path.join(folder, "model.safetensors.index.json")))
    res = {}
    for shard in sorted(set(ix["weight_map"].values())):
        for k, v in st_header(os.path.join(folder, shard)).items():
            if k == "__metadata__":
                continue
            res[k] = [shard, v["dtype"], v["shape"]]
    assert set(res) == set(ix["weight_map"]), "index and shards disagree"
    for k, v in res.items():
        assert ix["weight_map"][k] == v[0]
    res = dict(sorted(res.items()))
    with open(outpath, "w") as f:
        f.write(json.dumps(res, indent=1))
    return res


def add_shard(folder, shard, tensors, drop=()):
    """Write tensors into shard `shard` and list them in the index (drop: names removed first)."""
    from safetensors.torch import save_file
    ixp = os.path.join(folder, "model.safetensors.index.json")
    ix = json.load(open(ixp))
    wm = ix["weight_map"]
    for k in drop:
        wm.pop(k)
    # a shard rewritten in full: forget what it held
    for k in [k for k, v in wm.items() if v == shard]:
        wm.pop(k)
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    save_file(tensors, os.path.join(folder, shard), metadata={"format": "pt"})
    for k in tensors:
        wm[k] = shard
    tot_b = tot_p = 0
    for s in sorted(set(wm.values())):
        for k, v in st_header(os.path.join(folder, s)).items():
            if k == "__metadata__":
                continue
            n = math.prod(v["shape"])
            tot_p += n
            tot_b += n * {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "U8": 1, "BOOL": 1}[v["dtype"]]
    ix["metadata"]["total_size"] = tot_b
    if "total_parameters" in ix["metadata"]:
        ix["metadata"]["total_parameters"] = tot_p
    ix["weight_map"] = dict(sorted(wm.items()))
    write_json(ixp, ix)
    # remove shards no longer referenced
    for f in os.listdir(folder):
        if f.endswith(".safetensors") and f not in set(wm.values()):
            os.remove(os.path.join(folder, f))


def edit_config(folder, fn):
    p = os.path.join(folder, "config.json")
    c = json.load(open(p))
    fn(c)
    write_json(p, c)


# ----------------------------------------------------------------------------- hand-added tensors

GEN = None


def rnd(shape):
    return (torch.randn(*shape, generator=GEN) * 0.02).to(torch.bfloat16)


def clone_layer(sd, src, dst, experts="asis"):
    """Copy every tensor under prefix src to prefix dst: >=2-D fresh random, 1-D copied (norms,
    biases, correction terms keep their init). experts='split2d' stores fused 3-D experts per
    expert 2-D as released checkpoints do (gate_proj/up_proj [I,H], down_proj [H,I])."""
    out = {}
    for k in sorted(sd):
        if not k.startswith(src):
            continue
        v = sd[k]
        rest = k[len(src):]
        nv = rnd(v.shape) if v.dim() >= 2 else v.clone()
        if experts == "split2d" and v.dim() == 3 and rest.endswith("experts.gate_up_proj"):
            pre = dst + rest[: -len("gate_up_proj")]
            e, a, b = v.shape
            if a == 2 * I_MOE and b == H:        # [E, 2I, H]
                g, u = nv[:, :I_MOE, :], nv[:, I_MOE:, :]
            elif a == H and b == 2 * I_MOE:      # [E, H, 2I]
                g, u = nv[:, :, :I_MOE].transpose(1, 2), nv[:, :, I_MOE:].transpose(1, 2)
            else:
                raise RuntimeError(f"unexpected gate_up shape {list(v.shape)}")
            for i in range(e):
                out[f"{pre}{i}.gate_proj.weight"] = g[i].clone()
                out[f"{pre}{i}.up_proj.weight"] = u[i].clone()
            continue
        if experts == "split2d" and v.dim() == 3 and rest.endswith("experts.down_proj"):
            pre = dst + rest[: -len("down_proj")]
            e, a, b = v.shape
            if (a, b) == (H, I_MOE):
                d = nv
            elif (a, b) == (I_MOE, H):
                d = nv.transpose(1, 2)
            else:
                raise RuntimeError(f"unexpected down shape {list(v.shape)}")
            for i in range(e):
                out[f"{pre}{i}.down_proj.weight"] = d[i].clone()
            continue
        if experts == "split2d" and v.dim() == 3:
            raise RuntimeError(f"don't know how to split {k} {list(v.shape)}")
        out[dst + rest] = nv
    return out


def split_fused(sd, names):
    """Same weights, fused 3-D experts -> per-expert 2-D (for derived variants)."""
    out = {}
    for k in names:
        v = sd[k]
        if v.dim() == 3 and k.endswith("experts.gate_up_proj"):
            pre = k[: -len("gate_up_proj")]
            e, a, b = v.shape
            if (a, b) == (2 * I_MOE, H):
                g, u = v[:, :I_MOE, :], v[:, I_MOE:, :]
            else:
                assert (a, b) == (H, 2 * I_MOE)
                g, u = v[:, :, :I_MOE].transpose(1, 2), v[:, :, I_MOE:].transpose(1, 2)
            for i in range(e):
                out[f"{pre}{i}.gate_proj.weight"] = g[i].clone()
                out[f"{pre}{i}.up_proj.weight"] = u[i].clone()
        elif v.dim() == 3 and k.endswith("experts.down_proj"):
            pre = k[: -len("down_proj")]
            d = v if tuple(v.shape[1:]) == (H, I_MOE) else v.transpose(1, 2)
            for i in range(v.shape[0]):
                out[f"{pre}{i}.down_proj.weight"] = d[i].clone()
        else:
            out[k] = v
    return out


def describe_experts(sd):
    seen = {}
    for k, v in sorted(sd.items()):
        if "expert" in k or "block_sparse_moe" in k or "shared_mlp" in k or "router" in k:
            import re
            kk = re.sub(r"layers\.\d+\.", "layers.N.", k)
            kk = re.sub(r"experts\.\d+\.", "experts.{e}.", kk)
            seen.setdefault(kk, list(v.shape))
    for k, s in seen.items():
        log(f"    expert-ish: {k} {s}")


# ----------------------------------------------------------------------------- processors

def processor_config(folder, ip_names, proc_name, ip_kw):
    ipc = None
    for n in ip_names:
        ipc = getattr(transformers, n, None)
        if ipc is not None:
            break
    if ipc is None:
        log(f"  processor: none of {ip_names} exists; no processor_config.json")
        return
    try:
        ip = ipc(**ip_kw)
    except Exception as e:
        log(f"  processor: {ipc.__name__}(**{ip_kw}) failed: {e!r}; no processor_config.json")
        return
    pc = getattr(transformers, proc_name, None)
    tmp = tempfile.mkdtemp()
    how = None
    if pc is not None:
        for kwargs in ({"image_processor": ip}, {"image_processor": ip, "tokenizer": None},
                       {"image_processor": ip, "tokenizer": None, "video_processor": None}):
            try:
                p = pc(**kwargs)
                p.save_pretrained(tmp)
                src = os.path.join(tmp, "processor_config.json")
                if os.path.exists(src):
                    shutil.copy(src, os.path.join(folder, "processor_config.json"))
                    how = f"{proc_name}({', '.join(kwargs)}).save_pretrained"
                    log(f"  processor: files {sorted(os.listdir(tmp))}")
                    break
            except Exception as e:
                log(f"  processor: {proc_name}({', '.join(kwargs)}) failed: {type(e).__name__}: {str(e)[:200]}")
    if how is None:
        d = {"image_processor": ip.to_dict(), "processor_class": proc_name}
        d["image_processor"].pop("processor_class", None)
        d["image_processor"].pop("_processor_class", None)
        write_json(os.path.join(folder, "processor_config.json"), d, newline=False)
        how = f"hand-written from {ipc.__name__}().to_dict()"
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"  processor: {how}; image_processor_type="
        f"{json.load(open(os.path.join(folder, 'processor_config.json'))).get('image_processor', {}).get('image_processor_type')}")


# ----------------------------------------------------------------------------- build

def fix_pad(c):
    for sub in [c] + [getattr(c, a) for a in ("text_config",) if getattr(c, a, None) is not None]:
        for t in ("pad_token_id", "bos_token_id", "eos_token_id"):
            v = getattr(sub, t, None)
            if isinstance(v, int) and v >= VOCAB:
                log(f"  {type(sub).__name__}.{t}={v} >= vocab; set to None")
                setattr(sub, t, None)


def construct(model_cls, c):
    torch.manual_seed(0)
    m = model_cls(c)
    m.to(torch.bfloat16)
    m.eval()
    return m


def build(out, name, model_name, c, proc=None):
    model_cls = tcls(model_name)
    fix_pad(c)
    m = construct(model_cls, c)
    m2 = construct(model_cls, c)
    s1, s2 = m.state_dict(), m2.state_dict()
    bad = [k for k in s1 if not torch.equal(s1[k], s2[k])]
    if bad:
        log(f"  NON-DETERMINISTIC init (re-initialised, seeded): {bad}")
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for k in bad:
                t = s1[k]
                t.copy_((torch.randn(t.shape, generator=g) * 0.02).to(t.dtype))
    del m2
    nonfinite = [k for k, v in s1.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if nonfinite:
        log(f"  NON-FINITE values after init: {nonfinite}")
    folder = os.path.join(out, name)
    shutil.rmtree(folder, ignore_errors=True)
    m.save_pretrained(folder, max_shard_size=SHARD)
    try:
        with torch.no_grad():
            ids = torch.randint(3, 200, (1, 8), generator=torch.Generator().manual_seed(0))
            o = m(input_ids=ids)
        log(f"  forward(input_ids) ok: logits {list(o.logits.shape)}")
    except Exception as e:
        log(f"  forward(input_ids) FAILED: {type(e).__name__}: {str(e)[:300]}")
    if proc:
        processor_config(folder, *proc)
    # A release ships its tokenizer; save_pretrained of a model writes none (scripts/add_tokenizer.sh).
    subprocess.run([os.path.join(os.path.dirname(os.path.abspath(__file__)), "add_tokenizer.sh"), folder], check=True)
    return m, folder


def summarize(out, name):
    folder = os.path.join(out, name)
    res = tensors_json(folder, os.path.join(out, name + ".tensors.json"))
    c = json.load(open(os.path.join(folder, "config.json")))
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    prefixes = {}
    for k in res:
        root = k.split(".layers.")[0] + ".layers" if ".layers." in k else (
            k.split(".blocks.")[0] + ".blocks" if ".blocks." in k else k.rsplit(".", 1)[0])
        prefixes[root] = prefixes.get(root, 0) + 1
    mts = [c.get("model_type")] + [c[s].get("model_type") for s in ("text_config", "vision_config")
                                   if isinstance(c.get(s), dict)]
    log(f"  => {name}: architectures={c.get('architectures')} model_type={mts} tensors={len(res)} "
        f"shards={len(set(v[0] for v in res.values()))} bytes_on_disk={size}")
    log(f"     prefixes: {prefixes}")
    sd = {k: torch.empty(v[2], device='meta') for k, v in res.items()}
    describe_experts(sd)


# ----------------------------------------------------------------------------- families

def qwen_vision(cls_name, **over):
    kw = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=H,
              patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64,
              in_channels=3)
    kw.update(over)
    return cfg(cls_name, **kw)


QWEN_PROC = (["Qwen2VLImageProcessor", "Qwen2VLImageProcessorFast"], "Qwen3VLProcessor",
             dict(patch_size=16, merge_size=2, temporal_patch_size=2))


def f_simple(model, cfgname, **extra):
    def go(out, name):
        build(out, name, model, cfg(cfgname, **text_kw(**extra)))
    return go


def f_qwen2_moe(out, name):
    c = cfg("Qwen2MoeConfig", **text_kw(**moe_kw(shared_expert_intermediate_size=I_SHARED,
                                                 decoder_sparse_step=1, mlp_only_layers=[])))
    build(out, name, "Qwen2MoeForCausalLM", c)


def f_qwen3_moe(out, name):
    c = cfg("Qwen3MoeConfig", **text_kw(**moe_kw(decoder_sparse_step=1, mlp_only_layers=[])))
    build(out, name, "Qwen3MoeForCausalLM", c)


def f_qwen3_next(out, name):
    lt = ["linear_attention"] * 3 + ["full_attention"]
    c = cfg("Qwen3NextConfig", **text_kw(num_hidden_layers=4, layer_types=lt, full_attention_interval=4,
                                         **moe_kw(shared_expert_intermediate_size=I_SHARED,
                                                  decoder_sparse_step=1, mlp_only_layers=[]),
                                         linear_num_key_heads=2, linear_num_value_heads=8,
                                         linear_key_head_dim=16, linear_value_head_dim=16,
                                         linear_conv_kernel_dim=4))
    m, folder = build(out, name, "Qwen3NextForCausalLM", c)
    add_qwen_mtp(folder, "model.", "model.layers.3.", experts="split2d", cfg_sub=None)


def add_qwen_mtp(folder, text_prefix, full_layer, experts, cfg_sub, expert_override=None):
    global GEN
    GEN = torch.Generator().manual_seed(1234)
    sd, _ = load_tensors(folder)
    if expert_override:
        ep = full_layer + "mlp.experts."
        sd = {k: v for k, v in sd.items() if not k.startswith(ep)}
        sd.update(expert_override)
    t = clone_layer(sd, full_layer, "mtp.layers.0.", experts=experts)
    norm = sd[text_prefix + "norm.weight"]
    t["mtp.fc.weight"] = rnd((H, 2 * H))
    for n in ("mtp.norm.weight", "mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight"):
        t[n] = norm.clone()
    add_shard(folder, MTP_SHARD, t)

    def fn(c):
        tgt = c[cfg_sub] if cfg_sub else c
        if "mtp_num_hidden_layers" not in tgt:
            log(f"  config lacked mtp_num_hidden_layers; set to 1")
        tgt["mtp_num_hidden_layers"] = 1
    edit_config(folder, fn)
    form = "fused 3-D, in-memory layout" if expert_override else experts
    log(f"  MTP added ({form}): {len(t)} tensors in {MTP_SHARD} from template {full_layer}")


def f_qwen3_5_dense(out, name):
    lt = ["linear_attention"] * 3 + ["full_attention"]
    c = cfg("Qwen3_5TextConfig", **text_kw(num_hidden_layers=4, layer_types=lt, full_attention_interval=4,
                                           linear_num_key_heads=2, linear_num_value_heads=16,
                                           linear_key_head_dim=16, linear_value_head_dim=8,
                                           linear_conv_kernel_dim=4))
    m, folder = build(out, name, "Qwen3_5ForCausalLM", c)
    add_qwen_mtp(folder, "model.", "model.layers.3.", experts="asis", cfg_sub=None)


def qwen3_5_moe_cfg():
    lt = ["linear_attention"] * 3 + ["full_attention"]
    txt = cfg("Qwen3_5MoeTextConfig", **text_kw(num_hidden_layers=4, layer_types=lt, full_attention_interval=4,
                                                **moe_kw(shared_expert_intermediate_size=I_SHARED,
                                                         decoder_sparse_step=1, mlp_only_layers=[]),
                                                linear_num_key_heads=2, linear_num_value_heads=16,
                                                linear_key_head_dim=16, linear_value_head_dim=8,
                                                linear_conv_kernel_dim=4,
                                                rope_parameters=rope_with_mrope("Qwen3_5MoeTextConfig", 2)))
    vis = qwen_vision("Qwen3_5MoeVisionConfig")
    return cfg("Qwen3_5MoeConfig", text_config=txt, vision_config=vis, tie_word_embeddings=False)


def f_qwen3_5_moe_mm(out, name):
    m, folder = build(out, name, "Qwen3_5MoeForConditionalGeneration", qwen3_5_moe_cfg(), proc=QWEN_PROC)
    # transformers 5.17 writes the main layers' experts per expert 2-D (it reverts its load-time
    # fusion on save); the base fixture's MTP experts take the fused 3-D form of the in-memory
    # experts module instead, so that both MTP forms are covered (the -mtp2d variant splits them).
    msd = m.state_dict()
    L = "model.language_model.layers."
    mem = {k: v for k, v in msd.items() if k.startswith(L + "3.mlp.experts.")}
    log(f"  in-memory experts of layer 3: {[(k, list(v.shape)) for k, v in mem.items()]}")
    saved, _ = load_tensors(folder)
    gu, dn = msd[L + "0.mlp.experts.gate_up_proj"], msd[L + "0.mlp.experts.down_proj"]
    ok = all(torch.equal(saved[f"{L}0.mlp.experts.{e}.gate_proj.weight"], gu[e, :I_MOE]) and
             torch.equal(saved[f"{L}0.mlp.experts.{e}.up_proj.weight"], gu[e, I_MOE:]) and
             torch.equal(saved[f"{L}0.mlp.experts.{e}.down_proj.weight"], dn[e]) for e in range(E))
    log(f"  saved per-expert == in-memory fused split (gate=gate_up[e,:I], up=gate_up[e,I:], down=down[e]): {ok}")
    add_qwen_mtp(folder, "model.language_model.", L + "3.", experts="asis",
                 cfg_sub="text_config", expert_override=mem)
    # variant: same weights, MTP experts per expert 2-D
    v = name + "-mtp2d"
    summarize(out, name)
    vf = os.path.join(out, v)
    shutil.rmtree(vf, ignore_errors=True)
    shutil.copytree(folder, vf)
    sd, ix = load_tensors(vf)
    mtp_names = [k for k, s in ix["weight_map"].items() if s == MTP_SHARD]
    fused = [k for k in mtp_names if sd[k].dim() == 3]
    if not fused:
        log(f"  {v}: transformers already stores experts per expert; variant would be identical, removed")
        shutil.rmtree(vf)
        return "skip-summary"
    add_shard(vf, MTP_SHARD, split_fused(sd, mtp_names))
    log(f"  {v}: MTP shard rewritten per-expert 2-D from {fused}")
    summarize(out, v)
    return "skip-summary"


def f_qwen3_vl(out, name):
    txt = cfg("Qwen3VLTextConfig", **text_kw(rope_parameters=rope_with_mrope("Qwen3VLTextConfig", HEAD_DIM // 2)))
    vis = qwen_vision("Qwen3VLVisionConfig", deepstack_visual_indexes=[0])
    c = cfg("Qwen3VLConfig", text_config=txt, vision_config=vis, tie_word_embeddings=False)
    build(out, name, "Qwen3VLForConditionalGeneration", c, proc=QWEN_PROC)


def f_qwen3_vl_moe(out, name):
    txt = cfg("Qwen3VLMoeTextConfig", **text_kw(**moe_kw(decoder_sparse_step=1, mlp_only_layers=[]),
                                               rope_parameters=rope_with_mrope("Qwen3VLMoeTextConfig", HEAD_DIM // 2)))
    vis = qwen_vision("Qwen3VLMoeVisionConfig", deepstack_visual_indexes=[0])
    c = cfg("Qwen3VLMoeConfig", text_config=txt, vision_config=vis, tie_word_embeddings=False)
    m, folder = build(out, name, "Qwen3VLMoeForConditionalGeneration", c, proc=QWEN_PROC)
    summarize(out, name)
    v = name + "-hub"
    vf = os.path.join(out, v)
    shutil.rmtree(vf, ignore_errors=True)
    shutil.copytree(folder, vf)
    sd, ix = load_tensors(vf)
    from safetensors.torch import save_file, load_file
    ex = [k for k in sd if sd[k].dim() == 3 and (k.endswith("experts.gate_up_proj") or k.endswith("experts.down_proj"))]
    if not ex:
        log(f"  {v}: no fused 3-D experts written; variant removed")
        shutil.rmtree(vf)
        return "skip-summary"
    gu = [k for k in ex if k.endswith("gate_up_proj")][0]
    dn = [k for k in ex if k.endswith("down_proj")][0]
    log(f"  transformers wrote {gu} {list(sd[gu].shape)}, {dn} {list(sd[dn].shape)}")
    if tuple(sd[gu].shape[1:]) == (H, 2 * I_MOE):
        log(f"  {v}: transformers already writes the hub orientation [E,H,2I]/[E,I,H]; variant removed")
        shutil.rmtree(vf)
        return "skip-summary"
    for shard in sorted(set(ix["weight_map"][k] for k in ex)):
        p = os.path.join(vf, shard)
        t = load_file(p)
        for k in t:
            if k in ex:
                t[k] = t[k].transpose(1, 2).contiguous()
        save_file(t, p, metadata={"format": "pt"})
    log(f"  {v}: transposed last two dims of {len(ex)} expert tensors")
    summarize(out, v)
    return "skip-summary"


def siglip(**over):
    kw = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
              image_size=64, patch_size=8, num_channels=3)
    kw.update(over)
    c = cfg("SiglipVisionConfig", **kw)
    # released Gemma-3 vision configs say "vision_use_head": false (no pooling head); 5.17's
    # SiglipVisionConfig has no such field but the vision model reads the attribute if present
    try:
        c.vision_use_head = False
    except Exception as e:
        log(f"  SiglipVisionConfig.vision_use_head could not be set: {e!r}")
    return c


def gemma3_text_kw():
    return text_kw(num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"],
                   sliding_window=64, sliding_window_pattern=2, query_pre_attn_scalar=HEAD_DIM)


def f_gemma3(out, name):
    build(out, name, "Gemma3ForCausalLM", cfg("Gemma3TextConfig", **gemma3_text_kw()))


def f_gemma3_mm(out, name):
    txt = cfg("Gemma3TextConfig", **gemma3_text_kw())
    c = cfg("Gemma3Config", text_config=txt, vision_config=siglip(), mm_tokens_per_image=16,
            tie_word_embeddings=False)
    proc = (["Gemma3ImageProcessor", "Gemma3ImageProcessorFast"], "Gemma3Processor",
            dict(size={"height": 64, "width": 64}))
    build(out, name, "Gemma3ForConditionalGeneration", c, proc=proc)


def mla_kw(**over):
    kw = text_kw(num_key_value_heads=HEADS, **moe_kw(n_shared_experts=1, first_k_dense_replace=1,
                                                     n_group=1, topk_group=1, moe_layer_freq=1),
                 kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=16, v_head_dim=16)
    kw.pop("head_dim")
    kw.update(over)
    return kw


def add_nextn(folder, n_layers, template, experts="split2d"):
    """DeepSeek-V3 / GLM-4.5 style MTP: an extra decoder layer model.layers.{N}.* ."""
    global GEN
    GEN = torch.Generator().manual_seed(1234)
    sd, _ = load_tensors(folder)
    dst = f"model.layers.{n_layers}."
    t = clone_layer(sd, template, dst, experts=experts)
    norm = sd["model.norm.weight"]
    t[dst + "enorm.weight"] = norm.clone()
    t[dst + "hnorm.weight"] = norm.clone()
    t[dst + "eh_proj.weight"] = rnd((H, 2 * H))
    t[dst + "shared_head.norm.weight"] = norm.clone()
    t[dst + "shared_head.head.weight"] = rnd((VOCAB, H))
    t[dst + "embed_tokens.weight"] = rnd((VOCAB, H))
    add_shard(folder, MTP_SHARD, t)

    def fn(c):
        if "num_nextn_predict_layers" not in c:
            log("  config lacked num_nextn_predict_layers; set to 1")
        else:
            log(f"  config had num_nextn_predict_layers={c['num_nextn_predict_layers']}; set to 1")
        c["num_nextn_predict_layers"] = 1
    edit_config(folder, fn)
    log(f"  MTP layer {dst}* added ({experts}): {len(t)} tensors in {MTP_SHARD} from template {template}")


def f_deepseek_v2(out, name):
    c = cfg("DeepseekV2Config", **mla_kw(q_lora_rank=None, topk_method="greedy"))
    build(out, name, "DeepseekV2ForCausalLM", c)


def f_deepseek_v3(out, name):
    c = cfg("DeepseekV3Config", **mla_kw(q_lora_rank=32))
    m, folder = build(out, name, "DeepseekV3ForCausalLM", c)
    add_nextn(folder, 2, "model.layers.1.")


def f_glm4_moe(out, name):
    c = cfg("Glm4MoeConfig", **text_kw(**moe_kw(n_shared_experts=1, first_k_dense_replace=1, n_group=1,
                                                topk_group=1), partial_rotary_factor=0.5))
    m, folder = build(out, name, "Glm4MoeForCausalLM", c)
    add_nextn(folder, 2, "model.layers.1.")


def f_llama4(out, name):
    txt = cfg("Llama4TextConfig", **text_kw(intermediate_size=I_MOE, intermediate_size_mlp=I_DENSE,
                                            num_local_experts=E, num_experts_per_tok=TOPK,
                                            interleave_moe_layer_step=2))
    vis = cfg("Llama4VisionConfig", hidden_size=32, intermediate_size=128, num_hidden_layers=1,
              num_attention_heads=2, image_size=64, patch_size=16, vision_output_dim=64,
              projector_input_dim=64, projector_output_dim=64, pixel_shuffle_ratio=0.5)
    c = cfg("Llama4Config", text_config=txt, vision_config=vis, tie_word_embeddings=False)
    proc = (["Llama4ImageProcessor", "Llama4ImageProcessorFast"], "Llama4Processor",
            dict(size={"height": 64, "width": 64}))
    build(out, name, "Llama4ForConditionalGeneration", c, proc=proc)


def f_gpt_oss(out, name):
    c = cfg("GptOssConfig", **text_kw(intermediate_size=I_MOE, num_local_experts=E, num_experts_per_tok=TOPK,
                                      sliding_window=64))
    build(out, name, "GptOssForCausalLM", c)


def f_granite(out, name):
    common = text_kw(intermediate_size=I_MOE, shared_intermediate_size=I_SHARED, num_local_experts=E,
                     num_experts_per_tok=TOPK, mamba_n_heads=16, mamba_d_head=8, mamba_n_groups=1,
                     mamba_d_state=16, mamba_expand=2, mamba_d_conv=4, mamba_chunk_size=64)
    c, err = None, []
    # 5.17 validates layer_types against its generic names; try the legacy spelling first
    for lt in (dict(layers_block_type=["mamba", "attention"]),
               dict(layer_types=["linear_attention", "full_attention"])):
        try:
            c = cfg("GraniteMoeHybridConfig", **common, **lt)
            log(f"  layer pattern given as {lt}; config holds layer_types={getattr(c, 'layer_types', None)} "
                f"layers_block_type={getattr(c, 'layers_block_type', None)}")
            break
        except Exception as e:
            err.append(f"{lt}: {type(e).__name__}: {str(e)[:200]}")
            log(f"  layer pattern {lt} refused: {err[-1]}")
    if c is None:
        raise RuntimeError("; ".join(err))
    build(out, name, "GraniteMoeHybridForCausalLM", c)


def f_mistral3(out, name):
    txt = cfg("MistralConfig", **text_kw())
    vis = cfg("PixtralVisionConfig", hidden_size=32, intermediate_size=64, num_hidden_layers=1,
              num_attention_heads=2, head_dim=16, image_size=64, patch_size=16)
    c = cfg("Mistral3Config", text_config=txt, vision_config=vis, spatial_merge_size=2,
            tie_word_embeddings=False)
    proc = (["PixtralImageProcessor", "PixtralImageProcessorFast"], "PixtralProcessor",
            dict(patch_size=16, size={"longest_edge": 64}))
    build(out, name, "Mistral3ForConditionalGeneration", c, proc=proc)


FAMILIES = {
    "mistral": f_simple("MistralForCausalLM", "MistralConfig"),
    "mixtral": f_simple("MixtralForCausalLM", "MixtralConfig", intermediate_size=I_MOE,
                        num_local_experts=E, num_experts_per_tok=TOPK),
    "qwen2": f_simple("Qwen2ForCausalLM", "Qwen2Config"),
    "qwen2_moe": f_qwen2_moe,
    "qwen3": f_simple("Qwen3ForCausalLM", "Qwen3Config"),
    "qwen3_moe": f_qwen3_moe,
    "qwen3_next": f_qwen3_next,
    "qwen3_5-dense": f_qwen3_5_dense,
    "qwen3_5-moe-mm": f_qwen3_5_moe_mm,
    "qwen3_vl": f_qwen3_vl,
    "qwen3_vl_moe": f_qwen3_vl_moe,
    "gemma3-mm": f_gemma3_mm,
    "gemma3": f_gemma3,
    "deepseek_v2": f_deepseek_v2,
    "deepseek_v3": f_deepseek_v3,
    "glm4_moe": f_glm4_moe,
    "llama4-mm": f_llama4,
    "gpt_oss": f_gpt_oss,
    "phi3": f_simple("Phi3ForCausalLM", "Phi3Config"),
    "granitemoehybrid": f_granite,
    "mistral3-mm": f_mistral3,
}


# ----------------------------------------------------------------------------- generic families
#
# Families the hand-written builders above do not cover are built generically from the config class
# of their model_type: every size key the class knows is set to a small, layout-telling value (H 64,
# dense I 80, expert I 48, shared I 112, 4 heads of 24 so heads*head_dim = 96 != H), sub-configs
# (text/vision/audio) are built the same way, and the model class is the one transformers' auto
# mappings name for the type. `MAKE_FIXTURES_GENERIC=substr,substr` builds every model_type whose
# name contains one of the substrings (discovery); GENERIC below is the list the fixtures came from.

G_HEAD = 24
G_TEXT = dict(hidden_size=H, intermediate_size=I_DENSE, num_attention_heads=HEADS, head_dim=G_HEAD,
              num_key_value_heads=KV, vocab_size=VOCAB, num_hidden_layers=2, tie_word_embeddings=False,
              moe_intermediate_size=I_MOE, expert_intermediate_size=I_MOE, num_experts=E,
              num_local_experts=E, n_routed_experts=E, num_experts_per_tok=TOPK, moe_topk=TOPK, n_group=1,
              topk_group=1, first_k_dense_replace=1, n_shared_experts=1, num_shared_experts=1,
              shared_expert_intermediate_size=I_SHARED, moe_shared_expert_intermediate_size=I_SHARED,
              decoder_sparse_step=1, mlp_only_layers=[], moe_layer_freq=1,
              q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=24,
              index_n_heads=2, index_head_dim=32, index_topk=4,
              linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
              linear_value_head_dim=16, linear_conv_kernel_dim=4, sliding_window=64,
              num_kv_heads=KV, n_embd=H, n_head=HEADS, n_layer=2, n_inner=I_DENSE, ffn_hidden_size=I_DENSE,
              max_position_embeddings=512, num_nextn_predict_layers=0, mtp_num_hidden_layers=0)
G_VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, depth=1, num_attention_heads=2,
                num_heads=2, image_size=64, patch_size=16, out_hidden_size=H, num_channels=3,
                spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16)


def _default_dict(cls):
    default_of(cls)
    return DEFAULTS.get(cls.__name__, {})


def generic_cfg(cls, kind, over, depth=0):
    d = _default_dict(cls)
    base = dict(G_VISION if kind in ("vision", "audio") else G_TEXT)
    base.update(over.get(kind, {}))
    kw = {k: v for k, v in base.items() if k in d}
    inst = cls()
    for sub, subcls in (getattr(cls, "sub_configs", None) or {}).items():
        cur = getattr(inst, sub, None)
        if cur is None or not hasattr(cur, "to_dict"):
            continue
        skind = "vision" if "vision" in sub else ("audio" if "audio" in sub else "text")
        kw[sub] = generic_cfg(type(cur), skind, over, depth + 1)
    kw.update(over.get("top" if depth == 0 else "__", {}))
    if depth == 0 and "tie_word_embeddings" not in kw:
        kw["tie_word_embeddings"] = False
    return cls(**kw)


def f_generic(model_type, **over):
    def go(out, name):
        from transformers import CONFIG_MAPPING
        from transformers.models.auto import modeling_auto as ma
        cls = CONFIG_MAPPING[model_type]
        c = generic_cfg(cls, "text", over)
        names = None
        for mp in ("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES",
                   "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "MODEL_FOR_VISION_2_SEQ_MAPPING_NAMES"):
            names = getattr(ma, mp, {}).get(model_type)
            if names:
                break
        if over.get("model"):
            names = over["model"]
        if not names:
            raise RuntimeError(f"no generation class for {model_type}")
        if isinstance(names, (list, tuple)):
            names = names[0]
        log(f"  generic {model_type}: config {cls.__name__}, model {names}")
        proc = None
        if getattr(c, "vision_config", None) is not None:
            from transformers.models.auto import image_processing_auto as ia, processing_auto as pa
            ips = ia.IMAGE_PROCESSOR_MAPPING_NAMES.get(model_type)
            ips = [x for x in (ips if isinstance(ips, (list, tuple)) else [ips]) if x]
            if isinstance(ips, list) and ips and isinstance(ips[0], dict):
                ips = list(ips[0].values())
            pname = pa.PROCESSOR_MAPPING_NAMES.get(model_type) or "AutoProcessor"
            proc = (ips, pname, over.get("image_processor", {}))
            log(f"  processor candidates: {ips} / {pname}")
        build(out, name, names, c, proc=proc)
        if over.get("after"):
            over["after"](os.path.join(out, name))
    return go


MM_SMALL = dict(image_processor=dict(size={"height": 64, "width": 64}))
# The generically built fixtures in tests/data (name -> model_type and overrides). The first build swept
# every model_type matching MAKE_FIXTURES_GENERIC; these are the ones kept (small, loadable, distinct).
GENERIC = {n: f_generic(n) for n in (
    "afmoe apertus cohere2 cohere2_moe deepseek_v32 deepseek_v4 dots1 ernie4_5 ernie4_5_moe exaone4 exaone_moe "
    "falcon falcon_h1 flex_olmo glm4 glm4_moe_lite glm_moe_dsa gpt_bigcode gpt_neox granitemoeshared "
    "hunyuan_v1_dense hunyuan_v1_moe jamba kimi_linear lfm2 mimo_v2_flash minimax minimax_m2 "
    "minimax_m3_vl_text nemotron_h olmo3 olmo_hybrid olmoe phi phimoe seed_oss stablelm starcoder2 "
    "hy_v3 laguna mistral4 smollm3 minicpm3 youtu zaya solar_open granitemoe_swa").split()}
GENERIC.update({n: f_generic(n, **MM_SMALL) for n in (
    "gemma4_unified glm4v_moe hunyuan_vl idefics3 kimi_k25 lfm2_vl llava llava_onevision smolvlm qwen4_exp").split()})
# Not kept: inkling_mm_model and muse_glimmer (their construction did not finish within minutes at these
# sizes), zaya (its config validator refuses the generic sizes), kimi_linear (9 MB) and minimax_m3_vl_text.
# Families whose defaults need more than the generic sizes.
GENERIC["step3p7"] = f_generic("step3p7", text=dict(mlp_layer_types=["dense", "sparse"], share_expert_dim=I_SHARED,
                                                     layer_types=["full_attention", "full_attention"]),
                               **MM_SMALL)
GENERIC["longcat_flash"] = f_generic("longcat_flash", text=dict(
    num_layers=1, num_hidden_layers=2, zero_expert_num=2, expert_ffn_hidden_size=I_MOE, ffn_hidden_size=I_DENSE,
    moe_topk=TOPK, qk_head_dim=24, vocab_size=VOCAB))
GENERIC["lfm2_moe"] = f_generic("lfm2_moe", text=dict(layer_types=["conv", "full_attention"], num_dense_layers=1))


def discover(substrs):
    from transformers import CONFIG_MAPPING
    types = sorted(CONFIG_MAPPING.keys())
    log("model types: " + " ".join(types))
    return {t: f_generic(t) for t in types if any(s in t for s in substrs)}


def main():
    out = sys.argv[1]
    only = sys.argv[2:]
    os.makedirs(out, exist_ok=True)
    log(f"transformers {transformers.__version__} torch {torch.__version__}")
    torch.use_deterministic_algorithms(True, warn_only=True)
    failed = []
    fams = dict(FAMILIES)
    fams.update(GENERIC)
    if os.environ.get("MAKE_FIXTURES_GENERIC"):
        fams = discover(os.environ["MAKE_FIXTURES_GENERIC"].split(","))
    for name, fn in fams.items():
        if only and name not in only:
            continue
        if WIDE:
            name += "-wide"
        log(f"== {name}")
        try:
            r = fn(out, name)
            if r != "skip-summary":
                summarize(out, name)
        except Exception as e:
            failed.append(name)
            log(f"  FAILED {name}: {type(e).__name__}: {e}")
            log("  " + traceback.format_exc().replace("\n", "\n  "))
            shutil.rmtree(os.path.join(out, name), ignore_errors=True)
    log(f"failed: {failed}")
    logdir = os.environ.get("MAKE_FIXTURES_LOG")
    if logdir:
        os.makedirs(logdir, exist_ok=True)
        with open(os.path.join(logdir, "log.txt"), "w") as f:
            f.write("\n".join(LOG) + "\n")
        with open(os.path.join(logdir, "defaults.json"), "w") as f:
            f.write(json.dumps(DEFAULTS, indent=1, sort_keys=True, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Loads fp4forge's NVFP4A16 output of each fixture, dequantized, into the transformers class its config
names, and compares its logits with the bf16 source's, against a control that perturbs the same weights
with Gaussian noise of the same relative error (per tensor). Rerunnable on any machine with torch and
transformers (the device machine); fp4forge itself is not needed there.

  python3 scripts/check_logits.py SRC_ROOT QUANT_ROOT OUT.json [name ...]

SRC_ROOT/<name> is the bf16 fixture, QUANT_ROOT/<name> its `fp4forge quantize` output. For each fixture
the quantized checkpoint is dequantized (W = E2M1(code) * scale / global_scale, docs/registry.md §6 and
docs/cli/quantize.md) into plain `.weight` tensors under the output's own names (per-expert modules stay
per expert, as vLLM loads them), written beside a copy of the config without quantization_config, and
loaded with from_pretrained(output_loading_info=True): missing and unexpected keys are reported.
"""
import json
import os
import shutil
import sys
import tempfile

import torch
import transformers
from safetensors.torch import load_file, save_file

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def dequant(packed, scale, gs):
    n, half = packed.shape
    p = packed.to(torch.int64)
    codes = torch.stack([p & 0xF, p >> 4], dim=-1).reshape(n, half * 2)
    vals = E2M1[codes]
    s = scale.to(torch.float32).repeat_interleave(16, dim=1)
    return (vals * (s / gs.to(torch.float32))).to(torch.bfloat16)


def load_dir(d):
    sd = {}
    for f in sorted(os.listdir(d)):
        if f.endswith(".safetensors"):
            sd.update(load_file(os.path.join(d, f)))
    return sd


def dequantized_dir(qdir, out):
    sd = load_dir(qdir)
    res = {}
    for k, v in sd.items():
        if k.endswith(".weight_packed"):
            m = k[: -len(".weight_packed")]
            res[m + ".weight"] = dequant(v, sd[m + ".weight_scale"], sd[m + ".weight_global_scale"])
        elif k.endswith((".weight_scale", ".weight_global_scale", ".input_global_scale")):
            continue
        else:
            res[k] = v
    os.makedirs(out, exist_ok=True)
    save_file({k: v.contiguous() for k, v in res.items()}, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    cfg = json.load(open(os.path.join(qdir, "config.json")))
    cfg.pop("quantization_config", None)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
    for f in os.listdir(qdir):
        if f.endswith(".json") and f not in ("config.json",) and "index" not in f:
            shutil.copy(os.path.join(qdir, f), out)
    return res


def refuse_experts(model, deq, missing):
    """transformers 5.17 keeps some families' experts fused ([E, 2I, H] or [E, H, 2I]) and cannot read the
    per-expert modules vLLM loads. For the logits comparison only, re-fuse the dequantized per-expert parts
    into the model's own parameter, in the orientation its shape has. Returns the parameters filled."""
    params = dict(model.named_parameters())
    filled = []
    for k in missing:
        if k not in params:
            continue
        p = params[k]
        if k.endswith("experts.gate_up_proj"):
            base, kind = k[: -len("gate_up_proj")], "gate_up"
        elif k.endswith("experts.down_proj"):
            base, kind = k[: -len("down_proj")], "down"
        elif k.endswith("input_linear.weight"):
            base, kind = k[: -len("input_linear.weight")] + "experts.", "gate_up"
        elif k.endswith("output_linear.weight"):
            base, kind = k[: -len("output_linear.weight")] + "experts.", "down"
        else:
            continue
        cands = [base, base.replace("model.language_model.", "language_model.model.", 1)]
        ck = next((c for c in cands if c + "0.down_proj.weight" in deq), None)
        if ck is None:
            continue
        mats = []
        for e in range(p.shape[0]):
            if kind == "gate_up":
                m = torch.cat([deq[f"{ck}{e}.gate_proj.weight"], deq[f"{ck}{e}.up_proj.weight"]], 0)  # [2I, H]
            else:
                m = deq[f"{ck}{e}.down_proj.weight"]  # [H, I]
            mats.append(m if tuple(m.shape) == tuple(p.shape[1:]) else m.t())
        with torch.no_grad():
            p.copy_(torch.stack(mats).to(p.dtype))
        filled.append(k)
    return filled


def model_class(cfg):
    arch = cfg["architectures"][0]
    return getattr(transformers, arch)


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits.float()


def rel(a, b):
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def main():
    src_root, q_root, out_json = sys.argv[1:4]
    names = sys.argv[4:] or sorted(n for n in os.listdir(q_root) if os.path.isdir(os.path.join(q_root, n)))
    torch.manual_seed(0)
    results = {}
    for name in names:
        src, qd = os.path.join(src_root, name), os.path.join(q_root, name)
        r = {}
        try:
            cfg = json.load(open(os.path.join(src, "config.json")))
            cls = model_class(cfg)
            base, binfo = cls.from_pretrained(src, dtype=torch.bfloat16, output_loading_info=True)
            base.eval()
            # Keys the source itself leaves unread (e.g. DeepSeek/GLM MTP layers, which transformers drops).
            src_unexpected = set(binfo.get("unexpected_keys", []))
            vocab = base.get_output_embeddings().weight.shape[0] if base.get_output_embeddings() is not None else 256
            ids = torch.randint(0, min(vocab, 200), (2, 24))
            ref = logits(base, ids)
            tmp = tempfile.mkdtemp()
            deq = dequantized_dir(qd, tmp)
            qm, info = cls.from_pretrained(tmp, dtype=torch.bfloat16, output_loading_info=True)
            qm.eval()
            r["missing_keys"] = sorted(info.get("missing_keys", []))
            r["unexpected_keys"] = sorted(set(info.get("unexpected_keys", [])) - src_unexpected)
            r["source_unexpected_keys"] = len(src_unexpected)
            r["refused_for_logits"] = refuse_experts(qm, deq, r["missing_keys"])
            r["mismatched_keys"] = [list(map(str, x)) for x in info.get("mismatched_keys", [])]
            r["logits_rel_err"] = rel(logits(qm, ids), ref)
            # Control: the source model with every tensor that quantization changed perturbed by Gaussian noise
            # of the same relative error (compared in transformers' own parameter names, so fused and
            # per-expert checkpoints line up).
            ctl = cls.from_pretrained(src, dtype=torch.bfloat16).eval()
            bsd, qsd, csd = base.state_dict(), qm.state_dict(), ctl.state_dict()
            changed = 0
            with torch.no_grad():
                for k, b in bsd.items():
                    if k not in qsd or qsd[k].shape != b.shape:
                        continue
                    w = b.float()
                    d = qsd[k].float() - w
                    if d.abs().max() == 0:
                        continue
                    e = float(d.norm() / w.norm().clamp_min(1e-30))
                    noise = torch.randn_like(w) * (e * float(w.norm()) / (w.numel() ** 0.5))
                    csd[k].copy_((w + noise).to(b.dtype))
                    changed += 1
            r["changed_tensors"] = changed
            r["control_logits_rel_err"] = rel(logits(ctl, ids), ref)
            r["ok"] = not r["missing_keys"] and not r["unexpected_keys"]
            # The per-expert layout transformers cannot read for this class (vLLM's layout, kept on purpose).
            r["per_expert_unreadable_by_transformers"] = bool(r["refused_for_logits"])
            shutil.rmtree(tmp, ignore_errors=True)
        except Exception as ex:  # noqa: BLE001 - record, go on with the next fixture
            r["error"] = f"{type(ex).__name__}: {str(ex)[:400]}"
            r["ok"] = False
        results[name] = r
        print(name, json.dumps(r)[:600], flush=True)
    json.dump(results, open(out_json, "w"), indent=1, sort_keys=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""NVFP4A16 golden vectors for llm-compressor's searched weight observers (nvfp4_expanded_mse,
memoryless_mse), computed by upstream's own code: schemes_golden.py's extraction (beside this file)
(compressed-tensors functions exec'd unmodified, pydantic stand-ins) plus llm-compressor's
observers/mse_quant.py (_grid_search_mse, _grid_search_eager, _calculate_error) extracted unmodified,
and compressed-tensors' fake_quantize, which the search calls.

    python3 observers_golden.py CT_SRC LC_SRC OUT [--observer nvfp4_expanded_mse] [--schemes NVFP4A16,W4A16]
                                [--devices cpu,cuda]

CT_SRC: src/compressed_tensors at ac8e2ba8; LC_SRC: src/llmcompressor at ab1ba3e (both pure Python;
torch needed, pydantic not). GOLDEN_SEED picks the inputs. Output: OUT/NVFP4A16.json in the
harness's format (saved tensors per case, CPU and CUDA), with "observer" recorded at the top.
What is rewritten here (the rest is upstream): the observer's constructor defaults (mse.py:
MemorylessMSEObserver defaults maxshrink 0.20, patience 5, grid 100, norm 2.4, chunk_size 5, expand 1.0;
NVFP4ExpandedMSEObserver overrides expand 1.8, maxshrink 1-0.8/1.8, grid 200, patience 1000) and
Observer.forward's call of update_statistics_from_observed; active_session().state.enable_compile is
False (model_free runs eager), so _grid_search_compiled is never reached."""
import copy, json, os, sys, typing

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import schemes_golden as G  # noqa: E402

OBSERVER = "nvfp4_expanded_mse"

G.AFTER_MODELS = [(rel, names + (["fake_quantize"] if rel == "quantization/lifecycle/forward.py" else []))
                  for rel, names in G.AFTER_MODELS]
G.LC_EXTRACT = G.LC_EXTRACT + [("observers/mse_quant.py", ["_grid_search_mse", "_grid_search_eager",
                                                            "_calculate_error"])]


def _model_copy(self, update=None, deep=False):  # pydantic BaseModel.model_copy: no validation
    new = copy.copy(self)
    new.__dict__ = copy.deepcopy(self.__dict__) if deep else dict(self.__dict__)
    for k, v in (update or {}).items():
        new.__dict__[k] = v
    return new


G.PydLite.model_copy = _model_copy

_base_namespace = G.base_namespace


def _ns(torch_mod, logger, report):
    NS = _base_namespace(torch_mod, logger, report)

    class _State:
        enable_compile = False

    class _Session:
        state = _State

    def _compiled(*_a, **_k):
        raise RuntimeError("compiled grid search is not what model_free runs")

    NS.update(active_session=lambda: _Session, _grid_search_compiled=_compiled, MinMaxTuple=tuple,
              Tuple=typing.Tuple)
    return NS


G.base_namespace = _ns

_validate = G.lc_validate_scheme


def _validate_scheme(NS, scheme):
    scheme.weights.__dict__["observer"] = OBSERVER
    return _validate(NS, scheme)


G.lc_validate_scheme = _validate_scheme

_weight_observer = G.lc_weight_observer


def _weight_observer_mse(args):
    if args.observer in ("nvfp4_expanded_mse", "memoryless_mse"):
        return args.observer
    return _weight_observer(args)


G.lc_weight_observer = _weight_observer_mse
_observe = G.lc_observe


def _observe_mse(NS, module, args):
    obs = G.lc_weight_observer(args)
    if obs not in ("nvfp4_expanded_mse", "memoryless_mse"):
        return _observe(NS, module, args)
    kw = args.observer_kwargs or {}
    # MemorylessMSEObserver.__init__
    maxshrink = kw.get("maxshrink", 0.20); patience = kw.get("patience", 5); grid = kw.get("grid", 100.0)
    norm = kw.get("norm", 2.4); chunk_size = kw.get("chunk_size", 5); expand = kw.get("expand", 1.0)
    if obs == "nvfp4_expanded_mse":  # NVFP4ExpandedMSEObserver.__init__
        expand = kw.get("expand", 1.8); maxshrink = kw.get("maxshrink", 1 - 0.8 / 1.8)
        grid = kw.get("grid", 200.0); patience = kw.get("patience", 1000)
    token_args = args.model_copy(update={"strategy": NS["QuantizationStrategy"].TOKEN})
    observed = G.lc_flatten_weight(NS, module.weight, args)
    mn, mx = NS["_grid_search_mse"](observed, args, token_args, maxshrink, patience, grid, norm, chunk_size, expand)
    return {"min_vals": mn, "max_vals": mx}


G.lc_observe = _observe_mse
G.nvfp4_control = lambda T, case, runs: "skipped: searched observer (min-max recipe does not apply)"


def main(argv):
    global OBSERVER
    schemes = "NVFP4A16"
    if "--observer" in argv:
        i = argv.index("--observer"); OBSERVER = argv[i + 1]; del argv[i:i + 2]
    if "--schemes" in argv:  # any preset the schemes harness runs (W4A16, MXFP4A16, FP8_DYNAMIC, FP8_BLOCK)
        i = argv.index("--schemes"); schemes = argv[i + 1]; del argv[i:i + 2]
    ct, lc, out = argv[0], argv[1], argv[2]
    rest = argv[3:]
    rc = G.main([ct, out, "--schemes", schemes, "--lc", lc] + rest)
    for scheme in schemes.split(","):
        p = os.path.join(out, scheme.strip() + ".json")
        if os.path.exists(p):
            doc = json.load(open(p))
            doc["observer"] = OBSERVER
            json.dump(doc, open(p, "w"), indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Export the Strata test models to ONNX.

Usage (from the repository root, with Debian's Python which has torch):

    /usr/bin/python3 models/export_models.py [--out-dir models] [--dropout P]
    /usr/bin/python3 models/export_models.py --gpt2-124m [--out-dir DIR]

Without --gpt2-124m this writes gpt_tiny.onnx, bert_tiny.onnx, mlp.onnx,
mlp_dynamic_batch.onnx, gpt_tiny_dynamic_batch.onnx,
bert_tiny_dynamic_batch.onnx, mlp_external.onnx(+.data), the eight-layer
gpt_deep.onnx and bert_deep.onnx (+ their *_dynamic_batch.onnx),
vit_tiny.onnx (+ its *_dynamic_batch.onnx) and
manifest.json into --out-dir (default: the directory of this script).

With --gpt2-124m it writes only gpt2_124m.onnx + gpt2_124m.onnx.data (~500 MB,
external data) and gpt2_124m.manifest.json into --out-dir (default: a fresh
temporary directory). Never commit those files.

Export settings for every model: opset 17, TrainingMode.TRAINING,
do_constant_folding=False, static shapes (except the *_dynamic_batch.onnx
files, whose first dim is "batch"),
torch.manual_seed(0) before constructing each model.
"""

import argparse
import collections
import hashlib
import json
import os
import sys
import tempfile

import torch

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
# Make `models.definitions` importable when run as a script from anywhere.
sys.path.insert(0, os.path.dirname(HERE))

from models.definitions import (  # noqa: E402
    GPT, GPT_TINY, GPT_DEEP, GPT2_124M, Bert, BERT_TINY, BERT_DEEP, MLP,
    ViT, VIT_TINY, count_parameters)

import dataclasses  # noqa: E402

OPSET = 17


def export_settings():
    settings = dict(
        opset_version=OPSET,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        export_params=True,
    )
    # PyTorch 2.9 made the dynamo exporter torch.onnx.export's default; the
    # committed models (and their goldens) come from the TorchScript one.
    import inspect
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        settings["dynamo"] = False
    return settings


def _export(model, args, path, input_names, output_names, dynamic_axes=None):
    # torch.onnx.export in TRAINING mode puts the model in train() itself;
    # set it explicitly anyway so Dropout nodes carry training_mode=True.
    model.train()
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=input_names,
                          output_names=output_names, dynamic_axes=dynamic_axes,
                          **export_settings())


def _resave_external(tmp_path, path, size_threshold):
    m = onnx.load(tmp_path)
    location = os.path.basename(path) + ".data"
    data_path = os.path.join(os.path.dirname(path), location)
    if os.path.exists(data_path):
        os.remove(data_path)  # save_model appends to an existing data file
    onnx.save_model(m, path, save_as_external_data=True,
                    all_tensors_to_one_file=True, location=location,
                    size_threshold=size_threshold)
    return data_path


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_DTYPE = {v: k for k, v in onnx.TensorProto.DataType.items()}


def _value_info(vi):
    tt = vi.type.tensor_type
    shape = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            shape.append(d.dim_value)
        elif d.HasField("dim_param"):
            shape.append(d.dim_param)
        else:
            shape.append(None)
    return {"name": vi.name, "dtype": _DTYPE[tt.elem_type].lower(),
            "shape": shape}


def describe(path, model_module, external_data=None):
    """Check the model and build its manifest entry."""
    onnx.checker.check_model(path)  # path form: handles external data
    m = onnx.load(path, load_external_data=False)
    init_names = {i.name for i in m.graph.initializer}
    ops = collections.Counter()

    def walk(graph):
        for n in graph.node:
            key = n.op_type if n.domain in ("", "ai.onnx") else \
                f"{n.domain}.{n.op_type}"
            ops[key] += 1
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for g in a.graphs:
                    walk(g)

    walk(m.graph)
    entry = {
        "inputs": [_value_info(i) for i in m.graph.input
                   if i.name not in init_names],
        "outputs": [_value_info(o) for o in m.graph.output],
        "opset": [{"domain": o.domain or "ai.onnx", "version": o.version}
                  for o in m.opset_import],
        "parameter_count": count_parameters(model_module),
        "initializer_count": len(m.graph.initializer),
        "node_count": sum(ops.values()),
        "op_types": dict(sorted(ops.items())),
        "size_bytes": os.path.getsize(path),
        "sha256": sha256(path),
    }
    if external_data:
        entry["external_data"] = {
            "file": os.path.basename(external_data),
            "size_bytes": os.path.getsize(external_data),
            "sha256": sha256(external_data),
        }
    return entry


# --------------------------------------------------------------------------


def export_gpt(cfg, path, batch, seq, dropout, external=False, dynamic=False):
    torch.manual_seed(0)
    model = GPT(dataclasses.replace(cfg, dropout=dropout))
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g,
                        dtype=torch.long)
    if not external:
        dyn = ({"input_ids": {0: "batch"}, "logits": {0: "batch"}}
               if dynamic else None)
        _export(model, (idx,), path, ["input_ids"], ["logits"], dyn)
        return model, None
    with tempfile.TemporaryDirectory() as td:
        tmp = os.path.join(td, "tmp.onnx")
        _export(model, (idx,), tmp, ["input_ids"], ["logits"])
        data = _resave_external(tmp, path, size_threshold=1024)
    return model, data


def export_bert(path, dropout, dynamic=False, cfg=BERT_TINY):
    torch.manual_seed(0)
    cfg = dataclasses.replace(cfg, dropout=dropout)
    model = Bert(cfg)
    batch, seq = 8, 32
    g = torch.Generator().manual_seed(1)
    input_ids = torch.randint(0, cfg.vocab_size, (batch, seq), generator=g,
                              dtype=torch.long)
    token_type_ids = torch.zeros(batch, seq, dtype=torch.long)
    token_type_ids[:, seq // 2:] = 1
    attention_mask = torch.ones(batch, seq, dtype=torch.long)
    attention_mask[:, seq - 4:] = 0
    names = ["input_ids", "token_type_ids", "attention_mask"]
    dyn = ({n: {0: "batch"} for n in names + ["mlm_logits", "nsp_logits"]}
           if dynamic else None)
    _export(model, (input_ids, token_type_ids, attention_mask), path, names,
            ["mlm_logits", "nsp_logits"], dyn)
    return model


def _mlp(dropout):
    torch.manual_seed(0)
    return MLP(64, 128, 10, dropout=dropout)


def _mlp_input():
    g = torch.Generator().manual_seed(1)
    return torch.randn(32, 64, generator=g)


def export_mlp(path, dropout, dynamic=False):
    model = _mlp(dropout)
    dyn = {"features": {0: "batch"}, "logits": {0: "batch"}} if dynamic else None
    _export(model, (_mlp_input(),), path, ["features"], ["logits"], dyn)
    return model


def export_vit(path, dynamic=False):
    """The tiny ViT (no dropout): 8 images of 3 x 16 x 16, classified from
    the class token."""
    torch.manual_seed(0)
    model = ViT(VIT_TINY)
    g = torch.Generator().manual_seed(1)
    images = torch.randn(8, 3, 16, 16, generator=g)
    dyn = {"images": {0: "batch"}, "logits": {0: "batch"}} if dynamic else None
    _export(model, (images,), path, ["images"], ["logits"], dyn)
    return model


def export_mlp_external(path, dropout):
    model = _mlp(dropout)
    with tempfile.TemporaryDirectory() as td:
        tmp = os.path.join(td, "tmp.onnx")
        _export(model, (_mlp_input(),), tmp, ["features"], ["logits"])
        data = _resave_external(tmp, path, size_threshold=0)
    return model, data


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", default=None,
                    help="output directory (default: models/, or a temp dir "
                         "with --gpt2-124m)")
    ap.add_argument("--dropout", type=float, default=0.0,
                    help="dropout probability for all Dropout modules "
                         "(default 0.0; the modules are present regardless)")
    ap.add_argument("--gpt2-124m", action="store_true",
                    help="export only the GPT-2 124M model (external data, "
                         "~500 MB; never commit it)")
    args = ap.parse_args(argv)

    if args.gpt2_124m:
        out = args.out_dir or tempfile.mkdtemp(prefix="strata_gpt2_124m_")
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, "gpt2_124m.onnx")
        model, data = export_gpt(GPT2_124M, path, batch=1, seq=1024,
                                 dropout=args.dropout, external=True)
        manifest = {"gpt2_124m.onnx": describe(path, model, data)}
        with open(os.path.join(out, "gpt2_124m.manifest.json"), "w") as f:
            json.dump(manifest, f, indent=2, sort_keys=True)
            f.write("\n")
        print(f"wrote {path} (+ {os.path.basename(data)}); "
              f"params={manifest['gpt2_124m.onnx']['parameter_count']}")
        return 0

    out = args.out_dir or HERE
    os.makedirs(out, exist_ok=True)
    manifest = {}

    p = os.path.join(out, "gpt_tiny.onnx")
    m, _ = export_gpt(GPT_TINY, p, batch=8, seq=64, dropout=args.dropout)
    manifest["gpt_tiny.onnx"] = describe(p, m)

    p = os.path.join(out, "bert_tiny.onnx")
    m = export_bert(p, args.dropout)
    manifest["bert_tiny.onnx"] = describe(p, m)

    p = os.path.join(out, "mlp.onnx")
    m = export_mlp(p, args.dropout)
    manifest["mlp.onnx"] = describe(p, m)

    p = os.path.join(out, "mlp_dynamic_batch.onnx")
    m = export_mlp(p, args.dropout, dynamic=True)
    manifest["mlp_dynamic_batch.onnx"] = describe(p, m)

    # Batch-dynamic GPT and BERT: the same weights, for --batch and
    # gradient accumulation at a smaller micro-batch.
    p = os.path.join(out, "gpt_tiny_dynamic_batch.onnx")
    m, _ = export_gpt(GPT_TINY, p, batch=8, seq=64, dropout=args.dropout,
                      dynamic=True)
    manifest["gpt_tiny_dynamic_batch.onnx"] = describe(p, m)

    p = os.path.join(out, "bert_tiny_dynamic_batch.onnx")
    m = export_bert(p, args.dropout, dynamic=True)
    manifest["bert_tiny_dynamic_batch.onnx"] = describe(p, m)

    p = os.path.join(out, "mlp_external.onnx")
    m, data = export_mlp_external(p, args.dropout)
    manifest["mlp_external.onnx"] = describe(p, m, data)

    # Eight-layer GPT and BERT at a small width, for pipeline-stage tests
    # (up to 8 stages), each with its batch-dynamic twin for --accum.
    for dynamic in (False, True):
        suffix = "_dynamic_batch" if dynamic else ""
        name = f"gpt_deep{suffix}.onnx"
        p = os.path.join(out, name)
        m, _ = export_gpt(GPT_DEEP, p, batch=8, seq=32, dropout=args.dropout,
                          dynamic=dynamic)
        manifest[name] = describe(p, m)
        name = f"bert_deep{suffix}.onnx"
        p = os.path.join(out, name)
        m = export_bert(p, args.dropout, dynamic=dynamic, cfg=BERT_DEEP)
        manifest[name] = describe(p, m)

    # A vision transformer classifying from its class token
    # (strata-sink-gather's case), trained against PyTorch in the tests.
    for dynamic in (False, True):
        name = "vit_tiny_dynamic_batch.onnx" if dynamic else "vit_tiny.onnx"
        p = os.path.join(out, name)
        m = export_vit(p, dynamic=dynamic)
        manifest[name] = describe(p, m)

    manifest_doc = {
        "generator": "models/export_models.py",
        "export_settings": {
            "opset_version": OPSET,
            "training": "TrainingMode.TRAINING",
            "do_constant_folding": False,
            "dropout": args.dropout,
            "torch_version": torch.__version__,
            "onnx_version": onnx.__version__,
        },
        "models": manifest,
    }
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest_doc, f, indent=2, sort_keys=True)
        f.write("\n")

    for name, e in manifest.items():
        size = e["size_bytes"] + e.get("external_data", {}).get("size_bytes", 0)
        print(f"{name:26s} params={e['parameter_count']:>8d} "
              f"nodes={e['node_count']:>4d} bytes={size:>8d} "
              f"sha256={e['sha256'][:16]}")
        if size >= 2 * 1024 * 1024:
            print(f"WARNING: {name} is >= 2 MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

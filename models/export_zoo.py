#!/usr/bin/env python3
"""Export a zoo of torchvision / torch.nn models to ONNX for importer
robustness testing. The output is NOT committed.

Usage (from the repository root):

    /usr/bin/python3 models/export_zoo.py --out-dir /tmp/zoo [--only NAME ...]

Same export settings as export_models.py: opset 17,
TrainingMode.TRAINING, do_constant_folding=False, static shapes, random init
(weights=None; nothing is downloaded), torch.manual_seed(0) per model.

Prints one line per model (name, OK / FAILED (reason), its ONNX op types),
then the union of op types with the number of models using each. Also writes
DIR/zoo_summary.json.
"""

import argparse
import collections
import json
import math
import os
import sys
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

import onnx

OPSET = 17


# --------------------------------------------------------------------------
# Plain torch.nn test modules
# --------------------------------------------------------------------------


class EncoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=64, nhead=4,
                                                batch_first=True)

    def forward(self, x):
        return self.layer(x)


class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(d_model=64, nhead=4,
                                                batch_first=True)

    def forward(self, tgt, memory):
        return self.layer(tgt, memory)


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(embed_dim=64, num_heads=4,
                                         batch_first=True)

    def forward(self, x):
        out, _ = self.mha(x, x, x, need_weights=False)
        return out


class Conv1dNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(4, 16, kernel_size=3, padding=1),
            nn.BatchNorm1d(16),
            nn.ReLU(),
            nn.MaxPool1d(2),
            nn.Flatten(),
            nn.Linear(16 * 16, 10),
        )

    def forward(self, x):
        return self.net(x)


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(input_size=16, hidden_size=32, num_layers=1,
                            batch_first=True)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1])


class ActivationsNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.ln = nn.LayerNorm(32)
        self.body = nn.Sequential(
            nn.Linear(32, 64), nn.SiLU(),
            nn.Linear(64, 64), nn.Softplus(),
            nn.Linear(64, 64), nn.LeakyReLU(0.1),
            nn.Linear(64, 64), nn.Hardswish(),
            nn.Linear(64, 64), nn.ELU(),
            nn.Linear(64, 10),
        )

    def forward(self, ids):
        return self.body(self.ln(self.emb(ids)))


# --------------------------------------------------------------------------


class PositionalEncodingNet(nn.Module):
    """A sinusoidal table computed in forward (Sin/Cos/ScatterND on constants)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(32, 8)

    def forward(self, x):
        t = x.size(1)
        pos = torch.arange(t).float().unsqueeze(1)
        div = torch.exp(torch.arange(0, 32, 2).float() * (-math.log(10000.0) / 32))
        pe = torch.zeros(t, 32)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        return self.lin(x + pe)


class StatsNet(nn.Module):
    """mean / var / rsqrt / F.normalize (ReduceMean, ReduceL2, Clip, Expand)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        y = self.lin(x)
        m = y.mean(dim=-1, keepdim=True)
        v = y.var(dim=-1, keepdim=True, unbiased=False)
        return F.normalize((y - m) * torch.rsqrt(v + 1e-5), dim=-1)


class WithLossNet(nn.Module):
    """A model that ends in its own loss (SoftmaxCrossEntropyLoss)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 4)

    def forward(self, x, y):
        return F.cross_entropy(self.lin(x), y)


def _image():
    return (torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(1)),)


def _tv(name, **kw):
    def build():
        import torchvision.models as tvm
        return getattr(tvm, name)(weights=None, **kw)
    return build


def zoo():
    g = lambda: torch.Generator().manual_seed(1)  # noqa: E731
    entries = [
        ("resnet18", _tv("resnet18"), _image),
        ("mobilenet_v2", _tv("mobilenet_v2"), _image),
        ("mobilenet_v3_small", _tv("mobilenet_v3_small"), _image),
        ("squeezenet1_0", _tv("squeezenet1_0"), _image),
        ("densenet121", _tv("densenet121"), _image),
        ("vgg11", _tv("vgg11"), _image),
        ("alexnet", _tv("alexnet"), _image),
        ("shufflenet_v2_x0_5", _tv("shufflenet_v2_x0_5"), _image),
        ("efficientnet_b0", _tv("efficientnet_b0"), _image),
        ("googlenet", _tv("googlenet", aux_logits=False, init_weights=True),
         _image),
        ("regnet_y_400mf", _tv("regnet_y_400mf"), _image),
    ]
    try:
        import torchvision.models as tvm
        if hasattr(tvm, "convnext_tiny"):
            entries.append(("convnext_tiny", _tv("convnext_tiny"), _image))
    except ImportError:
        pass
    # efficientnet_b0 / convnext_tiny use StochasticDepth, whose training-mode
    # bernoulli_ has no ONNX export in torch 1.13. These variants disable it
    # (StochasticDepth with p=0 is the identity) so the rest of the network
    # is still covered.
    entries.append(("efficientnet_b0_nosd",
                    _tv("efficientnet_b0", stochastic_depth_prob=0.0), _image))
    if any(e[0] == "convnext_tiny" for e in entries):
        entries.append(("convnext_tiny_nosd",
                        _tv("convnext_tiny", stochastic_depth_prob=0.0), _image))
    entries += [
        ("transformer_encoder_layer", EncoderLayer,
         lambda: (torch.randn(2, 16, 64, generator=g()),)),
        ("transformer_decoder_layer", DecoderLayer,
         lambda: (torch.randn(2, 16, 64, generator=g()),
                  torch.randn(2, 16, 64, generator=g()))),
        ("multihead_self_attention", SelfAttention,
         lambda: (torch.randn(2, 16, 64, generator=g()),)),
        ("conv1d_bn_pool", Conv1dNet,
         lambda: (torch.randn(2, 4, 32, generator=g()),)),
        ("lstm", LSTMNet, lambda: (torch.randn(2, 8, 16, generator=g()),)),
        ("embedding_activations", ActivationsNet,
         lambda: (torch.randint(0, 100, (2, 16), generator=g()),)),
        ("groupnorm_prelu_selu_mish", lambda: nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.PReLU(),
            nn.Conv2d(8, 8, 3, stride=2), nn.SELU(), nn.Mish(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 3)),
         lambda: (torch.randn(2, 3, 16, 16, generator=g()),)),
        ("gelu_tanh_mlp", lambda: nn.Sequential(
            nn.Linear(16, 32), nn.GELU(approximate="tanh"), nn.Linear(32, 16),
            nn.Tanh(), nn.Softmax(dim=1)),
         lambda: (torch.randn(4, 16, generator=g()),)),
        ("hardtanh_relu6_silu", lambda: nn.Sequential(
            nn.Linear(8, 8), nn.Hardtanh(), nn.ReLU6(), nn.SiLU(),
            nn.Linear(8, 2), nn.Sigmoid()),
         lambda: (torch.randn(3, 8, generator=g()),)),
        ("bn1d_mlp", lambda: nn.Sequential(
            nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2),
            nn.Linear(16, 2)),
         lambda: (torch.randn(4, 8, generator=g()),)),
        ("positional_encoding", PositionalEncodingNet,
         lambda: (torch.randn(2, 10, 32, generator=g()),)),
        ("stats_normalize", StatsNet,
         lambda: (torch.randn(4, 16, generator=g()),)),
        ("with_loss", WithLossNet,
         lambda: (torch.randn(8, 16, generator=g()),
                  torch.randint(0, 4, (8,), generator=g()))),
        ("transformer_full", lambda: nn.Transformer(
            d_model=32, nhead=4, num_encoder_layers=1, num_decoder_layers=1,
            dim_feedforward=64, batch_first=True),
         lambda: (torch.randn(2, 6, 32, generator=g()),
                  torch.randn(2, 5, 32, generator=g()))),
        # Expected to be reported as unsupported by the importer.
        ("conv_transpose", lambda: nn.ConvTranspose2d(3, 4, 2, stride=2),
         lambda: (torch.randn(1, 3, 8, 8, generator=g()),)),
        ("gru", lambda: nn.GRU(8, 8, batch_first=True),
         lambda: (torch.randn(2, 5, 8, generator=g()),)),
        ("instance_norm_upsample", lambda: nn.Sequential(
            nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(4, affine=True), nn.ReLU(),
            nn.Upsample(scale_factor=2)),
         lambda: (torch.randn(1, 3, 8, 8, generator=g()),)),
    ]
    return entries


def op_types(path):
    m = onnx.load(path, load_external_data=False)
    ops = collections.Counter()

    def walk(graph):
        for n in graph.node:
            ops[n.op_type if n.domain in ("", "ai.onnx")
                else f"{n.domain}.{n.op_type}"] += 1
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for sg in a.graphs:
                    walk(sg)

    walk(m.graph)
    return ops


def export_one(name, build, make_inputs, out_dir):
    torch.manual_seed(0)
    model = build()
    model.train()
    args = make_inputs()
    path = os.path.join(out_dir, name + ".onnx")
    n_in = len(args)
    input_names = ["input"] if n_in == 1 else [f"input{i}" for i in range(n_in)]
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=input_names,
                          output_names=["output"], opset_version=OPSET,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
    onnx.checker.check_model(path)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--only", nargs="*", help="export only these models")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print tracebacks of failures")
    args = ap.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)

    union = collections.Counter()
    summary = {}
    for name, build, make_inputs in zoo():
        if args.only and name not in args.only:
            continue
        try:
            path = export_one(name, build, make_inputs, args.out_dir)
            ops = op_types(path)
            union.update(ops.keys())
            summary[name] = {"status": "OK", "op_types": dict(sorted(ops.items())),
                             "size_bytes": os.path.getsize(path)}
            print(f"{name}: OK ops={sorted(ops)}", flush=True)
        except Exception as e:  # noqa: BLE001 - report and continue
            msg = str(e).strip().splitlines()
            reason = f"{type(e).__name__}: {msg[0] if msg else ''}"[:300]
            summary[name] = {"status": "FAILED", "reason": reason}
            print(f"{name}: FAILED ({reason}) ops=[]", flush=True)
            if args.verbose:
                traceback.print_exc()

    print()
    n_ok = sum(1 for s in summary.values() if s["status"] == "OK")
    print(f"op-type union over {n_ok} exported models "
          f"(op: number of models using it):")
    for op, c in sorted(union.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {op}: {c}")
    with open(os.path.join(args.out_dir, "zoo_summary.json"), "w") as f:
        json.dump({"models": summary, "op_union": dict(sorted(union.items()))},
                  f, indent=2, sort_keys=True)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

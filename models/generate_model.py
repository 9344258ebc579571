#!/usr/bin/env python3
"""GPT- and BERT-shaped ONNX training graphs at any size, written directly
(no PyTorch, no memory for the weights).

    models/generate_model.py gpt --layers 96 --hidden 12288 --heads 96 \\
        --vocab 50257 --seq 2048 --batch 1 -o gpt3.onnx
    models/generate_model.py --preset gpt3-175b -o gpt3.onnx [--weightless]
    models/generate_model.py --list-presets

The graphs are the ones torch.onnx.export writes for models/definitions.py's
GPT and BERT (pre-LN GPT with a causal mask and a tied LM head; post-LN BERT
with a tied MLM head), op for op where it matters to Strata's importer:
Linear as MatMul + Add, GELU as x * (1 + erf(x / sqrt 2)) * 0.5, attention
as softmax(where(mask, q @ k^T * scale, -inf)) @ v, no dropout.

--weightless: every parameter initializer is declared (name, type, shape)
with its data external, in an empty file beside the model (ONNX's checker
wants the file to exist): the model weighs kilobytes at any size. Constant
buffers (the causal mask, shapes) stay real. `strata-compile --no-weights`
compiles it into a plan-only artifact; without --no-weights the compile
stops at the first parameter, naming the empty file. Without --weightless
the parameters hold small random values (for models you can train).
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# name: (kind, layers, hidden, heads, intermediate, vocab, seq)
PRESETS = {
    # The MiCS paper's Table 1 models (sequence 512).
    "bert-10b": ("bert", 127, 2560, 40, 10240, 32008, 512),
    "bert-15b": ("bert", 190, 2560, 40, 10240, 32008, 512),
    "bert-20b": ("bert", 64, 5120, 40, 20480, 32008, 512),
    "bert-50b": ("bert", 62, 8192, 40, 32768, 32008, 512),
    "roberta-20b": ("bert", 62, 5120, 40, 20480, 50265, 512),
    "gpt2-20b": ("gpt", 62, 5120, 40, 20480, 50265, 512),
    # GPT-3 175B (Brown et al. 2020, Table 2.1).
    "gpt3-175b": ("gpt", 96, 12288, 96, 49152, 50257, 2048),
    # Small ones for tests.
    "gpt-small": ("gpt", 12, 64, 4, 256, 256, 64),
}


class Graph:
    def __init__(self, name, weightless, external, seed):
        self.nodes, self.inits, self.name = [], [], name
        self.weightless, self.external = weightless, external
        self.rng = np.random.default_rng(seed)
        self.counter = 0

    def fresh(self, hint):
        self.counter += 1
        return "/%s_%d" % (hint, self.counter)

    def node(self, op, inputs, hint=None, outputs=1, **attrs):
        outs = [self.fresh(hint or op) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, **attrs))
        return outs[0] if outputs == 1 else outs

    def const(self, array, hint="Constant"):
        """A Constant node, as the exporter writes scalars and shapes."""
        return self.node("Constant", [], hint,
                         value=numpy_helper.from_array(np.asarray(array)))

    def buffer(self, array, name):
        """A real initializer that is no parameter (a registered buffer)."""
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def param(self, name, shape, scale=0.02, fill=None):
        t = TensorProto()
        t.name, t.data_type = name, TensorProto.FLOAT
        t.dims.extend(shape)
        if self.weightless:
            t.data_location = TensorProto.EXTERNAL
            for key, value in (("location", self.external), ("offset", "0"),
                               ("length", str(4 * int(np.prod(shape))))):
                e = t.external_data.add()
                e.key, e.value = key, value
        else:
            values = (np.full(shape, fill, np.float32) if fill is not None
                      else (self.rng.standard_normal(shape) * scale)
                      .astype(np.float32))
            t.raw_data = values.tobytes()
        self.inits.append(t)
        return name

    def linear(self, x, prefix, n_in, n_out):
        w = self.param(prefix + ".weight", [n_in, n_out])
        b = self.param(prefix + ".bias", [n_out], fill=0.0)
        y = self.node("MatMul", [x, w], prefix + "/MatMul")
        return self.node("Add", [b, y], prefix + "/Add")

    def layer_norm(self, x, prefix, hidden, eps):
        w = self.param(prefix + ".weight", [hidden], fill=1.0)
        b = self.param(prefix + ".bias", [hidden], fill=0.0)
        return self.node("LayerNormalization", [x, w, b], prefix, axis=-1,
                         epsilon=eps)

    def gelu(self, x, prefix):
        d = self.node("Div", [x, self.const(np.float32(math.sqrt(2)))],
                      prefix + "/Div")
        e = self.node("Erf", [d], prefix + "/Erf")
        a = self.node("Add", [e, self.const(np.float32(1.0))], prefix + "/Add")
        m = self.node("Mul", [x, a], prefix + "/Mul")
        return self.node("Mul", [m, self.const(np.float32(0.5))],
                         prefix + "/Mul_1")

    def attention(self, x, prefix, b, t, hidden, heads, mask):
        d = hidden // heads
        qkv = self.linear(x, prefix + ".qkv", hidden, 3 * hidden)
        q, k, v = self.node("Split", [qkv, self.const(np.array(
            [hidden] * 3, np.int64))], prefix + "/Split", outputs=3, axis=-1)
        shape = self.const(np.array([b, t, heads, d], np.int64))

        def heads_of(y, perm, hint):
            r = self.node("Reshape", [y, shape], prefix + "/Reshape_" + hint)
            return self.node("Transpose", [r], prefix + "/Transpose_" + hint,
                             perm=perm)
        q = heads_of(q, [0, 2, 1, 3], "q")
        kt = heads_of(k, [0, 2, 3, 1], "k")
        v = heads_of(v, [0, 2, 1, 3], "v")
        s = self.node("MatMul", [q, kt], prefix + "/MatMul_scores")
        s = self.node("Mul", [s, self.const(np.float32(1 / math.sqrt(d)))],
                      prefix + "/Mul_scale")
        if mask is not None:
            s = self.node("Where", [mask, s, self.const(np.float32(-np.inf))],
                          prefix + "/Where")
        p = self.node("Softmax", [s], prefix + "/Softmax", axis=-1)
        o = self.node("MatMul", [p, v], prefix + "/MatMul_out")
        o = self.node("Transpose", [o], prefix + "/Transpose_out",
                      perm=[0, 2, 1, 3])
        o = self.node("Reshape", [o, self.const(np.array([b, t, hidden],
                                                         np.int64))],
                      prefix + "/Reshape_out")
        return self.linear(o, prefix + ".proj", hidden, hidden)


def build(kind, layers, hidden, heads, inter, vocab, seq, batch, weightless,
          external, seed=0):
    if hidden % heads:
        sys.exit("--hidden %d is not a multiple of --heads %d" % (hidden,
                                                                   heads))
    g = Graph(kind, weightless, external, seed)
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64,
                                        [batch, seq])
    wte = g.param("embeddings.word.weight", [vocab, hidden])
    wpe = g.param("embeddings.position.weight", [seq, hidden])
    x = g.node("Gather", [wte, "input_ids"], "/wte/Gather")
    pos = g.node("Gather", [wpe, g.const(np.arange(seq, dtype=np.int64))],
                 "/wpe/Gather")
    x = g.node("Add", [x, pos], "/embeddings/Add")
    if kind == "gpt":
        # Keep the lower triangle (a real constant buffer, one for all).
        mask = g.buffer(np.tril(np.ones((1, 1, seq, seq), dtype=bool)),
                        "causal_mask")
        for i in range(layers):
            p = "h.%d" % i
            a = g.attention(g.layer_norm(x, p + ".ln_1", hidden, 1e-5),
                            p + ".attn", batch, seq, hidden, heads, mask)
            x = g.node("Add", [x, a], p + "/Add")
            h = g.linear(g.layer_norm(x, p + ".ln_2", hidden, 1e-5),
                         p + ".mlp.fc", hidden, inter)
            h = g.linear(g.gelu(h, p + ".mlp.gelu"), p + ".mlp.proj", inter,
                         hidden)
            x = g.node("Add", [x, h], p + "/Add_1")
        x = g.layer_norm(x, "ln_f", hidden, 1e-5)
        wt = g.node("Transpose", [wte], "/lm_head/Transpose", perm=[1, 0])
        logits = g.node("MatMul", [x, wt], "/lm_head/MatMul")
    else:
        x = g.layer_norm(x, "embeddings.ln", hidden, 1e-12)
        for i in range(layers):
            p = "layer.%d" % i
            a = g.attention(x, p + ".attn", batch, seq, hidden, heads, None)
            x = g.layer_norm(g.node("Add", [a, x], p + "/Add"), p + ".ln_1",
                             hidden, 1e-12)
            h = g.linear(x, p + ".ffn.fc", hidden, inter)
            h = g.linear(g.gelu(h, p + ".ffn.gelu"), p + ".ffn.proj", inter,
                         hidden)
            x = g.layer_norm(g.node("Add", [h, x], p + "/Add_1"), p + ".ln_2",
                             hidden, 1e-12)
        h = g.linear(x, "head.dense", hidden, hidden)
        h = g.layer_norm(g.gelu(h, "head.gelu"), "head.ln", hidden, 1e-12)
        wt = g.node("Transpose", [wte], "/head/Transpose", perm=[1, 0])
        logits = g.node("MatMul", [h, wt], "/head/MatMul")
        logits = g.node("Add", [logits, g.param("head.decoder.bias", [vocab],
                                                fill=0.0)], "/head/Add")
    g.nodes[-1].output[0] = "logits"
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                        [batch, seq, vocab])
    graph = helper.make_graph(g.nodes, "%s_%dx%d" % (kind, layers, hidden),
                              [ids], [out], g.inits)
    model = helper.make_model(graph, producer_name="strata-generate-model",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", nargs="?", choices=["gpt", "bert"])
    ap.add_argument("--preset", choices=sorted(PRESETS))
    ap.add_argument("--list-presets", action="store_true")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--intermediate", type=int,
                    help="default 4 x hidden")
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--seq", type=int)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--weightless", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output")
    args = ap.parse_args()
    if args.list_presets:
        for name, (kind, l, h, n, i, v, s) in sorted(PRESETS.items()):
            params = 12 * l * h * h + v * h
            print("%-12s %-4s layers %3d hidden %5d heads %2d intermediate "
                  "%5d vocab %5d seq %4d  ~%.2fB parameters" %
                  (name, kind, l, h, n, i, v, s, params / 1e9))
        return
    if args.preset:
        kind, l, h, n, i, v, s = PRESETS[args.preset]
    elif args.kind:
        kind, l, h, n, v, s = (args.kind, args.layers, args.hidden,
                               args.heads, args.vocab, args.seq)
        if None in (l, h, n, v, s):
            sys.exit("give --layers, --hidden, --heads, --vocab and --seq "
                     "(or --preset)")
        i = args.intermediate or 4 * h
    else:
        sys.exit("give a kind (gpt or bert) or --preset")
    for flag, value in (("layers", args.layers), ("hidden", args.hidden),
                        ("heads", args.heads), ("vocab", args.vocab),
                        ("seq", args.seq)):
        if args.preset and value is not None:
            sys.exit("--%s with --preset: give one or the other" % flag)
    if not args.output:
        sys.exit("give -o OUT.onnx")
    external = os.path.basename(args.output) + ".weightless"
    model = build(kind, l, h, n, i, v, s, args.batch, args.weightless,
                  external, args.seed)
    if args.weightless:
        # Empty: the initializers are declared, their bytes are nowhere.
        open(os.path.join(os.path.dirname(os.path.abspath(args.output)),
                          external), "wb").close()
    onnx.save(model, args.output)
    print("%s: %s, %d layers, hidden %d, %d nodes, %d initializers%s" % (
        args.output, kind, l, h, len(model.graph.node),
        len(model.graph.initializer),
        " (weightless)" if args.weightless else ""))


if __name__ == "__main__":
    main()

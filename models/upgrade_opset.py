#!/usr/bin/env python3
"""Rewrites an ONNX model exported at opset 13..17 into the forms of a
newer opset (18..21), as newer exporters write it, and writes the opset
18/21 fixtures committed in models/.

ONNX 1.12's version converter stops at opset 17, so the rewrite is done
here, op by op:

* the default-domain opset becomes the target and the IR version the one
  ONNX released with it (18: 8, 19 and 20: 9, 21: 10);
* ReduceMean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare (18): the `axes`
  attribute becomes an int64 initializer fed as input 1;
* Split (18): without the `split` input it gets `num_outputs`;
* every other op the committed models use has the same form at 18..21
  (Pad's optional `axes` input and the like are only new options).

Usage (Debian's Python, which has onnx 1.12):

    /usr/bin/python3 models/upgrade_opset.py IN.onnx OUT.onnx --opset 21
    /usr/bin/python3 models/upgrade_opset.py --fixtures [--out-dir models]

--fixtures writes, next to the opset-17 models they come from:

* `{mlp,mlp_external,gpt_tiny,bert_tiny}_opset{18,21}.onnx` (the external
  one reads the same `mlp_external.onnx.data`);
* `gpt_tiny_functions_opset18.onnx`: gpt_tiny at opset 18 with every
  LayerNormalization a call of the model-local function `LayerNorm` and
  every GELU (Div, Erf, Add, Mul, Mul) a call of the local function `Gelu`;
* `groupnorm_gelu_opset21.onnx` (Conv, GroupNormalization-21 with
  per-channel scale, Gelu-20, pooling, Gemm) and `groupnorm_opset18.onnx`
  (GroupNormalization-18 with per-group scale and an Erf GELU), each with
  an opset-17 twin (`*_reference_opset17.onnx`) that spells the group
  normalization out in the primitive ops Strata decomposes it into, so the
  pair trains to the same losses.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))

IR_VERSION_OF_OPSET = {18: 8, 19: 9, 20: 9, 21: 10}

REDUCE_OPS = {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
              "ReduceSumSquare"}


def default_opset(model):
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    raise ValueError("the model imports no default-domain opset")


def set_opset(model, opset):
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            entry.version = opset
    model.ir_version = max(model.ir_version, IR_VERSION_OF_OPSET.get(opset, 0))


def fresh_name(taken, base):
    name, k = base, 0
    while name in taken:
        k += 1
        name = "%s_%d" % (base, k)
    taken.add(name)
    return name


def upgrade(model, opset):
    """Rewrites `model` (opset 13..17) in place into opset `opset`'s forms."""
    old = default_opset(model)
    if not 13 <= old <= 17 or not 18 <= opset <= 21:
        raise ValueError("upgrades opset 13..17 to 18..21, not %d to %d"
                         % (old, opset))
    graph = model.graph
    taken = {i.name for i in graph.initializer} | {i.name for i in graph.input}
    for node in graph.node:
        taken.update(node.output)
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        attrs = {a.name: a for a in node.attribute}
        if node.op_type in REDUCE_OPS and "axes" in attrs:
            axes = list(attrs["axes"].ints)
            node.attribute.remove(attrs["axes"])
            name = fresh_name(taken, (node.name or node.output[0]) + "_axes")
            graph.initializer.append(numpy_helper.from_array(
                np.array(axes, dtype=np.int64), name))
            del node.input[1:]
            node.input.append(name)
        elif node.op_type == "Split" and (len(node.input) < 2 or
                                          not node.input[1]):
            del node.input[1:]
            node.attribute.append(
                helper.make_attribute("num_outputs", len(node.output)))
    set_opset(model, opset)
    return model


def load(path):
    # External data stays where it is: the rewritten model refers to it.
    return onnx.load(path, load_external_data=False)


# ---------------------------------------------------------------------------
# Local functions
# ---------------------------------------------------------------------------

LOCAL = "local"


def wrap_in_function(nodes, function_name, formal_inputs, formal_outputs,
                     opset, attributes=None):
    """A FunctionProto whose body is `nodes`, with the values of
    `formal_inputs`/`formal_outputs` (lists of the block's actual names)
    renamed to x0.. / y0.. and the inner values to t0..; `attributes` maps
    an attribute name of a body node to the function attribute it reads."""
    attributes = attributes or {}
    rename = {}
    for i, name in enumerate(formal_inputs):
        rename[name] = "x%d" % i
    for i, name in enumerate(formal_outputs):
        rename[name] = "y%d" % i
    body = []
    for k, node in enumerate(nodes):
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.name = "n%d" % k
        for i, name in enumerate(copy.input):
            copy.input[i] = rename.setdefault(name, "t%d" % len(rename))
        for i, name in enumerate(copy.output):
            copy.output[i] = rename.setdefault(name, "t%d" % len(rename))
        for attr in copy.attribute:
            if attr.name in attributes:
                ref = onnx.AttributeProto()
                ref.name = attr.name
                ref.type = attr.type
                ref.ref_attr_name = attributes[attr.name]
                attr.CopyFrom(ref)
        body.append(copy)
    return helper.make_function(
        LOCAL, function_name, ["x%d" % i for i in range(len(formal_inputs))],
        ["y%d" % i for i in range(len(formal_outputs))], body,
        [helper.make_opsetid("", opset)], sorted(set(attributes.values())))


def functions_model(model, opset=18):
    """gpt_tiny at `opset` with LayerNorm and GELU as local functions."""
    upgrade(model, opset)
    graph = model.graph
    nodes = list(graph.node)
    functions = {}
    out = []
    i = 0
    while i < len(nodes):
        node = nodes[i]
        if node.op_type == "LayerNormalization":
            if "LayerNorm" not in functions:
                functions["LayerNorm"] = wrap_in_function(
                    [node], "LayerNorm", list(node.input), list(node.output),
                    opset, {"axis": "axis", "epsilon": "epsilon"})
            call = helper.make_node(
                "LayerNorm", list(node.input), list(node.output),
                name=node.name + "/call", domain=LOCAL)
            call.attribute.extend(node.attribute)
            out.append(call)
            i += 1
            continue
        prefix = node.name.rsplit("/", 1)[0] + "/"
        if node.name.endswith("/gelu/Constant"):
            block = []
            while i < len(nodes) and nodes[i].name.startswith(prefix):
                block.append(nodes[i])
                i += 1
            produced = {o for n in block for o in n.output}
            inputs = [x for n in block for x in n.input if x not in produced]
            inputs = list(dict.fromkeys(inputs))
            outputs = [block[-1].output[0]]
            ops = [n.op_type for n in block]
            assert ops == ["Constant", "Div", "Erf", "Constant", "Add", "Mul",
                           "Constant", "Mul"], ops
            if "Gelu" not in functions:
                functions["Gelu"] = wrap_in_function(block, "Gelu", inputs,
                                                     outputs, opset)
            out.append(helper.make_node("Gelu", inputs, outputs,
                                        name=prefix + "call", domain=LOCAL))
            continue
        out.append(node)
        i += 1
    assert set(functions) == {"LayerNorm", "Gelu"}, sorted(functions)
    del graph.node[:]
    graph.node.extend(out)
    model.functions.extend(functions.values())
    model.opset_import.append(helper.make_opsetid(LOCAL, 1))
    return model


# ---------------------------------------------------------------------------
# GroupNormalization and Gelu
# ---------------------------------------------------------------------------

N, C, H, W, GROUPS, CLASSES = 4, 8, 4, 4, 2, 10
EPSILON = 1e-5


def group_norm_model(opset, per_channel, gelu_op, decomposed):
    """Conv -> group norm -> GELU -> global average pool -> Gemm.

    `per_channel`: scale and bias have C entries (GroupNormalization-21),
    else GROUPS (GroupNormalization-18). `decomposed`: the group norm as the
    primitive ops Strata builds for it, in its order. `gelu_op`: ONNX's Gelu
    (opset 20), else the exporter's Div/Erf/Add/Mul/Mul.
    """
    rng = np.random.RandomState(0)
    affine = C if per_channel else GROUPS
    inits = [
        numpy_helper.from_array((rng.randn(C, C, 3, 3) * 0.2)
                                .astype(np.float32), "conv.weight"),
        numpy_helper.from_array((1 + rng.randn(affine) * 0.1)
                                .astype(np.float32), "norm.weight"),
        numpy_helper.from_array((rng.randn(affine) * 0.1)
                                .astype(np.float32), "norm.bias"),
        numpy_helper.from_array((rng.randn(CLASSES, C) * 0.3)
                                .astype(np.float32), "fc.weight"),
        numpy_helper.from_array(np.zeros(CLASSES, np.float32), "fc.bias"),
    ]
    def const(name, values, dtype):
        # As exporters write constants: Constant nodes (a float initializer
        # would be a trainable parameter).
        nodes.append(helper.make_node(
            "Constant", [], [name],
            value=numpy_helper.from_array(np.array(values, dtype), name)))
        return name

    nodes = [helper.make_node("Conv", ["x", "conv.weight"], ["conv"],
                              name="conv", pads=[1, 1, 1, 1])]
    if not decomposed:
        nodes.append(helper.make_node(
            "GroupNormalization", ["conv", "norm.weight", "norm.bias"],
            ["norm"], name="norm", num_groups=GROUPS, epsilon=EPSILON))
    else:
        group_shape = const("group_shape", [N, GROUPS, C // GROUPS * H * W],
                            np.int64)
        full_shape = const("full_shape", [N, C, H, W], np.int64)
        eps = const("eps", EPSILON, np.float32)
        affine_shape = const("affine_shape",
                             [C, 1, 1] if per_channel else [GROUPS, 1],
                             np.int64)
        nodes += [
            helper.make_node("Reshape", ["conv", group_shape], ["g"]),
            helper.make_node("ReduceMean", ["g"], ["mean"], axes=[2]),
            helper.make_node("Sub", ["g", "mean"], ["centered"]),
            helper.make_node("Mul", ["centered", "centered"], ["squared"]),
            helper.make_node("ReduceMean", ["squared"], ["var"], axes=[2]),
            helper.make_node("Add", ["var", eps], ["shifted"]),
            helper.make_node("Sqrt", ["shifted"], ["std"]),
            helper.make_node("Div", ["centered", "std"], ["normalized"]),
        ]
        if per_channel:
            nodes.append(helper.make_node("Reshape", ["normalized", full_shape],
                                          ["restored"]))
            pre = "restored"
        else:
            pre = "normalized"
        nodes += [
            helper.make_node("Reshape", ["norm.weight", affine_shape],
                             ["scale"]),
            helper.make_node("Reshape", ["norm.bias", affine_shape], ["bias"]),
            helper.make_node("Mul", [pre, "scale"], ["scaled"]),
            helper.make_node("Add", ["scaled", "bias"],
                             ["norm" if per_channel else "affine"]),
        ]
        if not per_channel:
            nodes.append(helper.make_node("Reshape", ["affine", full_shape],
                                          ["norm"]))
    if gelu_op:
        nodes.append(helper.make_node("Gelu", ["norm"], ["act"], name="gelu"))
    else:
        const("sqrt2", 2 ** 0.5, np.float32)
        const("one", 1, np.float32)
        const("half", 0.5, np.float32)
        nodes += [
            helper.make_node("Div", ["norm", "sqrt2"], ["gelu_div"]),
            helper.make_node("Erf", ["gelu_div"], ["gelu_erf"]),
            helper.make_node("Add", ["gelu_erf", "one"], ["gelu_add"]),
            helper.make_node("Mul", ["norm", "gelu_add"], ["gelu_mul"]),
            helper.make_node("Mul", ["gelu_mul", "half"], ["act"]),
        ]
    nodes += [
        helper.make_node("GlobalAveragePool", ["act"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"],
                         transB=1),
    ]
    graph = helper.make_graph(
        nodes, "groupnorm_gelu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, C, H, W])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                       [N, CLASSES])],
        inits)
    model = helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", opset)])
    model.ir_version = IR_VERSION_OF_OPSET.get(opset, 8)
    return model


def write_fixtures(out_dir):
    def save(model, name):
        path = os.path.join(out_dir, name)
        onnx.save(model, path)
        print("wrote", path, os.path.getsize(path), "bytes")

    for name in ("mlp", "mlp_external", "gpt_tiny", "bert_tiny"):
        for opset in (18, 21):
            save(upgrade(load(os.path.join(HERE, name + ".onnx")), opset),
                 "%s_opset%d.onnx" % (name, opset))
    save(functions_model(load(os.path.join(HERE, "gpt_tiny.onnx"))),
         "gpt_tiny_functions_opset18.onnx")
    save(group_norm_model(21, True, True, False), "groupnorm_gelu_opset21.onnx")
    save(group_norm_model(17, True, False, True),
         "groupnorm_gelu_reference_opset17.onnx")
    save(group_norm_model(18, False, False, False), "groupnorm_opset18.onnx")
    save(group_norm_model(17, False, False, True),
         "groupnorm_reference_opset17.onnx")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", nargs="?")
    parser.add_argument("output", nargs="?")
    parser.add_argument("--opset", type=int, default=21)
    parser.add_argument("--fixtures", action="store_true",
                        help="write the committed opset 18/21 fixtures")
    parser.add_argument("--out-dir", default=HERE)
    args = parser.parse_args()
    if args.fixtures:
        write_fixtures(args.out_dir)
        return
    if not args.input or not args.output:
        parser.error("give IN and OUT, or --fixtures")
    onnx.save(upgrade(load(args.input), args.opset), args.output)


if __name__ == "__main__":
    main()

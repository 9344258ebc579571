#!/usr/bin/env python3
"""Forward-pass references computed by PyTorch, for the runtime's parity test.

For each committed model, loads the ONNX initializers into the PyTorch module
(checking that every parameter matches), feeds inputs drawn with a fixed
seed, and writes under tests/golden/forward/<model>/:
  input.<name>.bin     the raw little-endian input tensors
  output.<name>.bin    the outputs; an output of more than 50k elements is
                       stored for its first batch row only, as
                       output.<name>.row0.bin
Run with Debian's Python: /usr/bin/python3 models/forward_reference.py
"""
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from models.definitions import GPT, GPTConfig, Bert, BertConfig, MLP  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "models")
OUT = os.path.join(ROOT, "tests", "golden", "forward")
ROW_LIMIT = 50_000


def load_onnx_weights(module, onnx_path):
    model = onnx.load(onnx_path)
    weights = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy())
               for t in model.graph.initializer}
    state = module.state_dict()
    loaded = {k: v for k, v in weights.items() if k in state}
    module.load_state_dict(loaded, strict=False)
    for name, p in module.named_parameters():
        if name in weights:
            assert torch.equal(p.detach(), weights[name]), name
    return module


def write(dirname, prefix, name, tensor):
    array = tensor.detach().cpu().numpy()
    suffix = ""
    if prefix == "output" and array.size > ROW_LIMIT:
        array, suffix = array[0], ".row0"
    path = os.path.join(dirname, f"{prefix}.{name}{suffix}.bin")
    np.ascontiguousarray(array).tofile(path)


def run(name, module, inputs, output_names):
    module = load_onnx_weights(module, os.path.join(MODELS, name + ".onnx"))
    module.eval()  # dropout is 0 in the committed models; eval == train
    dirname = os.path.join(OUT, name)
    os.makedirs(dirname, exist_ok=True)
    with torch.no_grad():
        outputs = module(*inputs.values())
    if not isinstance(outputs, tuple):
        outputs = (outputs,)
    for k, v in inputs.items():
        write(dirname, "input", k, v)
    for k, v in zip(output_names, outputs):
        write(dirname, "output", k, v)
    print(name, {k: tuple(v.shape) for k, v in zip(output_names, outputs)})


def main():
    g = torch.Generator().manual_seed(7)
    run("mlp", MLP(64, 128, 10, dropout=0.0),
        {"features": torch.randn(32, 64, generator=g)}, ["logits"])
    run("gpt_tiny", GPT(GPTConfig(dropout=0.0)),
        {"input_ids": torch.randint(0, 256, (8, 64), generator=g)}, ["logits"])
    batch, seq = 8, 32
    mask = torch.ones(batch, seq, dtype=torch.long)
    for i in range(batch):
        mask[i, seq - 2 * i:] = 0 if i else 1
    types = torch.zeros(batch, seq, dtype=torch.long)
    types[:, seq // 2:] = 1
    run("bert_tiny", Bert(BertConfig(dropout=0.0)),
        {"input_ids": torch.randint(0, 256, (batch, seq), generator=g),
         "token_type_ids": types, "attention_mask": mask},
        ["mlm_logits", "nsp_logits"])


if __name__ == "__main__":
    main()

"""Strata from Python: compile a torch module, train it, load the weights back.

    import strata
    artifact = strata.compile(model, example_inputs, "model.strata", steps=100)
    for record in strata.train(artifact, data="train/", checkpoint_dir="ckpt"):
        print(record["step"], record["loss"])
    strata.load_weights(model, "ckpt", artifact)

A thin wrapper over the command-line tools (docs/python.md says why):
compile() exports with torch.onnx.export and runs strata-compile, train()
runs strata-run and yields the records of its JSON-lines log as they are
written, load_weights() reads a checkpoint's index.json and state.bin.
"""

from strata.api import (Artifact, StrataError, compile, load_weights,  # noqa: F401
                        tool, train)

__all__ = ["Artifact", "StrataError", "compile", "load_weights", "tool",
           "train"]

"""strata.compile, strata.train and strata.load_weights (docs/python.md)."""

import json
import os
import shutil
import subprocess
import tempfile
import time

class StrataError(RuntimeError):
    """A Strata tool refused or failed; the message is its error line."""


class Artifact:
    """A compiled artifact folder, with the ONNX initializer name of each of
    the module's parameters and buffers (`names`: initializer -> state_dict
    key) where the export renamed one."""

    def __init__(self, path, names=None, steps=None):
        self.path = os.fspath(path)
        self.names = dict(names or {})
        self.steps = steps  # strata-compile --steps, when compile() set it

    def __fspath__(self):
        return self.path

    def __repr__(self):
        return f"strata.Artifact({self.path!r})"


def tool(name):
    """The path of a Strata tool: $STRATA_BIN/NAME, the build tree's
    build/bin/NAME next to this package, or NAME on PATH."""
    candidates = []
    if os.environ.get("STRATA_BIN"):
        candidates.append(os.path.join(os.environ["STRATA_BIN"], name))
    here = os.path.dirname(os.path.abspath(__file__))
    candidates.append(os.path.join(here, "..", "..", "build", "bin", name))
    for path in candidates:
        if os.access(path, os.X_OK):
            return os.path.normpath(path)
    found = shutil.which(name)
    if not found:
        raise StrataError(f"cannot find {name}: build Strata (tools/build.sh) "
                          f"or set STRATA_BIN to its bin folder")
    return found


def _error_line(stderr, what):
    lines = [l for l in stderr.splitlines() if l.strip()]
    errors = [l for l in lines if ": error: " in l]
    return (errors or lines or [f"{what} failed"])[-1]


def _options(options, joined):
    """Keyword options as command-line flags: steps=10 -> --steps=10
    (`joined`, strata-compile's LLVM options) or --steps 10 (strata-run);
    a true boolean is the bare flag (strata-compile: --flag=false for
    false, strata-run: nothing); a list repeats the flag."""
    flags = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, bool):
            if value:
                flags.append(flag)
            elif joined:
                flags.append(flag + "=false")
            continue
        for v in value if isinstance(value, (list, tuple)) else [value]:
            flags += [f"{flag}={v}"] if joined else [flag, str(v)]
    return flags


def _name_map(onnx_path, module):
    """initializer -> state_dict key, for the module's tensors the export
    renamed: matched by value where exactly one state_dict entry equals the
    initializer. Names the export kept need no entry."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    state = {k: v.detach().cpu().numpy() for k, v in module.state_dict().items()}
    names = {}
    for init in onnx.load(onnx_path).graph.initializer:
        if init.name in state:
            continue
        value = numpy_helper.to_array(init)
        matches = [k for k, v in state.items()
                   if v.shape == value.shape and v.dtype == value.dtype and
                   np.array_equal(v, value)]
        if len(matches) == 1:
            names[init.name] = matches[0]
    return names


def compile(module, example_inputs, out=None, *, input_names=None,
            output_names=None, dynamic_axes=None, opset=17, **options):
    """Exports `module` with torch.onnx.export (training mode, opset 17, no
    constant folding, as models/export_models.py) and compiles it with
    strata-compile into the folder `out` (a fresh temporary one by default).
    Every other keyword is a strata-compile option: steps=100, lr=3e-3,
    optimizer="sgd", world=4, freeze=["embed.*"], ... Returns the Artifact."""
    import inspect
    import torch
    if not isinstance(example_inputs, tuple):
        example_inputs = (example_inputs,)
    if out is None:
        out = tempfile.mkdtemp(prefix="strata-") + "/model.strata"
    out = os.fspath(out)
    settings = dict(opset_version=opset,
                    training=torch.onnx.TrainingMode.TRAINING,
                    do_constant_folding=False, export_params=True,
                    input_names=input_names, output_names=output_names,
                    dynamic_axes=dynamic_axes)
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        settings["dynamo"] = False
    with tempfile.TemporaryDirectory(prefix="strata-export-") as folder:
        onnx_path = os.path.join(folder, "model.onnx")
        was_training = module.training
        module.train()
        try:
            with torch.no_grad():
                torch.onnx.export(module, example_inputs, onnx_path, **settings)
        finally:
            module.train(was_training)
        names = _name_map(onnx_path, module)
        done = subprocess.run([tool("strata-compile"), onnx_path, "-o", out] +
                              _options(options, joined=True), capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise StrataError(_error_line(done.stderr, "strata-compile"))
    return Artifact(out, names, options.get("steps"))


def train(artifact, data="synthetic", steps=None, *, log=None,
          checkpoint_dir=None, save_every=None, eval=None, launcher=None,
          **options):
    """Runs strata-run on `artifact` and yields each record of its log (a
    dict: step, loss, lr, grad_norm, samples_per_s or tokens_per_s, ...; an
    --eval record last) as it is written. `data` is a dataset folder, a
    token file or "synthetic"; other keywords are strata-run options
    (lr=..., seed=..., data_dtype="uint8"). With `checkpoint_dir` and no
    `save_every`, the last step is saved. `launcher` prefixes the command
    (["mpirun", "-np", "4"]). Raises StrataError with strata-run's error
    line when it fails."""
    if checkpoint_dir is not None and save_every is None:
        save_every = steps or getattr(artifact, "steps", None)
        if not save_every:
            raise StrataError("checkpoint_dir needs steps= or save_every= "
                              "(the artifact's step count is not known here)")
    work = None
    if log is None:
        work = tempfile.mkdtemp(prefix="strata-train-")
        log = os.path.join(work, "run.jsonl")
    log = os.fspath(log)
    cmd = [tool("strata-run"), os.fspath(artifact), "--data", os.fspath(data),
           "--log", log, "--quiet"]
    if steps is not None:
        cmd += ["--steps", str(steps)]
    if checkpoint_dir is not None:
        cmd += ["--checkpoint-dir", os.fspath(checkpoint_dir)]
    if save_every:
        cmd += ["--save-every", str(save_every)]
    if eval is not None:
        cmd += ["--eval", os.fspath(eval)]
    cmd += _options(options, joined=False)
    # A resumed run appends to its log: yield only what this run writes.
    start = 0
    if os.path.exists(log):
        if options.get("resume"):
            start = os.path.getsize(log)
        else:
            os.remove(log)
    stderr = tempfile.TemporaryFile(mode="w+")
    process = subprocess.Popen(list(launcher or []) + cmd,
                               stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        yield from _follow(log, process, start)
        if process.wait() != 0:
            stderr.seek(0)
            raise StrataError(_error_line(stderr.read(), "strata-run"))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        stderr.close()
        if work:
            shutil.rmtree(work, ignore_errors=True)


def _follow(path, process, offset):
    """The JSON records appended to `path` after byte `offset` while
    `process` runs, and those left once it has ended."""
    pending = ""
    while True:
        ended = process.poll() is not None
        if os.path.exists(path):
            with open(path) as f:
                f.seek(offset)
                chunk = f.read()
                offset = f.tell()
            pending += chunk
            *lines, pending = pending.split("\n")
            for line in lines:
                if line.strip():
                    yield json.loads(line)
        if ended:
            return
        time.sleep(0.02)


_DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16",
           "i64": "int64", "i32": "int32"}
_PARAMETER, _BUFFER = 2, 3


def _checkpoint_folder(checkpoint):
    """The folder holding index.json and state.bin: a checkpoint directory
    (its `latest`), a step folder, or a --consolidate folder."""
    checkpoint = os.fspath(checkpoint)
    latest = os.path.join(checkpoint, "latest")
    if os.path.exists(latest):
        with open(latest) as f:
            checkpoint = os.path.join(checkpoint, f.read().strip())
    if not os.path.exists(os.path.join(checkpoint, "index.json")):
        raise StrataError(f"'{checkpoint}' holds no checkpoint (no latest, "
                          f"no index.json)")
    return checkpoint


def load_weights(module, checkpoint, artifact=None, strict=True):
    """Copies a checkpoint's parameters and buffers into `module`'s
    state_dict. Each tensor's ONNX initializer name is the state_dict key,
    or mapped back through `artifact.names` (strata.compile's map of the
    names the export changed). A tensor that maps to no key, or to one of
    another shape, is a StrataError; with `strict`, so is a parameter of
    the module the checkpoint does not hold (a buffer the artifact made a
    constant, such as a causal mask, keeps its value). Returns the keys
    loaded."""
    import numpy as np
    import torch
    folder = _checkpoint_folder(checkpoint)
    with open(os.path.join(folder, "index.json")) as f:
        index = json.load(f)
    topology = index.get("topology", {})
    if topology.get("ranks", 1) > 1:
        raise StrataError(
            f"'{folder}' is a {topology['ranks']}-rank checkpoint: consolidate "
            f"it first (strata-run ARTIFACT --checkpoint-dir DIR "
            f"--consolidate OUT) and load OUT")
    names = artifact.names if isinstance(artifact, Artifact) else {}
    state = module.state_dict()
    loaded = {}
    with open(os.path.join(folder, "state.bin"), "rb") as f:
        blob = f.read()
    for t in index["tensors"]:
        if t["kind"] not in (_PARAMETER, _BUFFER):
            continue
        key = t["name"] if t["name"] in state else names.get(t["name"])
        if key is None:
            raise StrataError(
                f"checkpoint tensor '{t['name']}' is no parameter or buffer "
                f"of the module and strata.compile mapped no name to it "
                f"(pass the Artifact strata.compile returned)")
        if t["dtype"] not in _DTYPES:
            raise StrataError(f"checkpoint tensor '{t['name']}' is "
                              f"{t['dtype']}, which load_weights cannot read")
        value = np.frombuffer(blob, dtype=_DTYPES[t["dtype"]],
                              count=t["bytes"] // np.dtype(
                                  _DTYPES[t["dtype"]]).itemsize,
                              offset=t["offset"]).reshape(t["shape"])
        if tuple(state[key].shape) != tuple(value.shape):
            raise StrataError(
                f"checkpoint tensor '{t['name']}' has shape "
                f"{list(value.shape)} but the module's '{key}' has "
                f"{list(state[key].shape)}")
        loaded[key] = torch.from_numpy(value.copy()).to(state[key].dtype)
    # A tied parameter (one tensor under two keys: an embedding and the
    # head) is one initializer: its other keys take the same value.
    by_storage = {}
    for k, v in state.items():
        by_storage.setdefault((v.data_ptr(), tuple(v.shape)), []).append(k)
    for keys in by_storage.values():
        source = next((k for k in keys if k in loaded), None)
        for k in keys:
            if source is not None and k not in loaded:
                loaded[k] = loaded[source]
    # A buffer the artifact holds as a constant (a causal mask) is not in
    # the checkpoint: training never changes it. A parameter must be.
    missing = [k for k, _ in module.named_parameters() if k not in loaded]
    if strict and missing:
        raise StrataError(f"the checkpoint holds no value for the module's "
                          f"parameter '{missing[0]}'" +
                          (f" (and {len(missing) - 1} more)"
                           if len(missing) > 1 else ""))
    module.load_state_dict(loaded, strict=False)
    return sorted(loaded)

//===- RunDriver.cpp - strata-run -----------------------------------------===//
//
// strata-run ARTIFACT [--data FILE|synthetic] [--steps N] [--log FILE] ...
//   trains (Training.h, docs/training.md);
// strata-run ARTIFACT --forward [--input NAME=FILE]... [--random-inputs SEED]
//   evaluates the forward program once and prints a line per output.
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/RunDriver.h"

#include "strata/Runtime/Backend.h"
#include "strata/Runtime/Executor.h"
#include "strata/Runtime/Training.h"

#include "plan.pb.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace strata::runtime {
namespace {

const char *kUsage =
    "USAGE: strata-run ARTIFACT.strata [options]\n"
    "\n"
    "Trains the model the artifact holds (strata-compile -o), or with\n"
    "--forward evaluates it once.\n"
    "\n"
    "TRAINING:\n"
    "  --data FILE|DIR|synthetic  token file (raw little-endian ids), a\n"
    "                          folder of .npy arrays (one per input, and\n"
    "                          labels.npy: docs/data.md) or generated inputs\n"
    "                          (synthetic, the default)\n"
    "  --eval DIR              after training, the loss and accuracy on the\n"
    "                          dataset folder DIR (forward program only)\n"
    "  --data-dtype T          uint8 (bytes: text), uint16 (default) or uint32\n"
    "  --steps N               optimizer steps (default: strata-compile --steps)\n"
    "  --lr X                  base learning rate (default: the compiled one)\n"
    "  --seed S                data sampling seed (0)\n"
    "  --log FILE.jsonl        one JSON object per step\n"
    "  --print-every K         a progress line every K steps (10)\n"
    "  --save-every K          checkpoint every K steps into --checkpoint-dir\n"
    "  --checkpoint-dir DIR    where checkpoints go\n"
    "  --resume                continue from DIR/latest\n"
    "  --quiet                 no progress lines\n"
    "  --timeout S             abort every rank when a collective has not\n"
    "                          completed after S seconds (60)\n"
    "  --ssd-dir DIR           where the SSD tier's file goes (/tmp; it is\n"
    "                          unlinked at once and vanishes with the run)\n"
    "  --trace OUT.json        write one step as it ran, per stream, as\n"
    "                          Chrome-trace JSON (distributed: one file a\n"
    "                          rank, OUT.rank-R.json)\n"
    "  --trace-step N          the step --trace records (the last)\n"
    "  --inject-delay US       sleep up to US microseconds before every\n"
    "                          collective, move and optimizer update (tests\n"
    "                          of the schedule: the answer must not change)\n"
    "  --check-replicas        distributed: after every step, check that\n"
    "                          replicas hold bit-identical state (hashes)\n"
    "  --consolidate OUT       instead of training: write the whole weights\n"
    "                          of the distributed checkpoint in\n"
    "                          --checkpoint-dir to the folder OUT (one\n"
    "                          process; with --export-onnx, the model too)\n"
    "  --export-onnx OUT.onnx  then write the model with the trained weights\n"
    "  --sample N              then continue --prompt by N tokens (byte-level\n"
    "                          next-token models), printing the text\n"
    "  --prompt TEXT           the text to continue (a newline)\n"
    "  --top-k K               sample among the K likeliest tokens (1: greedy)\n"
    "\n"
    "EVALUATION:\n"
    "  --forward               evaluate the forward pass once (with\n"
    "                          --checkpoint-dir DIR --resume: trained weights)\n"
    "  --forward --eval DIR    instead: the loss and accuracy on the dataset\n"
    "                          folder DIR (a training artifact's logits and\n"
    "                          labels), with --log FILE a JSON record too\n"
    "  --input NAME=FILE       raw little-endian bytes for input NAME\n"
    "  --random-inputs SEED    fill inputs without --input: floats uniform in\n"
    "                          [-1, 1), integers uniform in [0, --int-high)\n"
    "  --int-high N            upper bound for random integer inputs (2)\n"
    "  --output NAME=FILE      write output NAME's raw bytes to FILE\n"
    "  --backend cpu|cuda|auto the backend (cpu; auto: cuda where a GPU and\n"
    "                          the cuda backend are, else cpu with a note;\n"
    "                          queued: the cpu run as CUDA runs it, stream\n"
    "                          queues and events, lazily, so a missing event\n"
    "                          is a wrong answer)\n"
    "  --tf32                  cuda: f32 matmuls may use TF32 tensor cores\n"
    "  --cuda-graph            cuda (and queued): capture each program on its\n"
    "                          second run, replay it after\n"
    "  --probe-backend         print what --backend auto would pick, and why\n"
    "  --help                  this text\n";

int error(const std::string &message) {
  std::cerr << "strata-run: error: " << message << "\n";
  return 1;
}

bool splitAssignment(const std::string &arg, std::string &name,
                     std::string &value) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    return false;
  name = arg.substr(0, eq);
  value = arg.substr(eq + 1);
  return true;
}

void fillRandom(TensorView &t, std::mt19937_64 &rng, int64_t intHigh) {
  int64_t n = t.numel();
  switch (t.dtype) {
  case DType::F32: {
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    for (int64_t i = 0; i < n; ++i)
      t.as<float>()[i] = d(rng);
    break;
  }
  case DType::F64: {
    std::uniform_real_distribution<double> d(-1.0, 1.0);
    for (int64_t i = 0; i < n; ++i)
      t.as<double>()[i] = d(rng);
    break;
  }
  case DType::I64: {
    std::uniform_int_distribution<int64_t> d(0, intHigh - 1);
    for (int64_t i = 0; i < n; ++i)
      t.as<int64_t>()[i] = d(rng);
    break;
  }
  case DType::I32: {
    std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(intHigh - 1));
    for (int64_t i = 0; i < n; ++i)
      t.as<int32_t>()[i] = d(rng);
    break;
  }
  default:
    std::memset(t.data, 0, t.bytes());
  }
}

std::string summarize(const TensorView &t) {
  std::ostringstream os;
  os << t.describe();
  if (t.dtype == DType::F32 || t.dtype == DType::F64) {
    double sum = 0, sumSq = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      double v = t.dtype == DType::F32 ? t.as<float>()[i] : t.as<double>()[i];
      sum += v;
      sumSq += v * v;
    }
    char buffer[128];
    std::snprintf(buffer, sizeof(buffer), " sum=%.9g l2=%.9g", sum,
                  std::sqrt(sumSq));
    os << buffer << " first=[";
    for (int64_t i = 0; i < std::min<int64_t>(t.numel(), 4); ++i)
      os << (i ? ", " : "")
         << (t.dtype == DType::F32 ? t.as<float>()[i] : t.as<double>()[i]);
    os << "]";
  }
  return os.str();
}

/// What strata-run's command line asks for.
struct RunArguments {
  std::string artifactDir, backend = "cpu";
  bool forward = false;
  TrainOptions train;
  std::map<std::string, std::string> inputFiles, outputFiles;
  long long randomSeed = -1, intHigh = 2;
};

/// --steps, --seed, --print-every, --save-every, --lr, --trace-step,
/// --inject-delay and --timeout with their `value`; an exit code when the
/// value is wrong (its error printed).
std::optional<int> parseNumericOption(const std::string &arg,
                                      const std::string &value,
                                      TrainOptions &train) {
  if (arg == "--inject-delay") {
    try {
      size_t used = 0;
      long long n = std::stoll(value, &used);
      if (used != value.size() || n < 0)
        throw std::invalid_argument(value);
      train.injectDelayMicros = uint64_t(n);
    } catch (...) {
      return error("--inject-delay expects microseconds, got '" + value + "'");
    }
    return std::nullopt;
  }
  if (arg == "--timeout") {
    try {
      train.timeoutSeconds = std::stod(value);
    } catch (...) {
      return error("--timeout expects seconds, got '" + value + "'");
    }
    if (!(train.timeoutSeconds > 0))
      return error("--timeout must be positive");
    return std::nullopt;
  }
  try {
    size_t used = 0;
    if (arg == "--lr") {
      train.lr = std::stod(value, &used);
      if (!(train.lr > 0) || !std::isfinite(train.lr))
        return error("--lr must be a positive finite number, got '" + value +
                     "'");
    } else {
      long long n = std::stoll(value, &used);
      if (n < 0)
        return error(arg + " must not be negative");
      if (arg == "--steps")
        train.steps = n;
      else if (arg == "--seed") {
        train.seed = uint64_t(n);
        train.seedGiven = true;
      }
      else if (arg == "--print-every")
        train.printEvery = n;
      else if (arg == "--trace-step")
        train.traceStep = n;
      else
        train.saveEvery = n;
    }
    if (used != value.size())
      throw std::invalid_argument(value);
  } catch (...) {
    return error(arg + " expects a number, got '" + value + "'");
  }
  return std::nullopt;
}

/// Parses argv into `args`; an exit code when strata-run ends here
/// (--help, --probe-backend, or a wrong argument, its error printed).
std::optional<int> parseArguments(int argc, char **argv, RunArguments &args) {
  TrainOptions &train = args.train;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&](std::string &value) {
      if (i + 1 >= argc)
        return false;
      value = argv[++i];
      return true;
    };
    std::string value, name, file;
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--probe-backend") {
      // What --backend auto picks, and why: "cuda: <devices>" or
      // "cpu: <why not cuda>".
      std::string devices;
      Status probed = probeCudaBackend(devices);
      std::cout << (probed ? "cuda: " + devices : "cpu: " + probed.message())
                << "\n";
      return 0;
    } else if (arg == "--forward") {
      args.forward = true;
    } else if (arg == "--input" || arg == "--output") {
      if (!next(value) || !splitAssignment(value, name, file))
        return error(arg + " expects NAME=FILE");
      (arg == "--input" ? args.inputFiles : args.outputFiles)[name] = file;
    } else if (arg == "--random-inputs" || arg == "--int-high") {
      if (!next(value))
        return error(arg + " expects a number");
      try {
        (arg == "--random-inputs" ? args.randomSeed : args.intHigh) =
            std::stoll(value);
      } catch (...) {
        return error(arg + " expects a number, got '" + value + "'");
      }
    } else if (arg == "--prompt") {
      if (!next(train.prompt))
        return error("--prompt expects text");
    } else if (arg == "--sample" || arg == "--top-k") {
      if (!next(value))
        return error(arg + " expects a number");
      try {
        size_t used = 0;
        long long n = std::stoll(value, &used);
        if (used != value.size() || n < 1)
          throw std::invalid_argument(value);
        (arg == "--sample" ? train.sampleTokens : train.topK) = n;
      } catch (...) {
        return error(arg + " expects a positive number, got '" + value + "'");
      }
    } else if (arg == "--data" || arg == "--data-dtype" || arg == "--log" ||
               arg == "--eval" ||
               arg == "--checkpoint-dir" || arg == "--export-onnx" ||
               arg == "--consolidate" || arg == "--ssd-dir" ||
               arg == "--trace") {
      if (!next(value))
        return error(arg + " expects a value");
      (arg == "--data"           ? train.data
       : arg == "--eval"         ? train.evalData
       : arg == "--data-dtype"   ? train.dataDtype
       : arg == "--log"          ? train.logPath
       : arg == "--export-onnx"  ? train.exportOnnx
       : arg == "--consolidate"  ? train.consolidateTo
       : arg == "--ssd-dir"      ? train.ssdDir
       : arg == "--trace"        ? train.tracePath
                                 : train.checkpointDir) = value;
    } else if (arg == "--steps" || arg == "--seed" || arg == "--print-every" ||
               arg == "--save-every" || arg == "--lr" ||
               arg == "--trace-step") {
      if (!next(value))
        return error(arg + " expects a number");
      if (std::optional<int> code = parseNumericOption(arg, value, train))
        return code;
    } else if (arg == "--inject-delay") {
      if (!next(value))
        return error("--inject-delay expects microseconds");
      if (std::optional<int> code = parseNumericOption(arg, value, train))
        return code;
    } else if (arg == "--timeout") {
      if (!next(value))
        return error("--timeout expects seconds");
      if (std::optional<int> code = parseNumericOption(arg, value, train))
        return code;
    } else if (arg == "--resume") {
      train.resume = true;
    } else if (arg == "--quiet") {
      train.quiet = true;
    } else if (arg == "--check-replicas") {
      train.checkReplicas = true;
    } else if (arg == "--backend") {
      if (!next(args.backend))
        return error("--backend expects cpu, cuda, auto or queued");
    } else if (arg == "--tf32") {
      train.tf32 = true;
    } else if (arg == "--cuda-graph") {
      train.cudaGraph = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return error("unknown option '" + arg + "' (see --help)");
    } else if (args.artifactDir.empty()) {
      args.artifactDir = arg;
    } else {
      return error("more than one artifact given: '" + args.artifactDir +
                   "' and '" + arg + "'");
    }
  }
  return std::nullopt;
}

/// --forward's inputs: each from its --input file, or random with
/// --random-inputs.
int fillForwardInputs(const RunArguments &args, Executor &executor) {
  std::mt19937_64 rng(static_cast<uint64_t>(std::max(args.randomSeed, 0LL)));
  for (const auto &[name, file] : args.inputFiles)
    if (!executor.findInput(name))
      return error("--input names '" + name + "', which is not an input");
  for (const std::string &name : executor.getInputNames("forward")) {
    TensorView *t = executor.findInput(name);
    auto it = args.inputFiles.find(name);
    if (it == args.inputFiles.end()) {
      if (args.randomSeed < 0)
        return error("input '" + name + "' (" + t->describe() +
                     ") needs --input " + name +
                     "=FILE or --random-inputs SEED");
      fillRandom(*t, rng, args.intHigh);
      continue;
    }
    std::ifstream in(it->second, std::ios::binary | std::ios::ate);
    if (!in)
      return error("cannot read '" + it->second + "'");
    size_t size = static_cast<size_t>(in.tellg());
    if (size != t->bytes())
      return error("'" + it->second + "' has " + std::to_string(size) +
                   " bytes; input '" + name + "' (" + t->describe() +
                   ") needs " + std::to_string(t->bytes()));
    in.seekg(0);
    in.read(static_cast<char *>(t->data), size);
  }
  return 0;
}

/// --forward's outputs: a line each, and the --output files.
int writeForwardOutputs(const RunArguments &args, const Executor &executor) {
  for (const auto &[name, file] : args.outputFiles)
    if (!executor.findOutput(name))
      return error("--output names '" + name + "', which is not an output");
  for (const std::string &name : executor.getOutputNames("forward")) {
    const TensorView *t = executor.findOutput(name);
    std::cout << name << ": " << summarize(*t) << "\n";
    auto it = args.outputFiles.find(name);
    if (it != args.outputFiles.end()) {
      std::ofstream out(it->second, std::ios::binary);
      out.write(static_cast<const char *>(t->data), t->bytes());
      if (!out)
        return error("cannot write '" + it->second + "'");
    }
  }
  return 0;
}

/// strata-run ARTIFACT --forward --eval DIR: the dataset's loss and
/// accuracy, printed and, with --log, appended as a JSON record.
int evaluateForwardOnDataset(const RunArguments &args,
                             const Artifact &artifact, Executor &executor) {
  if (!artifact.getPlan().has_training())
    return error("--eval needs a training artifact (its loss names the "
                 "logits and labels); '" + args.artifactDir +
                 "' was compiled with --forward-only");
  std::unique_ptr<Evaluation> evaluation;
  EvalResult result;
  if (Status s = Evaluation::open(executor, artifact.getPlan().training(),
                                  args.train.evalData, evaluation);
      !s)
    return error(s.message());
  if (Status s = evaluation->run(result); !s)
    return error(s.message());
  std::cout << describeEval(result, args.train.evalData) << "\n";
  if (!args.train.logPath.empty()) {
    std::ofstream log(args.train.logPath, std::ios::app);
    log << evalRecord(result, args.train.evalData, 0) << "\n";
    if (!log)
      return error("cannot write the log '" + args.train.logPath + "'");
  }
  return 0;
}

/// strata-run ARTIFACT --forward: evaluates the forward program once on
/// `backend` and prints each output.
int evaluateForward(const RunArguments &args, const std::string &backend) {
  if (args.intHigh < 1)
    return error("--int-high must be at least 1");
  const std::string &artifactDir = args.artifactDir;
  std::unique_ptr<Artifact> artifact;
  if (Status s = Artifact::load(artifactDir, artifact); !s)
    return error(s.message());
  if (Status s = artifact->checkRunnable(); !s)
    return error(s.message());
  if (artifact->getPlan().has_topology() &&
      artifact->getPlan().topology().world() > 1)
    return error("--forward evaluates a one-rank artifact; '" + artifactDir +
                 "' is sharded over " +
                 std::to_string(artifact->getPlan().topology().world()) +
                 " ranks (compile without --world to evaluate)");
  std::shared_ptr<Device> device;
  if (Status s = createDevice(backend, 0, args.train.tf32,
                              args.train.timeoutSeconds, device);
      !s)
    return error(s.message());
  std::unique_ptr<Executor> executor;
  if (Status s = Executor::create(*artifact, device, executor,
                                  ExecutorOptions());
      !s)
    return error(s.message());

  if (args.train.resume) {
    if (args.train.checkpointDir.empty())
      return error("--resume needs --checkpoint-dir DIR");
    uint64_t step = 0;
    if (Status s =
            loadCheckpoint(args.train.checkpointDir,
                           CheckpointIdentity::of(artifact->getPlan(), 0),
                           *executor, step);
        !s)
      return error(s.message());
  }
  if (!args.train.evalData.empty())
    return evaluateForwardOnDataset(args, *artifact, *executor);
  if (int code = fillForwardInputs(args, *executor))
    return code;
  if (Status s = executor->run(); !s)
    return error(s.message());
  return writeForwardOutputs(args, *executor);
}

} // namespace

int runMain(int argc, char **argv) {
  RunArguments args;
  if (std::optional<int> code = parseArguments(argc, argv, args))
    return *code;
  if (args.artifactDir.empty())
    return error("no artifact given (see --help)");
  std::string chosen, note;
  if (Status s = chooseBackend(args.backend, chosen, note); !s)
    return error(s.message());
  if (!note.empty() && !args.train.quiet)
    std::cerr << "strata-run: note: " << note << "\n";
  args.train.backend = chosen;
  if (!args.forward) {
    args.train.artifactDir = args.artifactDir;
    return runtime::train(args.train);
  }
  return evaluateForward(args, chosen);
}

} // namespace strata::runtime

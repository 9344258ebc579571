//===- FuzzSeeds.cpp - Writes the fuzz targets' seed inputs ---------------===//
//
// How the committed seeds in corpus/ were made (corpus/README.md):
//
//   strata-fuzz-seeds onnx IN.onnx|IN.onnxtxt OUT.onnx
//       IN (binary, or ONNX text with `//` lines dropped, as the lit tests'
//       models are written) as binary ONNX, with every initializer over 64 bytes moved to external data
//       (weights.bin, offset 0) and doc strings dropped: the same graph in
//       a few KB. The importer reads external data only for constants, so
//       the model still imports (fuzz-onnx-import's folder has weights.bin).
//   strata-fuzz-seeds external-data OUTDIR
//       fuzz-external-data inputs: each location the model folder offers,
//       with and without offset and length.
//   strata-fuzz-seeds checkpoint OUTDIR
//       fuzz-checkpoint-load inputs: the linear classifier's checkpoint as
//       saveCheckpoint writes it, before and after one training step.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "TestArtifacts.h"

#include "strata/Runtime/Executor.h"
#include "strata/Runtime/Training.h"

#include "onnx/defs/parser.h"
#include "onnx/onnx_pb.h"

#include <iostream>
#include <sstream>

using namespace strata;
using namespace strata::runtime;

namespace {

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "strata-fuzz-seeds: cannot read '" << path << "'\n";
    std::exit(1);
  }
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

/// A 2-byte length, `head`, then `tail`: the split both file targets use.
std::string pack(const std::string &head, const std::string &tail) {
  if (head.size() > 0xFFFF) {
    std::cerr << "strata-fuzz-seeds: a head of " << head.size()
              << " bytes does not fit\n";
    std::exit(1);
  }
  std::string out = {char(head.size() & 0xFF), char(head.size() >> 8)};
  return out + head + tail;
}

int shrinkOnnx(const std::string &in, const std::string &out) {
  onnx::ModelProto model;
  std::string bytes = readAll(in);
  if (in.size() > 8 && in.compare(in.size() - 8, 8, ".onnxtxt") == 0) {
    std::string text, line;
    std::istringstream lines(bytes);
    while (std::getline(lines, line))
      if (line.find_first_not_of(" \t") == std::string::npos ||
          line.compare(line.find_first_not_of(" \t"), 2, "//") != 0)
        text += line + "\n";
    onnx::OnnxParser parser(text.c_str());
    if (!parser.Parse(model).IsOK()) {
      std::cerr << "strata-fuzz-seeds: cannot parse '" << in << "'\n";
      return 1;
    }
  } else if (!model.ParseFromString(bytes)) {
    std::cerr << "strata-fuzz-seeds: '" << in << "' is not ONNX\n";
    return 1;
  }
  model.clear_doc_string();
  auto &graph = *model.mutable_graph();
  graph.clear_doc_string();
  for (auto &node : *graph.mutable_node())
    node.clear_doc_string();
  for (auto &t : *graph.mutable_initializer()) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      for (auto &entry : *t.mutable_external_data())
        if (entry.key() == "location")
          entry.set_value("weights.bin");
        else if (entry.key() == "offset")
          entry.set_value("0");
      continue;
    }
    if (t.ByteSizeLong() <= 64 + t.name().size())
      continue;
    std::string length = std::to_string(t.raw_data().size());
    if (!t.has_raw_data())
      continue; // typed fields: small enough in the models we seed from
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char *key, const std::string &value) {
      auto *entry = t.add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    };
    add("location", "weights.bin");
    add("offset", "0");
    add("length", length);
  }
  fuzz::writeFile(out, model.SerializeAsString());
  return 0;
}

std::string tensorWith(int32_t type, std::vector<int64_t> dims,
                       std::vector<std::pair<std::string, std::string>> entries) {
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(type);
  for (int64_t d : dims)
    t.add_dims(d);
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto &[key, value] : entries) {
    auto *entry = t.add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  }
  return t.SerializeAsString();
}

int externalDataSeeds(const std::string &dir) {
  std::string data;
  for (int i = 0; i < 64; ++i)
    data += char(i * 7);
  const int32_t f32 = onnx::TensorProto::FLOAT, none = onnx::TensorProto::UNDEFINED;
  struct Seed {
    const char *name;
    std::string tensor;
  } seeds[] = {
      {"whole", tensorWith(f32, {4, 4}, {{"location", "data.bin"}})},
      {"offset-length",
       tensorWith(f32, {2, 2},
                  {{"location", "data.bin"}, {"offset", "16"}, {"length", "16"}})},
      {"untyped-rest", tensorWith(none, {}, {{"location", "data.bin"}, {"offset", "8"}})},
      {"untyped-length",
       tensorWith(none, {}, {{"location", "sub/data.bin"}, {"length", "5"}})},
      {"inside-link", tensorWith(onnx::TensorProto::INT64, {8}, {{"location", "in"}})},
      {"outside-link", tensorWith(f32, {1}, {{"location", "out"}})},
      {"parent", tensorWith(f32, {1}, {{"location", "../outside.bin"}})},
      {"absolute", tensorWith(f32, {1}, {{"location", "/etc/hostname"}})},
      {"fifo", tensorWith(f32, {1}, {{"location", "fifo"}})},
      {"folder", tensorWith(f32, {1}, {{"location", "dir"}})},
      {"loop", tensorWith(f32, {1}, {{"location", "loop"}})},
      {"past-end",
       tensorWith(onnx::TensorProto::INT8, {8}, {{"location", "data.bin"}, {"offset", "60"}})},
  };
  for (const Seed &s : seeds)
    fuzz::writeFile(dir + "/" + s.name, pack(s.tensor, data));
  return 0;
}

int checkpointSeeds(const std::string &dir) {
  fuzz::ScratchFolder scratch("strata-fuzz-seeds");
  std::string artifactDir = scratch / "artifact";
  std::filesystem::create_directories(artifactDir);
  runtime::testing::writeLinearClassifier(artifactDir);
  std::unique_ptr<Artifact> artifact;
  std::unique_ptr<Executor> executor;
  if (Status s = Artifact::load(artifactDir, artifact); !s ||
      !(s = Executor::create(*artifact, getCpuKernels(), executor))) {
    std::cerr << "strata-fuzz-seeds: " << s.message() << "\n";
    return 1;
  }
  std::string fingerprint = artifact->getPlan().fingerprint();
  for (uint64_t step : {1, 2}) {
    std::string checkpoints = scratch / ("checkpoints-" + std::to_string(step));
    if (step == 2) {
      // One optimizer step, so the state is not all initial values.
      TensorView *x = executor->findInput("x");
      for (int64_t i = 0; i < x->numel(); ++i)
        x->as<float>()[i] = 0.25f * float(i % 5) - 0.5f;
      TensorView *labels = executor->findInput("labels");
      for (int64_t i = 0; i < labels->numel(); ++i)
        labels->as<int64_t>()[i] = i % 5;
      Status s = executor->run("micro_step", 1);
      executor->findInput("strata.lr")->as<double>()[0] = 0.1;
      executor->findInput("strata.step")->as<int64_t>()[0] = 1;
      if (s)
        s = executor->run("optimizer_step");
      if (!s) {
        std::cerr << "strata-fuzz-seeds: " << s.message() << "\n";
        return 1;
      }
    }
    if (Status s = saveCheckpoint(checkpoints, fingerprint, 1, 5, *executor);
        !s) {
      std::cerr << "strata-fuzz-seeds: " << s.message() << "\n";
      return 1;
    }
    std::string folder = checkpoints + "/step-00000001";
    fuzz::writeFile(dir + "/linear-classifier-" + std::to_string(step),
                    pack(readAll(folder + "/index.json"),
                         readAll(folder + "/state.bin")));
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "onnx" && argc == 4)
    return shrinkOnnx(argv[2], argv[3]);
  if (mode == "external-data" && argc == 3)
    return externalDataSeeds(argv[2]);
  if (mode == "checkpoint" && argc == 3)
    return checkpointSeeds(argv[2]);
  std::cerr << "usage: strata-fuzz-seeds onnx IN.onnx OUT.onnx\n"
               "       strata-fuzz-seeds external-data OUTDIR\n"
               "       strata-fuzz-seeds checkpoint OUTDIR\n";
  return 2;
}

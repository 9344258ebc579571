//===- FuzzOnnxImport.cpp - libFuzzer target: the ONNX importer -----------===//
//
// Bytes -> onnx::ModelProto::ParseFromArray -> importOnnxModel: everything
// Strata does with a binary model once protobuf has parsed it (opset and op
// checks, local functions, Strata's structural checks, ONNX's checker and
// shape inference up to opset 17, initializer classification,
// constants, external data, every op handler, the verifier). The importer
// must answer every input with a module or one error, never a crash, a
// leak or undefined behaviour.
//
// The model's folder holds weights.bin (4 MiB of a fixed pattern), which
// the seeds' external initializers name; see corpus/README.md.
//
// A custom mutator parses the input and changes the model field by field
// (op types, attributes, dims, element types, external-data entries,
// opsets, value names) half of the time, and mutates raw bytes otherwise.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "strata/Frontend/OnnxImporter.h"

#include "mlir/IR/MLIRContext.h"
#include "onnx/onnx_pb.h"

#include <cstring>
#include <limits>
#include <memory>
#include <random>

using namespace strata;

extern "C" size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);

namespace {

fuzz::ScratchFolder *modelFolder;
std::unique_ptr<mlir::MLIRContext> context;
unsigned contextUses = 0;
std::vector<std::string> supportedOps;

/// Types and attributes are uniqued in the context and live as long as it
/// does; a fresh one every so often keeps memory flat over millions of
/// inputs.
constexpr unsigned kInputsPerContext = 1000;

mlir::MLIRContext &getContext() {
  if (!context || ++contextUses > kInputsPerContext) {
    context = std::make_unique<mlir::MLIRContext>(
        mlir::MLIRContext::Threading::DISABLED);
    contextUses = 1;
  }
  return *context;
}

//===----------------------------------------------------------------------===//
// The structure-aware mutator
//===----------------------------------------------------------------------===//

using Random = std::minstd_rand;

size_t pick(Random &rng, size_t n) { return n ? rng() % n : 0; }

int64_t interestingInt(Random &rng) {
  static const int64_t values[] = {0,
                                   1,
                                   2,
                                   3,
                                   4,
                                   -1,
                                   -2,
                                   7,
                                   64,
                                   255,
                                   65536,
                                   std::numeric_limits<int32_t>::max(),
                                   int64_t(1) << 31,
                                   int64_t(1) << 32,
                                   int64_t(1) << 40,
                                   int64_t(1) << 62,
                                   std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min()};
  if (rng() % 4 == 0)
    return int64_t(rng() % 16) - 4;
  return values[pick(rng, std::size(values))];
}

std::string interestingCount(Random &rng) {
  static const char *values[] = {"0", "1", "4", "16", "4194304", "4194305",
                                 "18446744073709551615", "-1", "1e3", "",
                                 "0x10", "9999999999999999999"};
  return values[pick(rng, std::size(values))];
}

std::string interestingLocation(Random &rng) {
  static const char *values[] = {"weights.bin", "./weights.bin", "missing.bin",
                                 "../weights.bin", "/etc/hostname", ".", "",
                                 "sub/../weights.bin"};
  return values[pick(rng, std::size(values))];
}

/// Every value name the graph mentions.
std::vector<std::string> valueNames(const onnx::GraphProto &graph) {
  std::vector<std::string> names;
  for (const auto &v : graph.input())
    names.push_back(v.name());
  for (const auto &t : graph.initializer())
    names.push_back(t.name());
  for (const auto &n : graph.node())
    for (const auto &o : n.output())
      names.push_back(o);
  return names;
}

void mutateAttribute(onnx::AttributeProto &attr, Random &rng) {
  switch (rng() % 6) {
  case 0:
    attr.set_i(interestingInt(rng));
    attr.set_type(onnx::AttributeProto::INT);
    break;
  case 1: {
    attr.clear_ints();
    size_t n = rng() % 5;
    for (size_t i = 0; i < n; ++i)
      attr.add_ints(interestingInt(rng));
    attr.set_type(onnx::AttributeProto::INTS);
    break;
  }
  case 2:
    attr.set_f(rng() % 2 ? std::numeric_limits<float>::quiet_NaN()
                         : float(interestingInt(rng)));
    attr.set_type(onnx::AttributeProto::FLOAT);
    break;
  case 3:
    attr.set_type(onnx::AttributeProto::AttributeType(rng() % 14));
    break;
  case 4: {
    static const char *names[] = {"axis", "axes", "perm", "keepdims",
                                  "transA", "transB", "alpha", "beta",
                                  "epsilon", "to", "value", "mode",
                                  "pads", "strides", "kernel_shape",
                                  "dilations", "group", "split"};
    attr.set_name(names[pick(rng, std::size(names))]);
    break;
  }
  default:
    if (attr.ints_size())
      attr.set_ints(int(pick(rng, attr.ints_size())), interestingInt(rng));
    else
      attr.set_i(int64_t(uint64_t(attr.i()) + rng() % 5 - 2)); // wraps
    break;
  }
}

void mutateTensor(onnx::TensorProto &t, Random &rng) {
  switch (rng() % 6) {
  case 0:
    if (t.dims_size())
      t.set_dims(int(pick(rng, t.dims_size())), interestingInt(rng));
    else
      t.add_dims(interestingInt(rng));
    break;
  case 1:
    t.set_data_type(int32_t(rng() % 17));
    break;
  case 2: {
    // Into an external initializer (or its entries changed).
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    t.clear_raw_data();
    t.clear_external_data();
    auto *location = t.add_external_data();
    location->set_key("location");
    location->set_value(interestingLocation(rng));
    if (rng() % 2) {
      auto *offset = t.add_external_data();
      offset->set_key("offset");
      offset->set_value(interestingCount(rng));
    }
    if (rng() % 2) {
      auto *length = t.add_external_data();
      length->set_key("length");
      length->set_value(interestingCount(rng));
    }
    break;
  }
  case 3:
    if (t.has_raw_data())
      t.mutable_raw_data()->resize(pick(rng, t.raw_data().size() + 8));
    break;
  case 4:
    t.clear_dims();
    for (size_t i = 0, n = rng() % 4; i < n; ++i)
      t.add_dims(int64_t(rng() % 6));
    break;
  default:
    t.set_data_location(onnx::TensorProto::DEFAULT);
    t.clear_external_data();
    break;
  }
}

void mutateModel(onnx::ModelProto &model, Random &rng) {
  onnx::GraphProto &graph = *model.mutable_graph();
  std::vector<std::string> names = valueNames(graph);
  switch (rng() % 10) {
  case 0: { // an op type
    if (!graph.node_size() || supportedOps.empty())
      return;
    graph.mutable_node(int(pick(rng, graph.node_size())))
        ->set_op_type(supportedOps[pick(rng, supportedOps.size())]);
    break;
  }
  case 1: { // a node input rewired, added or dropped
    if (!graph.node_size() || names.empty())
      return;
    onnx::NodeProto &node = *graph.mutable_node(int(pick(rng, graph.node_size())));
    unsigned what = rng() % 4;
    if (what == 0)
      node.add_input(names[pick(rng, names.size())]);
    else if (what == 1 && node.input_size())
      node.mutable_input()->RemoveLast();
    else if (what == 2 && node.input_size())
      node.set_input(int(pick(rng, node.input_size())), "");
    else if (node.input_size())
      node.set_input(int(pick(rng, node.input_size())),
                     names[pick(rng, names.size())]);
    break;
  }
  case 2: { // an attribute
    if (!graph.node_size())
      return;
    onnx::NodeProto &node = *graph.mutable_node(int(pick(rng, graph.node_size())));
    if (!node.attribute_size() || rng() % 4 == 0) {
      onnx::AttributeProto *attr = node.add_attribute();
      attr->set_name("axis");
      mutateAttribute(*attr, rng);
    } else {
      mutateAttribute(*node.mutable_attribute(int(pick(rng, node.attribute_size()))),
                      rng);
    }
    break;
  }
  case 3: { // an input's dims or element type
    if (!graph.input_size())
      return;
    auto &type = *graph.mutable_input(int(pick(rng, graph.input_size())))
                      ->mutable_type()
                      ->mutable_tensor_type();
    if (rng() % 4 == 0) {
      type.set_elem_type(int32_t(rng() % 17));
      break;
    }
    auto &shape = *type.mutable_shape();
    if (!shape.dim_size() || rng() % 5 == 0) {
      shape.add_dim()->set_dim_value(interestingInt(rng));
      break;
    }
    auto &dim = *shape.mutable_dim(int(pick(rng, shape.dim_size())));
    if (rng() % 4 == 0)
      dim.set_dim_param("batch");
    else
      dim.set_dim_value(interestingInt(rng));
    break;
  }
  case 4:
  case 5: { // an initializer
    if (!graph.initializer_size())
      return;
    mutateTensor(*graph.mutable_initializer(int(pick(rng, graph.initializer_size()))),
                 rng);
    break;
  }
  case 6: { // the default opset
    for (auto &entry : *model.mutable_opset_import())
      if (entry.domain().empty() || entry.domain() == "ai.onnx")
        entry.set_version(int64_t(rng() % 24)); // past both ends of 13..21
    break;
  }
  case 7: { // a node dropped or duplicated
    if (!graph.node_size())
      return;
    int i = int(pick(rng, graph.node_size()));
    if (rng() % 2) {
      graph.mutable_node()->DeleteSubrange(i, 1);
    } else {
      onnx::NodeProto copy = graph.node(i);
      *graph.add_node() = copy;
    }
    break;
  }
  case 8: { // an output renamed or dropped
    if (!graph.output_size())
      return;
    int i = int(pick(rng, graph.output_size()));
    if (rng() % 3 == 0)
      graph.mutable_output()->DeleteSubrange(i, 1);
    else if (!names.empty())
      graph.mutable_output(i)->set_name(names[pick(rng, names.size())]);
    break;
  }
  default: { // a Constant node's value, or a tensor attribute's
    for (auto &node : *graph.mutable_node())
      for (auto &attr : *node.mutable_attribute())
        if (attr.has_t() && rng() % 3 == 0) {
          mutateTensor(*attr.mutable_t(), rng);
          return;
        }
    break;
  }
  }
}

} // namespace

/// LLVM's BumpPtrAllocator poisons the unused part of each slab with ASan's
/// user poisoning when the code that includes it is built with ASan, and
/// unpoisons what it hands out. The allocators here are shared between this
/// instrumented code and the uninstrumented libMLIR.so, whose allocations
/// from a slab poisoned here stay poisoned: a false use-after-poison. Only
/// the user poisoning is ignored; every other ASan check stays.
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
  modelFolder = new fuzz::ScratchFolder("strata-fuzz-onnx");
  std::string pattern(4 << 20, '\0');
  for (size_t i = 0; i < pattern.size(); ++i)
    pattern[i] = char((i * 31) >> 3);
  fuzz::writeFile(*modelFolder / "weights.bin", pattern);
  supportedOps = frontend::getSupportedOnnxOps();
  std::atexit([] { delete modelFolder; });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // As importOnnxFile reads a binary model.
  onnx::ModelProto model;
  if (size == 0 || !model.ParseFromArray(data, int(size)) || !model.has_graph())
    return -1; // not worth keeping in the corpus
  auto module = frontend::importOnnxModel(getContext(), model, modelFolder->path());
  if (!module)
    llvm::consumeError(module.takeError());
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned int seed) {
  Random rng(seed);
  onnx::ModelProto model;
  if (rng() % 2 == 0 || size == 0 || !model.ParseFromArray(data, int(size)) ||
      !model.has_graph())
    return LLVMFuzzerMutate(data, size, maxSize);
  for (unsigned i = 0, n = 1 + rng() % 3; i < n; ++i)
    mutateModel(model, rng);
  std::string out;
  if (!model.SerializeToString(&out) || out.size() > maxSize)
    return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

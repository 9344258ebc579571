//===- GraphDialectTest.cpp - Graph dialect type inference and folding ----===//

#include "strata/Dialect/Graph/IR/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/MLIRContext.h"

#include "gtest/gtest.h"

using namespace mlir;
using namespace strata;

namespace {

class GraphDialectTest : public ::testing::Test {
protected:
  GraphDialectTest() : builder(&context) {
    context.loadDialect<graph::GraphDialect, func::FuncDialect>();
    module = ModuleOp::create(builder.getUnknownLoc());
    builder.setInsertionPointToEnd(module->getBody());
  }

  Value constantI64(ArrayRef<int64_t> values) {
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                      builder.getI64Type());
    return builder.create<graph::ConstantOp>(
        builder.getUnknownLoc(), DenseElementsAttr::get(type, values));
  }

  static SmallVector<int64_t> ints(Value v) {
    DenseElementsAttr attr;
    EXPECT_TRUE(matchPattern(v, m_Constant(&attr)));
    SmallVector<int64_t> out;
    if (attr)
      for (const APInt &i : attr.getValues<APInt>())
        out.push_back(i.getSExtValue());
    return out;
  }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
};

TEST_F(GraphDialectTest, BroadcastInference) {
  EXPECT_EQ(graph::broadcastShapes({8, 1, 64}, {4, 1}),
            (SmallVector<int64_t>{8, 4, 64}));
  EXPECT_FALSE(graph::broadcastShapes({3}, {4}).has_value());
}

TEST_F(GraphDialectTest, ShapeArithmeticFolds) {
  Location loc = builder.getUnknownLoc();
  Value a = constantI64({2, 3, 4});
  Value b = constantI64({10});
  Value sum = builder.createOrFold<graph::AddOp>(loc, a, b);
  EXPECT_EQ(ints(sum), (SmallVector<int64_t>{12, 13, 14}));
  Value idx = builder.create<graph::ConstantOp>(
      loc, DenseElementsAttr::get(RankedTensorType::get({}, builder.getI64Type()),
                                  int64_t(-1)));
  Value last = builder.createOrFold<graph::GatherOp>(loc, a, idx, 0);
  EXPECT_EQ(ints(last), (SmallVector<int64_t>{4}));
  Value cat = builder.createOrFold<graph::ConcatOp>(loc, ValueRange{a, b}, 0);
  EXPECT_EQ(ints(cat), (SmallVector<int64_t>{2, 3, 4, 10}));
  Value sliced = builder.createOrFold<graph::SliceOp>(
      loc, cat, ArrayRef<int64_t>{3}, ArrayRef<int64_t>{2},
      ArrayRef<int64_t>{-2});
  EXPECT_EQ(ints(sliced), (SmallVector<int64_t>{10, 3}));
}

TEST_F(GraphDialectTest, CausalMaskFoldsFromTrilu) {
  Location loc = builder.getUnknownLoc();
  auto type = RankedTensorType::get({3, 3}, builder.getF32Type());
  Value ones = builder.create<graph::ConstantOp>(
      loc, DenseElementsAttr::get(type, 1.0f));
  Value tril = builder.createOrFold<graph::TriluOp>(loc, ones, false, 0);
  Value zero = builder.create<graph::ConstantOp>(
      loc, DenseElementsAttr::get(RankedTensorType::get({}, builder.getF32Type()),
                                  0.0f));
  Value masked = builder.createOrFold<graph::EqualOp>(loc, tril, zero);
  DenseElementsAttr attr;
  ASSERT_TRUE(matchPattern(masked, m_Constant(&attr)));
  SmallVector<bool> values(attr.getValues<bool>());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(values[i * 3 + j], j > i) << i << "," << j;
}

} // namespace

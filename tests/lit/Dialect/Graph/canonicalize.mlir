// RUN: strata-opt %s -canonicalize -split-input-file | FileCheck %s

// Constant folding and the canonicalization patterns of the graph dialect.

// CHECK-LABEL: func.func @add_int_broadcast
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<{{\[}}[11, 21, 31], [12, 22, 32]]> : tensor<2x3xi64>
// CHECK-NEXT: return %[[C]]
func.func @add_int_broadcast() -> tensor<2x3xi64> {
  %a = graph.constant dense<[[1], [2]]> : tensor<2x1xi64>
  %b = graph.constant dense<[10, 20, 30]> : tensor<3xi64>
  %0 = graph.add %a, %b : tensor<2x1xi64>, tensor<3xi64> -> tensor<2x3xi64>
  return %0 : tensor<2x3xi64>
}

// -----

// CHECK-LABEL: func.func @add_float_scalar
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<[2.000000e+00, -1.500000e+00, 7.500000e-01]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]]
func.func @add_float_scalar() -> tensor<3xf32> {
  %a = graph.constant dense<[1.5, -2.0, 0.25]> : tensor<3xf32>
  %b = graph.constant dense<0.5> : tensor<f32>
  %0 = graph.add %a, %b : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @add_not_constant
// CHECK: %[[R:.*]] = graph.add %{{.*}}, %{{.*}} : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
// CHECK-NEXT: return %[[R]]
func.func @add_not_constant(%x: tensor<3xf32>) -> tensor<3xf32> {
  %b = graph.constant dense<0.5> : tensor<f32>
  %0 = graph.add %x, %b : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @sub_broadcast
// CHECK-NEXT: %[[I:.*]] = graph.constant dense<{{\[}}[4, 6], [-5, -3]]> : tensor<2x2xi32>
// CHECK-NEXT: %[[F:.*]] = graph.constant dense<[7.500000e-01, 1.750000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[I]], %[[F]]
func.func @sub_broadcast() -> (tensor<2x2xi32>, tensor<2xf32>) {
  %a = graph.constant dense<[5, 7]> : tensor<2xi32>
  %b = graph.constant dense<[[1], [10]]> : tensor<2x1xi32>
  %0 = graph.sub %a, %b : tensor<2xi32>, tensor<2x1xi32> -> tensor<2x2xi32>
  %c = graph.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %d = graph.constant dense<0.25> : tensor<2xf32>
  %1 = graph.sub %c, %d : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %0, %1 : tensor<2x2xi32>, tensor<2xf32>
}

// -----

// CHECK-LABEL: func.func @mul
// CHECK-NEXT: %[[I:.*]] = graph.constant dense<[-4, 6, -8]> : tensor<3xi64>
// CHECK-NEXT: %[[F:.*]] = graph.constant dense<{{\[}}[5.000000e-01, 1.000000e+00], [3.000000e+00, 6.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT: return %[[I]], %[[F]]
func.func @mul() -> (tensor<3xi64>, tensor<2x2xf32>) {
  %a = graph.constant dense<[2, -3, 4]> : tensor<3xi64>
  %b = graph.constant dense<-2> : tensor<i64>
  %0 = graph.mul %a, %b : tensor<3xi64>, tensor<i64> -> tensor<3xi64>
  %c = graph.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
  %d = graph.constant dense<[[0.5], [3.0]]> : tensor<2x1xf32>
  %1 = graph.mul %c, %d : tensor<1x2xf32>, tensor<2x1xf32> -> tensor<2x2xf32>
  return %0, %1 : tensor<3xi64>, tensor<2x2xf32>
}

// -----

// Integer division truncates toward zero.
// CHECK-LABEL: func.func @div
// CHECK-NEXT: %[[I:.*]] = graph.constant dense<[3, -3, -3, 3]> : tensor<4xi64>
// CHECK-NEXT: %[[F:.*]] = graph.constant dense<[2.500000e-01, -7.500000e-01]> : tensor<2xf32>
// CHECK-NEXT: return %[[I]], %[[F]]
func.func @div() -> (tensor<4xi64>, tensor<2xf32>) {
  %a = graph.constant dense<[7, -7, 7, -7]> : tensor<4xi64>
  %b = graph.constant dense<[2, 2, -2, -2]> : tensor<4xi64>
  %0 = graph.div %a, %b : tensor<4xi64>, tensor<4xi64> -> tensor<4xi64>
  %c = graph.constant dense<[1.0, -3.0]> : tensor<2xf32>
  %d = graph.constant dense<4.0> : tensor<f32>
  %1 = graph.div %c, %d : tensor<2xf32>, tensor<f32> -> tensor<2xf32>
  return %0, %1 : tensor<4xi64>, tensor<2xf32>
}

// -----

// An integer division by zero is left to run time.
// CHECK-LABEL: func.func @div_int_by_zero
// CHECK: %[[R:.*]] = graph.div
// CHECK-NEXT: return %[[R]]
func.func @div_int_by_zero() -> tensor<2xi64> {
  %a = graph.constant dense<[4, 6]> : tensor<2xi64>
  %b = graph.constant dense<[2, 0]> : tensor<2xi64>
  %0 = graph.div %a, %b : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// -----

// CHECK-LABEL: func.func @max_min_pow
// CHECK-NEXT: %[[MAX:.*]] = graph.constant dense<[4, 5, -3]> : tensor<3xi64>
// CHECK-NEXT: %[[MIN:.*]] = graph.constant dense<[1.000000e+00, 2.000000e+00, -3.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: %[[POW:.*]] = graph.constant dense<[4.000000e+00, 9.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[MAX]], %[[MIN]], %[[POW]]
func.func @max_min_pow() -> (tensor<3xi64>, tensor<3xf32>, tensor<2xf32>) {
  %a = graph.constant dense<[1, 5, -3]> : tensor<3xi64>
  %b = graph.constant dense<[4, 2, -7]> : tensor<3xi64>
  %0 = graph.max %a, %b : tensor<3xi64>, tensor<3xi64> -> tensor<3xi64>
  %c = graph.constant dense<[1.0, 5.0, -3.0]> : tensor<3xf32>
  %d = graph.constant dense<2.0> : tensor<f32>
  %1 = graph.min %c, %d : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %e = graph.constant dense<[2.0, 3.0]> : tensor<2xf32>
  %2 = graph.pow %e, %d : tensor<2xf32>, tensor<f32> -> tensor<2xf32>
  return %0, %1, %2 : tensor<3xi64>, tensor<3xf32>, tensor<2xf32>
}

// -----

// Comparisons broadcast and yield i1; NaN compares unequal and unordered.
// CHECK-LABEL: func.func @compare
// CHECK-NEXT: %[[EQ:.*]] = graph.constant dense<{{\[}}[false, true, false], [false, false, true]]> : tensor<2x3xi1>
// CHECK-NEXT: %[[LT:.*]] = graph.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-NEXT: %[[GT:.*]] = graph.constant dense<false> : tensor<3xi1>
// CHECK-NEXT: %[[SELF:.*]] = graph.constant dense<[true, true, false]> : tensor<3xi1>
// CHECK-NEXT: return %[[EQ]], %[[LT]], %[[GT]], %[[SELF]]
func.func @compare() -> (tensor<2x3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>) {
  %a = graph.constant dense<[1, 2, 3]> : tensor<3xi64>
  %b = graph.constant dense<[[2], [3]]> : tensor<2x1xi64>
  %0 = graph.equal %a, %b : tensor<3xi64>, tensor<2x1xi64> -> tensor<2x3xi1>
  %c = graph.constant dense<[1.0, 2.0, 0x7FC00000]> : tensor<3xf32>
  %d = graph.constant dense<2.0> : tensor<f32>
  %1 = graph.less %c, %d : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
  %2 = graph.greater %c, %d : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
  %3 = graph.equal %c, %c : tensor<3xf32>, tensor<3xf32> -> tensor<3xi1>
  return %0, %1, %2, %3 : tensor<2x3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>
}

// -----

// CHECK-LABEL: func.func @logic
// CHECK-NEXT: %[[AND:.*]] = graph.constant dense<[true, false, false, false]> : tensor<4xi1>
// CHECK-NEXT: %[[OR:.*]] = graph.constant dense<[true, true, true, false]> : tensor<4xi1>
// CHECK-NEXT: %[[NOT:.*]] = graph.constant dense<[false, false, true, true]> : tensor<4xi1>
// CHECK-NEXT: return %[[AND]], %[[OR]], %[[NOT]]
func.func @logic() -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %a = graph.constant dense<[true, true, false, false]> : tensor<4xi1>
  %b = graph.constant dense<[true, false, true, false]> : tensor<4xi1>
  %0 = graph.and %a, %b : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>
  %1 = graph.or %a, %b : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>
  %2 = graph.not %a : tensor<4xi1>
  return %0, %1, %2 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

// -----

// A splat condition selects a branch of the result type.
// CHECK-LABEL: func.func @where_splat_condition
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<3xf32>, %[[Y:[a-z0-9]+]]: tensor<3xf32>)
// CHECK-NEXT: return %[[X]], %[[Y]]
func.func @where_splat_condition(%x: tensor<3xf32>, %y: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %t = graph.constant dense<true> : tensor<i1>
  %f = graph.constant dense<false> : tensor<3xi1>
  %0 = graph.where %t, %x, %y : tensor<i1>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %1 = graph.where %f, %x, %y : tensor<3xi1>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %0, %1 : tensor<3xf32>, tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @where_constants
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<{{\[}}[-1.000000e+00, -1.000000e+00], [1.000000e+00, 2.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT: return %[[C]]
func.func @where_constants() -> tensor<2x2xf32> {
  %c = graph.constant dense<[[false], [true]]> : tensor<2x1xi1>
  %a = graph.constant dense<[[1.0, 2.0]]> : tensor<1x2xf32>
  %b = graph.constant dense<-1.0> : tensor<f32>
  %0 = graph.where %c, %a, %b : tensor<2x1xi1>, tensor<1x2xf32>, tensor<f32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

// A runtime condition, or a splat condition whose branch would need a
// broadcast, stays.
// CHECK-LABEL: func.func @where_not_foldable
// CHECK: %[[A:.*]] = graph.where
// CHECK: %[[B:.*]] = graph.where {{.*}} -> tensor<2x3xf32>
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @where_not_foldable(%c: tensor<3xi1>, %x: tensor<3xf32>) -> (tensor<3xf32>, tensor<2x3xf32>) {
  %b = graph.constant dense<0.0> : tensor<f32>
  %0 = graph.where %c, %x, %b : tensor<3xi1>, tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %t = graph.constant dense<true> : tensor<2x1xi1>
  %1 = graph.where %t, %x, %b : tensor<2x1xi1>, tensor<3xf32>, tensor<f32> -> tensor<2x3xf32>
  return %0, %1 : tensor<3xf32>, tensor<2x3xf32>
}

// -----

// Float to int truncates toward zero; to i1 is x != 0; i1 is unsigned (true
// is 1); int to narrower int wraps; int to float rounds to nearest even
// (16777217 -> 16777216.0, printed as 0x4B800000).
// CHECK-LABEL: func.func @cast
// CHECK-NEXT: %[[A:.*]] = graph.constant dense<[-1, 2, 0, 0]> : tensor<4xi64>
// CHECK-NEXT: %[[B:.*]] = graph.constant dense<[true, true, false, false]> : tensor<4xi1>
// CHECK-NEXT: %[[C:.*]] = graph.constant dense<[1.000000e+00, 0.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: %[[D:.*]] = graph.constant dense<[1, 0]> : tensor<2xi64>
// CHECK-NEXT: %[[E:.*]] = graph.constant dense<[1, -1]> : tensor<2xi32>
// CHECK-NEXT: %[[F:.*]] = graph.constant dense<[-3.000000e+00, 0.000000e+00, 0x4B800000]> : tensor<3xf32>
// CHECK-NEXT: return %[[A]], %[[B]], %[[C]], %[[D]], %[[E]], %[[F]]
func.func @cast() -> (tensor<4xi64>, tensor<4xi1>, tensor<2xf32>, tensor<2xi64>, tensor<2xi32>, tensor<3xf32>) {
  %f = graph.constant dense<[-1.7, 2.9, 0.0, -0.0]> : tensor<4xf32>
  %0 = graph.cast %f : tensor<4xf32> to tensor<4xi64>
  %1 = graph.cast %f : tensor<4xf32> to tensor<4xi1>
  %b = graph.constant dense<[true, false]> : tensor<2xi1>
  %2 = graph.cast %b : tensor<2xi1> to tensor<2xf32>
  %3 = graph.cast %b : tensor<2xi1> to tensor<2xi64>
  %i = graph.constant dense<[4294967297, -1]> : tensor<2xi64>
  %4 = graph.cast %i : tensor<2xi64> to tensor<2xi32>
  %j = graph.constant dense<[-3, 0, 16777217]> : tensor<3xi64>
  %5 = graph.cast %j : tensor<3xi64> to tensor<3xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4xi64>, tensor<4xi1>, tensor<2xf32>, tensor<2xi64>, tensor<2xi32>, tensor<3xf32>
}

// -----

// A cast to the same type is its input; an out-of-range float to int is not
// folded.
// CHECK-LABEL: func.func @cast_not_foldable
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2xf32>)
// CHECK: %[[BIG:.*]] = graph.cast %{{.*}} : tensor<1xf32> to tensor<1xi32>
// CHECK-NEXT: return %[[X]], %[[BIG]]
func.func @cast_not_foldable(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<1xi32>) {
  %0 = graph.cast %x : tensor<2xf32> to tensor<2xf32>
  %big = graph.constant dense<1.0e10> : tensor<1xf32>
  %1 = graph.cast %big : tensor<1xf32> to tensor<1xi32>
  return %0, %1 : tensor<2xf32>, tensor<1xi32>
}

// -----

// CHECK-LABEL: func.func @unary
// CHECK-NEXT: %[[NEG:.*]] = graph.constant dense<[-4.000000e+00, -2.500000e-01]> : tensor<2xf32>
// CHECK-NEXT: %[[SQRT:.*]] = graph.constant dense<[2.000000e+00, 5.000000e-01]> : tensor<2xf32>
// CHECK-NEXT: %[[RECIP:.*]] = graph.constant dense<[2.500000e-01, 4.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: %[[EXP:.*]] = graph.constant dense<[1.000000e+00, 2.71828175]> : tensor<2xf32>
// CHECK-NEXT: return %[[NEG]], %[[SQRT]], %[[RECIP]], %[[EXP]]
func.func @unary() -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %a = graph.constant dense<[4.0, 0.25]> : tensor<2xf32>
  %0 = graph.neg %a : tensor<2xf32>
  %1 = graph.sqrt %a : tensor<2xf32>
  %2 = graph.reciprocal %a : tensor<2xf32>
  %z = graph.constant dense<[0.0, 1.0]> : tensor<2xf32>
  %3 = graph.exp %z : tensor<2xf32>
  return %0, %1, %2, %3 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// Data movement of constants folds: reshape, broadcast_to, transpose, a
// negative-stride slice, concat, gather with a negative index, trilu.
// CHECK-LABEL: func.func @shape_of_constants
// CHECK-NEXT: %[[RESHAPE:.*]] = graph.constant dense<{{\[}}[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
// CHECK-NEXT: %[[BCAST:.*]] = graph.constant dense<{{\[}}[7, 8, 9], [7, 8, 9]]> : tensor<2x3xi64>
// CHECK-NEXT: %[[TRANS:.*]] = graph.constant dense<{{\[}}[1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>
// CHECK-NEXT: %[[SLICE:.*]] = graph.constant dense<{{\[}}[6, 4], [3, 1]]> : tensor<2x2xi64>
// CHECK-NEXT: %[[CONCAT:.*]] = graph.constant dense<{{\[}}[1, 2, 3, 0, 0], [4, 5, 6, 1, 1]]> : tensor<2x5xi64>
// CHECK-NEXT: %[[GATHER:.*]] = graph.constant dense<{{\[}}[3, 1], [6, 4]]> : tensor<2x2xi64>
// CHECK-NEXT: %[[TRILU:.*]] = graph.constant dense<{{\[}}[1.000000e+00, 0.000000e+00, 0.000000e+00], [1.000000e+00, 1.000000e+00, 0.000000e+00], [1.000000e+00, 1.000000e+00, 1.000000e+00]]> : tensor<3x3xf32>
// CHECK-NEXT: return %[[RESHAPE]], %[[BCAST]], %[[TRANS]], %[[SLICE]], %[[CONCAT]], %[[GATHER]], %[[TRILU]]
func.func @shape_of_constants() -> (tensor<3x2xi64>, tensor<2x3xi64>, tensor<3x2xi64>, tensor<2x2xi64>, tensor<2x5xi64>, tensor<2x2xi64>, tensor<3x3xf32>) {
  %c = graph.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %0 = graph.reshape %c : tensor<2x3xi64> -> tensor<3x2xi64>
  %r = graph.constant dense<[7, 8, 9]> : tensor<3xi64>
  %1 = graph.broadcast_to %r : tensor<3xi64> -> tensor<2x3xi64>
  %2 = graph.transpose %c {perm = array<i64: 1, 0>} : (tensor<2x3xi64>) -> tensor<3x2xi64>
  %3 = graph.slice %c {offsets = array<i64: 1, 2>, sizes = array<i64: 2, 2>, strides = array<i64: -1, -2>} : (tensor<2x3xi64>) -> tensor<2x2xi64>
  %d = graph.constant dense<[[0, 0], [1, 1]]> : tensor<2x2xi64>
  %4 = graph.concat %c, %d {axis = 1 : i64} : (tensor<2x3xi64>, tensor<2x2xi64>) -> tensor<2x5xi64>
  %i = graph.constant dense<[-1, 0]> : tensor<2xi64>
  %5 = graph.gather %c, %i {axis = 1 : i64} : (tensor<2x3xi64>, tensor<2xi64>) -> tensor<2x2xi64>
  %m = graph.constant dense<1.0> : tensor<3x3xf32>
  %6 = graph.trilu %m {k = 0 : i64, upper = false} : tensor<3x3xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<3x2xi64>, tensor<2x3xi64>, tensor<3x2xi64>, tensor<2x2xi64>, tensor<2x5xi64>, tensor<2x2xi64>, tensor<3x3xf32>
}

// -----

// Identity reshape / transpose / slice / broadcast_to / single-input concat
// are their input.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identities(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = graph.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = graph.transpose %x {perm = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = graph.slice %x {offsets = array<i64: 0, 0>, sizes = array<i64: 2, 3>, strides = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = graph.broadcast_to %x : tensor<2x3xf32> -> tensor<2x3xf32>
  %4 = graph.concat %x {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Same type but not the identity: a reversing slice, a real reshape.
// CHECK-LABEL: func.func @not_identities
// CHECK: graph.slice
// CHECK: graph.reshape
func.func @not_identities(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3x2xf32>) {
  %0 = graph.slice %x {offsets = array<i64: 1, 0>, sizes = array<i64: 2, 3>, strides = array<i64: -1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = graph.reshape %x : tensor<2x3xf32> -> tensor<3x2xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<3x2xf32>
}

// -----

// reshape(reshape(x)) is one reshape; back to the input's type it is x.
// CHECK-LABEL: func.func @reshape_chain
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[R:.*]] = graph.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: return %[[R]], %[[X]]
func.func @reshape_chain(%x: tensor<2x3x4xf32>) -> (tensor<6x4xf32>, tensor<2x3x4xf32>) {
  %0 = graph.reshape %x : tensor<2x3x4xf32> -> tensor<24xf32>
  %1 = graph.reshape %0 : tensor<24xf32> -> tensor<6x4xf32>
  %2 = graph.reshape %1 : tensor<6x4xf32> -> tensor<2x3x4xf32>
  return %1, %2 : tensor<6x4xf32>, tensor<2x3x4xf32>
}

// -----

// transpose(transpose(x, p1), p2) is transpose(x, p1[p2[i]]); an identity
// composition is x.
// CHECK-LABEL: func.func @transpose_chain
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x3x4xf32>)
// CHECK-NEXT: %[[T:.*]] = graph.transpose %[[X]] {perm = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
// CHECK-NEXT: return %[[T]], %[[X]]
func.func @transpose_chain(%x: tensor<2x3x4xf32>) -> (tensor<3x4x2xf32>, tensor<2x3x4xf32>) {
  %0 = graph.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %1 = graph.transpose %0 {perm = array<i64: 0, 2, 1>} : (tensor<3x2x4xf32>) -> tensor<3x4x2xf32>
  %2 = graph.transpose %0 {perm = array<i64: 1, 0, 2>} : (tensor<3x2x4xf32>) -> tensor<2x3x4xf32>
  return %1, %2 : tensor<3x4x2xf32>, tensor<2x3x4xf32>
}

// RUN: strata-opt %s --strata-offload-state --strata-plan-memory | FileCheck %s --check-prefix=FITS
// RUN: strata-opt %s "--strata-offload-state=gpu-memory=10000" "--strata-plan-memory=gpu-memory=10000" | FileCheck %s --check-prefix=HOST
// RUN: strata-opt %s "--strata-offload-state=gpu-memory=10000 host-memory=2048 ssd-memory=65536" "--strata-plan-memory=gpu-memory=10000 ssd-memory=65536" | FileCheck %s --check-prefix=SSD
// RUN: not strata-opt %s "--strata-offload-state=gpu-memory=4000" "--strata-plan-memory=gpu-memory=4000" 2>&1 | FileCheck %s --check-prefix=NOFIT
// strata-offload-state (without a budget, the first run line, it changes
// nothing), then strata-plan-memory to lay out the arena and check the
// budget.

// Tiers. Three parameters of 256 floats and one of 16, AdamW: 12,736 device
// bytes when everything stays on the device.
// FITS: device = 12736, host = 0,
// FITS-NOT: sched.reload

// Over a 10,000-byte budget the largest optimizer states go to the host
// until the plan fits: each is reloaded right before its update and the
// update's result offloaded right after it; the update writes its new
// moments over the reloaded ones (the same offsets), so one parameter's
// moments are on the device at a time.
// HOST: module attributes {sched.memory_plan = #sched.memory_plan<{{.*}}device = 9664, host = 5120, ssd = 0, budget = 10000>
// HOST: {graph.name = "adamw.exp_avg:w1", graph.role = #graph<role optimizer_state>, sched.tier = #sched<tier host>}
// HOST-SAME: {graph.name = "adamw.exp_avg_sq:w1", graph.role = #graph<role optimizer_state>, sched.tier = #sched<tier host>}
// HOST-NOT: "adamw.exp_avg:w4", graph.role = #graph<role optimizer_state>, sched.tier
// HOST: %[[M:.*]] = sched.reload host %{{.*}} {sched.slots = [#sched.slot<0, 1024>]} : tensor<256xf32>
// HOST: %[[V:.*]] = sched.reload host %{{.*}} {sched.slots = [#sched.slot<1024, 1024>]} : tensor<256xf32>
// HOST: %[[U:.*]]:3 = graph.adamw_update %{{.*}}, %{{.*}}, %[[M]], %[[V]], {{.*}}sched.slots = [unit, #sched.slot<0, 1024>, #sched.slot<1024, 1024>]
// HOST: %[[OV:.*]] = sched.offload host %[[U]]#2 {sched.slots = [unit]}
// HOST: %[[OM:.*]] = sched.offload host %[[U]]#1 {sched.slots = [unit]}
// HOST: return %{{.*}}, %[[OM]], %[[OV]],

// With little host room, the rest of the optimizer states go to SSD.
// SSD: host = 2048, ssd = 3072,
// SSD: sched.reload ssd %{{.*}} {sched.slots = [#sched.slot<0, 1024>]}

// NOFIT: error: strata-plan-memory: the step needs 6400 bytes of device memory but the budget is 4000: 2400 bytes do not fit with every optimizer state and parameter the host tier can take moved off the device (left there: state {{[0-9]+}} bytes, activations {{[0-9]+}}, constants 0); raise --gpu-memory, recompute activations (--recompute auto), offload activations to the host (--offload-activations), give the host tier room (--host-memory) or an SSD tier (--ssd-memory), shard over more ranks (--partition-group), or use a smaller --batch
func.func @optimizer_step(%w1: tensor<256xf32> {graph.name = "w1", graph.role = #graph<role parameter>}, %g1: tensor<256xf32> {graph.name = "grad:w1", graph.role = #graph<role gradient>}, %m1: tensor<256xf32> {graph.name = "adamw.exp_avg:w1", graph.role = #graph<role optimizer_state>}, %v1: tensor<256xf32> {graph.name = "adamw.exp_avg_sq:w1", graph.role = #graph<role optimizer_state>}, %w2: tensor<256xf32> {graph.name = "w2", graph.role = #graph<role parameter>}, %g2: tensor<256xf32> {graph.name = "grad:w2", graph.role = #graph<role gradient>}, %m2: tensor<256xf32> {graph.name = "adamw.exp_avg:w2", graph.role = #graph<role optimizer_state>}, %v2: tensor<256xf32> {graph.name = "adamw.exp_avg_sq:w2", graph.role = #graph<role optimizer_state>}, %w3: tensor<256xf32> {graph.name = "w3", graph.role = #graph<role parameter>}, %g3: tensor<256xf32> {graph.name = "grad:w3", graph.role = #graph<role gradient>}, %m3: tensor<256xf32> {graph.name = "adamw.exp_avg:w3", graph.role = #graph<role optimizer_state>}, %v3: tensor<256xf32> {graph.name = "adamw.exp_avg_sq:w3", graph.role = #graph<role optimizer_state>}, %w4: tensor<16xf32> {graph.name = "w4", graph.role = #graph<role parameter>}, %g4: tensor<16xf32> {graph.name = "grad:w4", graph.role = #graph<role gradient>}, %m4: tensor<16xf32> {graph.name = "adamw.exp_avg:w4", graph.role = #graph<role optimizer_state>}, %v4: tensor<16xf32> {graph.name = "adamw.exp_avg_sq:w4", graph.role = #graph<role optimizer_state>}, %lr: tensor<f64> {graph.name = "strata.lr", graph.role = #graph<role input>}, %step: tensor<i64> {graph.name = "strata.step", graph.role = #graph<role input>}, %scale: tensor<f32> {graph.name = "strata.grad_scale", graph.role = #graph<role input>})
    -> (tensor<256xf32> {graph.name = "w1", graph.role = #graph<role parameter>}, tensor<256xf32> {graph.name = "adamw.exp_avg:w1", graph.role = #graph<role optimizer_state>}, tensor<256xf32> {graph.name = "adamw.exp_avg_sq:w1", graph.role = #graph<role optimizer_state>}, tensor<256xf32> {graph.name = "w2", graph.role = #graph<role parameter>}, tensor<256xf32> {graph.name = "adamw.exp_avg:w2", graph.role = #graph<role optimizer_state>}, tensor<256xf32> {graph.name = "adamw.exp_avg_sq:w2", graph.role = #graph<role optimizer_state>}, tensor<256xf32> {graph.name = "w3", graph.role = #graph<role parameter>}, tensor<256xf32> {graph.name = "adamw.exp_avg:w3", graph.role = #graph<role optimizer_state>}, tensor<256xf32> {graph.name = "adamw.exp_avg_sq:w3", graph.role = #graph<role optimizer_state>}, tensor<16xf32> {graph.name = "w4", graph.role = #graph<role parameter>}, tensor<16xf32> {graph.name = "adamw.exp_avg:w4", graph.role = #graph<role optimizer_state>}, tensor<16xf32> {graph.name = "adamw.exp_avg_sq:w4", graph.role = #graph<role optimizer_state>}) {
  %p1, %m1n, %v1n = graph.adamw_update %w1, %g1, %m1, %v1, %lr, %step, %scale {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>)
  %p2, %m2n, %v2n = graph.adamw_update %w2, %g2, %m2, %v2, %lr, %step, %scale {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>)
  %p3, %m3n, %v3n = graph.adamw_update %w3, %g3, %m3, %v3, %lr, %step, %scale {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>)
  %p4, %m4n, %v4n = graph.adamw_update %w4, %g4, %m4, %v4, %lr, %step, %scale {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<f64>, tensor<i64>, tensor<f32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  return %p1, %m1n, %v1n, %p2, %m2n, %v2n, %p3, %m3n, %v3n, %p4, %m4n, %v4n : tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
}

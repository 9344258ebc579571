//===- strata-sim.cpp - A training step on a cluster that is not here -----===//

#include "strata/Sim/Simulator.h"

int main(int argc, char **argv) { return strata::sim::simMain(argc, argv); }

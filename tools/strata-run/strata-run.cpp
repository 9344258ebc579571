//===- strata-run.cpp - Runs a Strata artifact ----------------------------===//

#include "strata/Runtime/RunDriver.h"

int main(int argc, char **argv) { return strata::runtime::runMain(argc, argv); }

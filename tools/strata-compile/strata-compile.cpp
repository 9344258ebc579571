//===- strata-compile.cpp - The Strata compiler ---------------------------===//

#include "strata/Tools/CompileDriver.h"

int main(int argc, char **argv) { return strata::compileMain(argc, argv); }

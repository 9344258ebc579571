//===- strata-inspect.cpp - What a Strata artifact holds ------------------===//

#include "strata/Runtime/Inspect.h"

int main(int argc, char **argv) {
  return strata::runtime::inspectMain(argc, argv);
}

# lit configuration for Strata: FileCheck tests of passes, the importer and
# the tools. Run through ctest (`ctest -R lit`) or directly with lit.py.
import os
import lit.formats

config.name = "Strata"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".onnxtxt", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.strata_obj_root, "tests", "lit")

config.environment["PATH"] = os.pathsep.join(
    [config.strata_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%models", os.path.join(config.strata_src_root, "models")))
config.substitutions.append(("%strata_src", config.strata_src_root))

# "cuda-gpu" where strata-run finds a GPU through the cuda backend: tests of
# what a machine without one says are UNSUPPORTED there, GPU tests REQUIRE it.
import subprocess
try:
    probe = subprocess.run(
        [os.path.join(config.strata_tools_dir, "strata-run"), "--probe-backend"],
        capture_output=True, text=True, timeout=60)
    if probe.returncode == 0 and probe.stdout.startswith("cuda"):
        config.available_features.add("cuda-gpu")
except (OSError, subprocess.TimeoutExpired):
    pass

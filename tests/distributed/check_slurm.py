#!/usr/bin/env python3
"""ctest slurm.srun: strata-run launched by Slurm's srun trains as under mpirun.

    check_slurm.py --bin BUILD/bin

Starts a one-node Slurm cluster of its own (Debian's slurm-wlm: slurmctld
and slurmd on this machine, configured in a temporary folder, on free
ports, auth/none so no munge), then:

1. `srun -n 4 --mpi=pmix strata-run` on a 4-rank ZeRO-3 artifact (2 ranks a
   node, hierarchical): MPI forms its communicator through PMIx, and
   strata-run checks that MPI's rank and size are Slurm's SLURM_PROCID and
   SLURM_NTASKS; every logged loss and gradient norm equals
   `mpirun -np 4`'s on the same artifact and data, bit for bit;
2. `srun --mpi=none`: each task refuses in one line, naming --mpi=pmix;
3. `sbatch` of a script with the same srun line: its log equals too.

Then it stops both daemons and removes the folder; it fails if a Slurm
process it started is left. Without slurm-wlm it skips (exit 77) on a
developer machine and fails under CI (CI=true), where tools/install-deps.sh
installs it.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
SLURM_TOOLS = ("slurmctld", "slurmd", "srun", "sbatch", "sinfo")


def skip_or_fail(message):
    if os.environ.get("CI") == "true":
        sys.exit(f"slurm.srun: {message} (tools/install-deps.sh installs "
                 f"slurm-wlm)")
    print(f"slurm.srun: {message}; skipped")
    sys.exit(77)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(folder, host):
    ctld_port, slurmd_port = free_port(), free_port()
    while slurmd_port == ctld_port:
        slurmd_port = free_port()
    path = os.path.join(folder, "slurm.conf")
    for sub in ("state", "spool"):
        os.makedirs(os.path.join(folder, sub))
    with open(path, "w") as f:
        f.write(f"""\
ClusterName=strata
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/linear
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MailProg=/bin/true
NodeName={host} NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=strata Nodes={host} Default=YES MaxTime=INFINITE State=UP
""")
    return path


class Cluster:
    """slurmctld and slurmd in the foreground, as children of this script."""

    def __init__(self, folder):
        self.folder = folder
        self.host = socket.gethostname().split(".")[0]
        self.env = dict(os.environ,
                        SLURM_CONF=write_config(folder, self.host))
        self.daemons = []

    def start(self):
        for cmd in (["slurmctld", "-D", "-i"],
                    ["slurmd", "-D", "-N", self.host]):
            log = open(os.path.join(self.folder, cmd[0] + ".out"), "w")
            self.daemons.append(subprocess.Popen(
                cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.time() + 30
        while time.time() < deadline:
            state = subprocess.run(["sinfo", "-h", "-o", "%T"], env=self.env,
                                   capture_output=True, text=True)
            if state.stdout.strip() == "idle":
                return
            if any(d.poll() is not None for d in self.daemons):
                break
            time.sleep(0.5)
        logs = "".join(open(os.path.join(self.folder, name + ".out")).read()
                       for name in ("slurmctld", "slurmd"))
        sys.exit("the Slurm cluster did not come up:\n" + logs)

    def stop(self):
        for d in reversed(self.daemons):
            if d.poll() is None:
                d.send_signal(signal.SIGTERM)
        for d in self.daemons:
            try:
                d.wait(timeout=15)
            except subprocess.TimeoutExpired:
                d.kill()
                d.wait()

    def run(self, cmd, **kw):
        return subprocess.run(cmd, env=self.env, capture_output=True,
                              text=True, timeout=180, **kw)


def losses(path):
    """(loss, grad_norm) of every step, as the log wrote them."""
    return [(r["loss"], r["grad_norm"]) for r in map(json.loads, open(path))
            if "step" in r]


def slurm_processes():
    """Pids of live Slurm processes (a leftover check; an exited
    slurmstepd that init has not reaped yet is no process)."""
    out = subprocess.run(["ps", "-eo", "pid=,stat=,comm="],
                         capture_output=True, text=True).stdout
    return {pid for pid, stat, comm in (l.split(None, 2) for l in
                                        out.splitlines())
            if comm in ("slurmctld", "slurmd", "slurmstepd") and
            not stat.startswith("Z")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    args = parser.parse_args()
    missing = [t for t in SLURM_TOOLS if not shutil.which(t)]
    if missing:
        skip_or_fail("slurm-wlm is not installed (no " + ", ".join(missing) +
                     ")")
    if os.geteuid() != 0:
        skip_or_fail("a one-node cluster's slurmd runs as root")
    before = slurm_processes()
    work = tempfile.mkdtemp(prefix="strata-slurm-")
    cluster = Cluster(work)
    try:
        art = os.path.join(work, "mlp.strata")
        subprocess.run(
            [os.path.join(args.bin, "strata-compile"),
             os.path.join(ROOT, "models", "mlp_dynamic_batch.onnx"),
             "--batch", "8", "--world", "4", "--gpus-per-node", "2",
             "--partition-group", "4", "--hierarchical", "on", "--steps",
             "6", "-o", art], check=True)
        run = [os.path.join(args.bin, "strata-run"), art, "--quiet",
               "--seed", "5", "--log"]
        mpirun_log = os.path.join(work, "mpirun.jsonl")
        subprocess.run(MPIRUN + ["-np", "4"] + run + [mpirun_log], check=True,
                       timeout=180)
        expected = losses(mpirun_log)
        if len(expected) != 6:
            sys.exit(f"mpirun logged {len(expected)} steps, not 6")

        cluster.start()
        offered = cluster.run(["srun", "--mpi=list"])
        if "pmix" not in offered.stdout + offered.stderr:
            sys.exit("srun --mpi=list offers no pmix: Debian's OpenMPI finds "
                     "its peers through PMIx only")
        srun_log = os.path.join(work, "srun.jsonl")
        got = cluster.run(["srun", "-n", "4", "--mpi=pmix"] + run +
                          [srun_log])
        if got.returncode != 0:
            sys.exit("srun -n 4 --mpi=pmix strata-run failed:\n" + got.stderr)
        if losses(srun_log) != expected:
            sys.exit(f"srun's losses differ from mpirun's:\n"
                     f"  srun:   {losses(srun_log)}\n  mpirun: {expected}")
        print(f"srun -n 4 --mpi=pmix: {len(expected)} steps, losses and "
              f"gradient norms equal to mpirun -np 4's "
              f"(last loss {expected[-1][0]})")

        # Without PMI the tasks cannot form one MPI job: one line each.
        bad = cluster.run(["srun", "-n", "4", "--mpi=none"] + run +
                          [os.path.join(work, "none.jsonl")])
        lines = [l for l in bad.stderr.splitlines()
                 if l.startswith("strata-run: error:")]
        want = ("was started by srun without a PMI for MPI to find the other "
                "tasks through: run srun --mpi=pmix")
        if bad.returncode == 0 or len(lines) != 4 or not all(
                want in l for l in lines):
            sys.exit("srun --mpi=none should fail with one line a task:\n" +
                     bad.stderr)
        print("srun --mpi=none: each task refused in one line")

        # A batch job runs the same line.
        script = os.path.join(work, "job.sh")
        batch_log = os.path.join(work, "sbatch.jsonl")
        with open(script, "w") as f:
            f.write("#!/bin/bash\n#SBATCH --ntasks=4\n#SBATCH --nodes=1\n"
                    "srun --mpi=pmix " + " ".join(run) + " " + batch_log +
                    "\n")
        job = cluster.run(["sbatch", "--wait", "-o",
                           os.path.join(work, "job.out"), script])
        if job.returncode != 0:
            sys.exit("sbatch --wait failed:\n" + job.stderr +
                     open(os.path.join(work, "job.out")).read())
        if losses(batch_log) != expected:
            sys.exit(f"the sbatch job's losses differ from mpirun's: "
                     f"{losses(batch_log)}")
        print("sbatch: the job's losses equal mpirun's")
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    deadline = time.time() + 15
    left = slurm_processes() - before
    while left and time.time() < deadline:
        time.sleep(0.5)
        left = slurm_processes() - before
    if left:
        sys.exit("Slurm processes left behind: " + ", ".join(sorted(left)))
    print("slurm.srun: cluster stopped, nothing left")


if __name__ == "__main__":
    main()

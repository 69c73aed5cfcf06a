"""The fabric gate, one job a module: measure.py and nccl_log.py measure, judge.py judges,
act.py acts, run.py runs them in order; trainer/fabric_gate.py is the name callers import."""

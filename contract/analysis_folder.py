"""The tables `invoke analyze` writes in a run's analysis/ folder (runfolder.ANALYSIS) beside
its report and figures: what the report's numbers were computed from, for a reader who wants
to recompute one."""
RECORDS_TABLE = "records.csv"  # every record, one row each
CELLS_TABLE = "cells.csv"  # one row per cell: its times and phases
GROUPS_TABLE = "groups.csv"  # one row per (benchmark, system-mode[, stack]): pooled repeats
CONSISTENCY_TABLE = "consistency.csv"  # the checks that the records agree with each other
OPERATORS_TABLE = "operators.csv"  # operator-profile categories per cell
MEMORY_TABLE = "memory_peaks.csv"  # each process's peak resident memory
NETWORK_TABLE = "network.csv"  # bytes each node sent and received
SCALING_TABLE = "scaling.csv"  # throughput and speedup per node count
TWO_STACKS_TABLE = "claims_two_stacks.csv"  # each claim under both stacks
CLAIMS_TABLE = "claims.csv"  # each claim's value, interval and verdict (the ledger reads it)

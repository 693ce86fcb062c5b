"""What `invoke compare A B` writes in results/compare-<A>-vs-<B>/ beside its report.md and
report.html (runfolder's names): one row per claim, per cell and per operator category."""
CLAIMS_TABLE = "claims.csv"
CELLS_TABLE = "cells.csv"
OPERATORS_TABLE = "operators.csv"

"""Stage 1, before anything runs: which cells (matrix), where each role goes and which ports
it takes (layout), how long it will take (estimate), what is left of a run (resume)."""

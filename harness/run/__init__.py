"""Stage 2, running the cells: the nodes checked (preflight), sharing measured (contention),
each cell's processes started, watched and stopped (launch, stall, progress), Ctrl-C turned
into a clean stop (interrupts)."""

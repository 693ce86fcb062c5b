"""results/<run-id>/records.jsonl -> tidy table -> figures, tables, report."""

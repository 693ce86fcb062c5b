"""records.jsonl: one flat record per measured value of a run (contract/records.py), from its
manifest and the files fetched from the nodes."""
from contract import manifest as manifests, nodefolder
from contract import records as schema
from contract.runfolder import RunFolder, read_json
from ..clusters import sacct


def build_records(path):
    """One flat record per measured value, failed cells included (metric `status`)."""
    run = RunFolder(path)
    manifest = run.manifest()
    records = []
    for position, cell in enumerate(manifest.get("cells", [])):
        status = run.status(cell["id"])
        base = _base(manifest, cell)
        # order: the cell's place in the planned run, from which the analysis sees whether
        # the repeats ran as blocks (analysis/stats.py, paired)
        records.append(schema.record(
            dict(base, **schema.process_keys(None, None, None)), "status",
            1.0 if status["status"] == "succeeded" else 0.0, status=status["status"],
            reason=status.get("reason", ""), warning=status.get("warning", ""),
            disturbed=status.get("disturbed", ""), order=position))
        slurm_rows = sacct.kept(path / cell["id"])
        for result_file in nodefolder.fetched_results(path / cell["id"]):
            records.extend(_process_records(base, result_file, slurm_rows))
        records.extend(_profile_records(base, path / cell["id"]))
    run.write_records(records)
    return records


def _base(manifest, cell):
    base = {k: cell.get(k) for k in schema.CELL_KEYS}
    base.update(schema.run_keys(manifest.get("run_id"), cell["id"], cell.get("stack") or (
        manifests.stack_names(manifest) or [None])[0]))
    return base


def _per_worker_records(rec, per_worker):
    out = []
    for rank, summary in sorted(per_worker.items()):
        worker = dict(rec, timed_by="chief", **schema.process_keys(summary.get("node"),
                                                                   "worker", int(rank)))
        out += [schema.record(worker, phase, summary[phase])
                for phase in schema.SUMMARY if summary.get(phase) is not None]
        out += [schema.record(worker, m, summary[m])
                for m in ("measured_steps", "warmup_steps") if m in summary]
    return out


def _profile_records(base, cell_path):
    """One record per operator path of each process's profiled steps (bench/common/
    profile.py), in seconds per profiled step. A server does not know how many steps it
    served: it takes the steps of the process that drove the profile (TF chief, worker 0)."""
    profiles = [(f, read_json(f))
                for f in sorted(cell_path.glob("*/*/%s" % nodefolder.OPERATORS))]
    profiles = [(f, p) for f, p in profiles if p]
    driven = [p["steps"] for f, p in profiles if p.get("steps")]
    out = []
    for profile_file, profile in profiles:
        steps = profile.get("steps") or (max(driven) if driven else 0)
        node, role_rank = profile_file.parent.parent.name, profile_file.parent.name
        role, _, rank = role_rank.rpartition("-")
        rec = dict(base, source=profile.get("source"),
                   **schema.process_keys(node, role, int(rank)))
        if profile.get("profiled_step"):  # workers; for tensorflow-async, the chief
            out.append(schema.record(rec, "profiled_step", profile["profiled_step"]))
        if not steps:
            continue
        out += [schema.record(rec, "operator", op["seconds"] / steps, op_path=op["path"],
                              calls=op["calls"])
                for op in profile.get("ops", [])]
    return out


def _process_records(base, result_file, slurm_rows):
    result = read_json(result_file)
    if not result:
        return []
    config = result.get("config", {})
    rec = dict(base, versions=result.get("versions"), status=result.get("status"),
               sharing=config.get("sharing"), threads=config.get("threads"),
               **schema.process_keys(*(config.get(k) for k in schema.PROCESS_KEYS)))
    step = result_file.with_name(sacct.STEP_FILE)  # the job step that ran it (Slurm runs)
    if step.is_file():
        rec["slurm_step"] = step.read_text().strip()
    summary = result.get("summary") or {}
    if result.get("per_worker"):
        # the TensorFlow-async chief timed every worker's steps: records per worker
        out = _per_worker_records(rec, result["per_worker"])
    else:
        out = [schema.record(rec, phase, summary[phase])
               for phase in schema.SUMMARY if summary.get(phase) is not None]
    for metric in ("train_seconds", "peak_rss_mb", "peak_own_rss_mb", "wall_step", "parameters",
                   "startup_seconds", "execution_seconds"):
        if result.get(metric) is not None:
            out.append(schema.record(rec, metric, result[metric]))
    if rec.get("slurm_step") in slurm_rows:  # Slurm's own figures for the step (sacct)
        state, figures = sacct.records(slurm_rows[rec["slurm_step"]])
        out += [schema.record(rec, m, v, source="sacct", slurm_state=state)
                for m, v, _ in figures]
    for metric, value in sorted((result.get("interference") or {}).items()):
        if metric in schema.INTERFERENCE and value is not None:  # what else ran on the node
            out.append(schema.record(rec, metric, value))
    if result.get("step_samples"):  # the measured steps, for the analysis's bootstrap
        out.append(schema.record(rec, "step_samples", len(result["step_samples"]),
                                 samples=result["step_samples"],
                                 sample_epochs=result.get("step_epochs")))
    if result.get("stopped_by") not in (None, "fixed"):  # the verdict size's stop
        out.append(schema.record(rec, "stop_halfwidth", result.get("halfwidth"),
                                 stopped_by=result["stopped_by"]))
    for metric in ("measured_steps", "warmup_steps"):
        if metric in summary:
            out.append(schema.record(rec, metric, summary[metric]))
    # the steps the node's byte counts cover: the loop's, or the TF-async chief's closures
    # over the workers
    net_steps = result.get("net_steps") or len(result.get("steps") or [])
    if result.get("net_bytes_sent") is not None and net_steps:
        out.append(schema.record(rec, "net_bytes_sent_per_step",
                                 result["net_bytes_sent"] / net_steps))
    return out

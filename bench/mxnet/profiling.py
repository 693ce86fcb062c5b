"""The profiled steps of an mxnet-sync / mxnet-async cell (bench/common/profile.py).

Workers: MXNet's profiler with aggregate statistics, the graph re-built unbulked
(MXNET_EXEC_BULK_EXEC_TRAIN=0) so each operator is its own record; the timed steps ran bulked,
MXNet's default. Servers: the worker of KVStore rank 0 switches the servers' profiler on and
off through the KVStore (profile_process="server"); each server writes a trace in its own
folder, which server.py reads when the server has stopped. The servers run the weight update."""
import glob
import json
import os

from bench.common.profile import Profile, run_steps

# relative: each server writes it in its own out_dir, as rank<N>_server_trace.json
SERVER_TRACE = "server_trace.json"


def profile_steps(config, sampler, net, train_step, batches, drives_servers):
    """drives_servers: this worker is the KVStore's rank 0, the only one whose profiler
    commands MXNet forwards to the servers (the scheduler's rank, not the harness's)."""
    import mxnet as mx
    os.environ["MXNET_EXEC_BULK_EXEC_TRAIN"] = "0"
    net.hybridize(static_alloc=True, static_shape=True)  # a new cached graph reads it
    train_step(next(batches), None)  # builds that graph, outside the profile
    if drives_servers:
        mx.profiler.set_config(profile_all=True, filename=SERVER_TRACE,
                               profile_process="server")
        mx.profiler.set_state("run", profile_process="server")
    mx.profiler.set_config(profile_all=True, aggregate_stats=True,
                           filename=os.path.join(config["out_dir"], "trace.json"))
    mx.profiler.set_state("run")
    steps = int(config["profile_steps"])
    seconds = run_steps(sampler, steps, lambda: train_step(next(batches), None))
    mx.nd.waitall()
    mx.profiler.set_state("stop")
    if drives_servers:
        mx.profiler.set_state("stop", profile_process="server")
        mx.profiler.dump(profile_process="server")
    mx.profiler.dump()  # before dumps(): dumps alone leaves the trace file unterminated
    profile = Profile("mxnet", "mxnet.profiler %s, worker" % mx.__version__)
    add_aggregate(profile, json.loads(mx.profiler.dumps(format="json")))
    return profile.write(config, steps, seconds)


def add_aggregate(profile, stats):
    """MXNet's aggregate table: {"Time": {domain: {name: {"Total": ms, "Count": n}}}}. The C
    API domain wraps the operators (counted twice if kept): operators and KVStore only."""
    for domain, ops in stats.get("Time", {}).items():
        if domain == "MXNET_C_API" or not isinstance(ops, dict):
            continue
        for name, row in ops.items():
            profile.add([domain, name], row.get("Total", 0.0) / 1e3, int(row.get("Count", 0)))


def server_profile(config):
    """After a server stopped: its trace (if worker 0 asked for one) -> profile.json."""
    paths = glob.glob(os.path.join(config["out_dir"], "*" + SERVER_TRACE))
    if not paths:
        return None
    with open(paths[0]) as handle:
        events = json.load(handle).get("traceEvents", [])
    profile = Profile("mxnet", "mxnet.profiler, server")
    for name, category, seconds in trace_durations(events):
        profile.add([category or "server", name], seconds)
    return profile.write(config, int(config.get("profile_steps", 0)), 0.0)


def trace_durations(events):
    """(name, category, seconds) of each complete event of a Chrome trace: "X" events, or
    "B"/"E" pairs on the same thread."""
    open_events = {}
    for event in events:
        phase, key = event.get("ph"), (event.get("pid"), event.get("tid"), event.get("name"))
        if phase == "X":
            yield event.get("name"), event.get("cat"), float(event.get("dur", 0)) / 1e6
        elif phase == "B":
            open_events.setdefault(key, []).append(float(event["ts"]))
        elif phase == "E" and open_events.get(key):
            began = open_events[key].pop()
            yield event.get("name"), event.get("cat"), (float(event["ts"]) - began) / 1e6

"""The timed loop and the calibration, shared by every framework's trainer.

A trainer supplies small callables; the loop owns the timing, warm-up marking, progress and
logging, so every framework is timed the same way (docs/methodology.md).
"""
import time

from . import agree, precision
from .runner import log, most_steps
from .timer import StepTimer


def timed_steps(config, sampler, epoch_batches, train_step):
    """Run epochs x steps_per_epoch steps (the verdict size: until the mean step is known
    well enough, see StopRule).

    epoch_batches(epoch) -> an iterator of batches for that epoch;
    train_step(batch, timer) runs one step; it may call timer.lap(name) for its own phases
    and must return only when the step's work is finished (the framework synchronised).
    Returns ({steps, train_seconds, wall_step, step_samples, step_epochs, first_step_ended,
    loop_ended, net_bytes_sent, net_bytes_recv, stopped_by, halfwidth}, the last batch);
    wall_step = the loop's wall time over the measured steps / their number, the step time
    without the phase timers; step_samples = the measured steps' times (the analysis
    bootstraps its interval from them) and step_epochs their epochs; first_step_ended and
    loop_ended are time.time() stamps: start-up ends with the first step.
    """
    rule = StopRule(config)
    net_before, started = sampler.net_counters(), time.time()
    timer = StepTimer()
    total = rule.ceiling
    batch = None
    measured_from = time.perf_counter()
    first_step_ended = None
    epoch = 0
    while not rule.reached:
        batches = epoch_batches(epoch)
        for _ in range(config["steps_per_epoch"]):
            index = len(timer.steps)
            sampler.progress(phase="train", step=index)
            if index == config["warmup_steps"]:
                measured_from = time.perf_counter()
            timer.start_step()
            batch = next(batches)
            timer.lap("loading")
            loss = train_step(batch, timer)
            step = timer.end_step(epoch=epoch, warmup=index < config["warmup_steps"])
            if loss is not None:
                step["loss"] = float(loss)
            if first_step_ended is None:
                first_step_ended = time.time()
            if index % max(1, total // 10) == 0 or index == total - 1:
                log(config, "step %d/%d %.3fs" % (index + 1, total, step["total"]))
            if rule.stop_after(timer.steps):
                break
        epoch += 1
    measured_wall = time.perf_counter() - measured_from
    return _summary(config, rule, timer, sampler, (net_before, started),
                    measured_wall, first_step_ended), batch


def _summary(config, rule, timer, sampler, before, measured_wall, first_step_ended):
    """timed_steps' result, once the loop has stopped; before: (net counters, time.time())
    at the loop's start."""
    done = len(timer.steps)
    sampler.progress(step=done)
    train_seconds = time.time() - before[1]
    net_after = sampler.net_counters()
    measured = [s for s in timer.steps if not s["warmup"]]
    if rule.reached != "fixed":
        log(config, "stopped after %d steps: %s (95%% interval of the later epochs' mean step "
                    "+-%.1f%%)" % (done, rule.reached, 100 * rule.halfwidth))
    return {"steps": timer.steps, "train_seconds": train_seconds,
            "wall_step": measured_wall / (done - config["warmup_steps"]),
            "step_samples": [s["total"] for s in measured],
            "step_epochs": [s["epoch"] for s in measured],
            "stopped_by": rule.reached, "halfwidth": rule.finite_halfwidth(),
            "first_step_ended": first_step_ended, "loop_ended": time.time(),
            "net_bytes_sent": net_after[0] - before[0][0],
            "net_bytes_recv": net_after[1] - before[0][1]}


class StopRule(object):
    """When the timed loop stops. Fixed (every profile but verdict): after epochs x
    steps_per_epoch steps. Adaptive (config precision > 0, the verdict size): not before
    `epochs` epochs (the floor: the first, uncached epoch and at least one later one), then
    every `check_every` steps, once the 95% interval of the later epochs' mean step is within
    +-precision (bench/common/precision.py), and at the latest after `max_epochs` epochs (the
    ceiling). Workers of a synchronous mode decide together (agree_address, agree.py)."""

    def __init__(self, config):
        self.precision = float(config.get("precision") or 0)
        self.floor = config["epochs"] * config["steps_per_epoch"]
        self.ceiling = most_steps(config)
        self.check_every = int(config.get("check_every") or 10)
        self.halfwidth = float("inf")
        self.reached = None
        self.agreement = None
        if self.precision:
            self.agreement = agree.channel(config)  # open until the process leaves

    def stop_after(self, steps):
        return self.decide(len(steps), lambda: [s["total"] for s in steps
                                                if s["epoch"] >= 1 and not s["warmup"]])

    def decide(self, done, later_samples):
        """After `done` steps: stop? later_samples() -> the later epochs' step times."""
        if done >= self.ceiling:
            # a floor as high as the ceiling (the verdict size's 2 epochs) leaves the rule
            # nothing to decide: a fixed length, not a ceiling reached
            self.reached = "ceiling" if self.precision and self.ceiling > self.floor \
                else "fixed"
        elif self.precision and done >= self.floor and (done - self.floor) % self.check_every == 0:
            self.halfwidth = precision.relative_halfwidth(later_samples())
            known = self.halfwidth <= self.precision
            if self.agreement is not None:
                known = self.agreement.vote(known)
            self.reached = "precision" if known else None
        return bool(self.reached)

    def finite_halfwidth(self):
        return self.halfwidth if self.halfwidth < float("inf") else None


def endless(make_batches):
    """Batches without end, epoch after epoch: make_batches() -> one epoch's iterator."""
    while True:
        for batch in make_batches():
            yield batch


def in_turn(config, barrier, prepare):
    """prepare() -> measure: every worker prepares at once (a local copy of the model, one
    untimed pass: nothing measured), then runs measure() alone, rank after rank, the others
    waiting at barrier(): compute is then measured without the other workers' load, which on
    machines shared by several nodes (the local and emulated clusters) would otherwise inflate
    it. Preparing in turn too cost a tensorflow-sync ResNet-50 cell about 6 s. Where the
    contention probe found that every node owns its cores (`calibrate_together`), the workers
    measure at once, as they train: the other workers' load is not on this node's cores, and
    the calibration takes one worker's time instead of all of theirs."""
    measure = prepare()
    # one turn for everyone at once, or one turn per rank
    turns = [config["rank"]] if config["calibrate_together"] else range(config["world_size"])
    result = None
    for rank in turns:
        barrier()
        if rank == config["rank"]:
            result = measure()
    barrier()
    return result


def prepared(config, sampler, forward, forward_backward, update=None):
    """A calibration ready to run: one pass now, untimed (TensorFlow traces its functions and
    MXNet allocates on the first call, seconds for a large network), the timed passes when the
    returned function is called (calibrate). No calibration steps (emulated CPUs, harness/run/
    launch.py calibration): no pass at all, nothing measured."""
    if not config["calibration_steps"]:
        return lambda: {"forward": [], "backward": [], "update": []}
    sampler.progress(phase="calibrate")
    forward()
    forward_backward()
    if update is not None:
        update()
    return lambda: calibrate(config, forward, forward_backward, update)


def calibrate(config, forward, forward_backward, update=None):
    """Compute with communication off, on this node: median-ready lists of seconds (the
    phase already reads "calibrate": prepared()).

    forward() and forward_backward() each run (and synchronise) one pass on a local copy of the
    model with a fixed batch; update() applies one local weight update, where the worker does
    that itself. backward = forward_backward - forward, per repetition.
    """
    times = {"forward": [], "backward": [], "update": []}
    # at least calibration_steps repetitions and at least calibration_seconds: for a small
    # network, a median over 10 passes of 5 ms spans 50 ms, shorter than one hiccup of a shared
    # machine; a second of passes outvotes it (a large network gets its 10 passes)
    began = time.perf_counter()
    i = 0
    while (i < config["calibration_warmup"] + config["calibration_steps"] or
           time.perf_counter() - began < config.get("calibration_seconds", 0)):
        t0 = time.perf_counter()
        forward()
        t1 = time.perf_counter()
        forward_backward()
        t2 = time.perf_counter()
        if update is not None:
            update()
        t3 = time.perf_counter()
        if i >= config["calibration_warmup"]:
            times["forward"].append(t1 - t0)
            times["backward"].append(max(0.0, (t2 - t1) - (t1 - t0)))
            times["update"].append(t3 - t2)
        i += 1
    return times

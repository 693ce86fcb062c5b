"""The local node: background processes are started as a group and killed by recorded pid."""
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil
import pytest

from harness.nodes import inventory, access as nodes
from contract.errors import UserError
from harness.paths import REPO
from harness.run import launch


def local_node():
    return nodes.connect(inventory.load("local").hosts[0])


def test_start_records_group_leader_and_kill_reaches_children(tmp_path):
    node = local_node()
    (tmp_path / "job.sh").write_text("sleep 300 &\nsleep 301 &\necho started\nwait\n")
    pid = node.start_background("job.sh", str(tmp_path), "log.txt")
    deadline = time.time() + 5
    while len(node.group_members(pid)) < 3 and time.time() < deadline:
        time.sleep(0.05)
    members = node.group_members(pid)
    assert pid in members and len(members) == 3  # bash + two sleeps, one process group
    assert psutil.Process(pid).ppid() != psutil.Process().pid  # detached: not our child
    assert node.is_alive(pid)
    assert node.kill(pid, grace=5) == []  # all gone on TERM, none needed KILL
    assert not node.is_alive(pid)
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                   for p in members)
    assert "started" in node.read_text(str(tmp_path / "log.txt"))


def test_kill_escalates_when_term_is_ignored(tmp_path):
    node = local_node()
    (tmp_path / "stubborn.sh").write_text("trap '' TERM\nsleep 300 &\nwait\n")
    pid = node.start_background("stubborn.sh", str(tmp_path), "log.txt")
    time.sleep(0.3)
    hard = node.kill(pid, grace=1)
    assert pid in hard  # it survived TERM and was KILLed
    time.sleep(0.2)
    assert node.group_members(pid) == []


def test_roles_start_in_one_command_and_a_failure_keeps_the_pids_started(tmp_path):
    """launch.start starts a node's roles in one command (over SSH each command starts the
    user's shell); those started before a folder that is not there keep their pids, so that
    the cell's cleanup stops them."""
    node = local_node()
    folders = [tmp_path / "it's a role", tmp_path / "second", tmp_path / "missing"]
    for folder in folders[:2]:
        folder.mkdir()
        (folder / "job.sh").write_text("echo started > out.txt\nsleep 300\n")
    started = node.start_roles([str(f) for f in folders[:2]], "job.sh", "log.txt")
    pids = list(started)
    assert len(pids) == 2 and all(node.is_alive(pid) for pid in pids)
    failing = node.start_roles([str(f) for f in folders], "job.sh", "log.txt")
    kept = []
    try:
        for pid in failing:
            kept.append(pid)
        raise AssertionError("a missing folder did not fail the start")
    except UserError as exc:
        assert "2 of 3 roles started" in str(exc) and "missing" in str(exc)
    assert len(kept) == 2 and all(node.is_alive(pid) for pid in kept)
    for pid in pids + kept:
        assert node.kill(pid, grace=5) == []
    assert (folders[0] / "out.txt").read_text() == "started\n"


class CountingNode(nodes.LocalNode):
    """A local node that keeps the commands it was sent."""

    def __init__(self, host):
        super().__init__(host)
        self.commands = []

    def run(self, command, timeout=None, check=True):
        self.commands.append(command)
        return super().run(command, timeout, check)


def test_a_cell_starts_with_two_commands_per_node(tmp_path):
    """Folders and files in one command per node, the roles' starts in one more (over SSH
    each command starts the user's shell: about 100 ms of the node's CPU with pyenv's init)."""
    hosts = inventory.load("local").hosts
    first, second = CountingNode(hosts[0]), CountingNode(hosts[1])
    script = "echo \"$(cat cell.json)\" >> %s\nsleep 60\n" % (tmp_path / "order")
    roles = [(first, "server", 0), (second, "server", 1), (first, "worker", 0),
             (second, "worker", 1)]
    processes = [launch.Process(node, role, rank, str(tmp_path / ("%s's %s-%d" % (
        node.name, role, rank))), script=script, config={"role": role})
        for node, role, rank in roles]
    launch.start(processes)
    try:
        assert len(first.commands) == 2 and len(second.commands) == 2
        assert all(p.pid and first.is_alive(p.pid) for p in processes)
        assert len({p.pid for p in processes}) == 4
        order, deadline = tmp_path / "order", time.time() + 5
        while (not order.exists() or order.read_text().count('"role"') < 4) and \
                time.time() < deadline:
            time.sleep(0.05)
        assert order.read_text().count('"role"') == 4  # each ran its script, its cell.json there
    finally:
        for proc in processes:
            first.kill(proc.pid, grace=5)


class FakeSftp:
    """The calls of paramiko's SFTPClient that a poll makes, on this machine's files."""

    def __init__(self, fail=None):
        self.fail, self.calls = fail, []

    def open(self, path, mode="r"):
        self.calls.append((path, mode))
        if self.fail is not None:
            raise self.fail
        return open(path, mode + "b")

    def utime(self, path, times):
        raise AssertionError("utime sends the controller's clock, not the node's")


def test_an_sftp_poll_touches_by_the_nodes_clock_and_tells_a_file_from_the_link(tmp_path):
    """The lease's age is the node's clock less the file's time: the file is emptied on the
    node (its kernel sets the time), never stamped with this machine's time. A file that is
    not there or not readable is "" as `cat` gives; a link that fails is raised."""
    import socket
    lease = tmp_path / "lease"
    assert nodes._sftp_touch(FakeSftp(), str(lease)) and lease.exists()
    os.utime(lease, (0, 0))
    assert nodes._sftp_touch(FakeSftp(), str(lease)) and time.time() - lease.stat().st_mtime < 5
    assert nodes._sftp_touch(FakeSftp(), str(tmp_path / "gone" / "lease"))  # as `cd ... &&`
    assert not nodes._sftp_touch(FakeSftp(PermissionError(13, "read-only")), str(lease))
    (tmp_path / "rc").write_text("0\n")
    assert nodes._sftp_read(FakeSftp(), str(tmp_path / "rc")) == "0\n"
    assert nodes._sftp_read(FakeSftp(), str(tmp_path / "none")) == ""
    assert nodes._sftp_read(FakeSftp(OSError("Failure")), "/proc/1/stat") == ""
    for link in (ConnectionResetError(104, "reset"), socket.timeout("timed out"), EOFError()):
        with pytest.raises(type(link)):
            nodes._sftp_read(FakeSftp(link), str(tmp_path / "rc"))


def test_a_proc_stat_text_gives_the_state_letter_after_any_name():
    text = "4242 (a) b) (c) S 1 4242 4242 0 -1 4194560"  # a name may hold ") ("
    assert nodes.state_letter(text) == "S"
    assert nodes.state_letter("") == "" and nodes.state_letter("4242 (x)") == ""
    assert nodes.alive(nodes.state_letter("1 (init) Z 0")) is False


def test_a_role_is_stopped_when_it_or_its_trainer_is_in_state_t():
    """STATE's text, a line for the role's shell and one per child: the role lives while its
    shell does; a stopped trainer under a sleeping shell is a stopped role."""
    proc_files = {"/proc/7/stat": "7 (bash) S 1", "/proc/7/task/7/children": "8 9 ",
                  "/proc/8/stat": "8 (python) T 7", "/proc/9/stat": "9 (bash) S 7"}
    text = nodes.tree_state(7, lambda path: proc_files.get(path, ""))
    assert text == "S\nT\nS"
    assert nodes.alive(text) and nodes.stopped(text)
    assert not nodes.stopped("S\nS") and nodes.stopped("T")
    assert nodes.tree_state(6, lambda path: proc_files.get(path, "")) == ""  # gone
    # once the trainer wrote its progress: its own state, not every child's
    read = []
    text = nodes.tree_state(7, lambda path: read.append(path) or proc_files.get(path, ""),
                            '{"phase": "train", "pid": 8}')
    assert text == "S\nT" and "/proc/7/task/7/children" not in read
    assert not nodes.alive("") and not nodes.alive("Z\nS")


def test_a_stopped_child_is_seen_on_this_machine_and_through_the_shell(tmp_path):
    import signal
    from pathlib import Path
    shell = subprocess.Popen(["bash", "-c", "sleep 30; true"], start_new_session=True)
    try:
        for _ in range(50):
            text = nodes._stat_state(shell.pid)
            if len(text.splitlines()) == 2:
                break
            time.sleep(0.05)
        assert len(text.splitlines()) == 2 and not nodes.stopped(text)
        child = int(Path("/proc/%d/task/%d/children" % (shell.pid, shell.pid)).read_text()
                    .split()[0])
        os.kill(child, signal.SIGSTOP)
        time.sleep(0.2)
        assert nodes.stopped(nodes._stat_state(shell.pid))
        command = local_node().run(nodes.STATE.format(pid=shell.pid), check=False).stdout
        assert nodes.alive(command) and nodes.stopped(command), command
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait()


def test_missing_cwd_fails_instead_of_running_elsewhere(tmp_path):
    node = local_node()
    result = node.run("cd %s || exit 97" % (tmp_path / "nope"), check=False)
    assert result.exited == 97


def test_path_expands_home_and_read_text_of_missing_file():
    node = local_node()
    assert node.path("~/x").endswith("/x") and not node.path("~/x").startswith("~")
    assert node.read_text("/nonexistent/file") is None


def test_a_run_reads_the_versions_of_its_own_stack(tmp_path):
    """A node provisioned with two stacks has one envs file per stack; the manifest of a run
    takes its own stack's (one facts file once gave a current run paper-py39's versions)."""
    from dataclasses import replace

    from harness.results import run_manifest
    host = replace(inventory.load("local").hosts[0], workdir=str(tmp_path))
    (tmp_path / "facts.json").write_text('{"cpu_count": 2}')
    for stack, torch in (("current", "2.13.0"), ("paper-py39", "1.7.1")):
        (tmp_path / ("envs-%s.json" % stack)).write_text(
            '{"pytorch": {"python": "3", "packages": {"torch": "%s"}}}' % torch)
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text('{"stack": {"name": "current"}}')
    manifest = run_manifest.finish_manifest(run, [nodes.connect(host)])
    assert manifest["installed"]["current"][host.name]["pytorch"]["packages"]["torch"] == \
        "2.13.0"
    assert manifest["host_facts"][host.name] == {"cpu_count": 2}
    (run / "manifest.json").write_text('{"stack": {"name": "paper"}}')  # never provisioned
    assert run_manifest.finish_manifest(run, [nodes.connect(host)])["installed"] == {
        "paper": {host.name: None}}
    # a run of two stacks reads each one's
    (run / "manifest.json").write_text('{"stacks": [{"name": "paper-py39"}, {"name": "current"}]}')
    installed = run_manifest.finish_manifest(run, [nodes.connect(host)])["installed"]
    assert {s: v[host.name]["pytorch"]["packages"]["torch"] for s, v in installed.items()} == \
        {"paper-py39": "1.7.1", "current": "2.13.0"}


def test_a_cell_stop_terms_every_role_before_waiting_for_any(tmp_path):
    """Each role takes its TERM and needs 2 s to leave (a trainer writing its record): every
    one is TERMed before the first has left, so the graces run side by side, not one after
    another (tensorflow-async's five roles took 22 s to stop)."""
    node = local_node()
    processes = []
    for rank in range(3):
        folder = tmp_path / str(rank)
        folder.mkdir()
        (folder / "slow.sh").write_text(
            "trap 'date +%s.%N > termed; sleep 2; date +%s.%N > left; exit 0' TERM\n"
            "while :; do sleep 0.1; done\n")
        pid = node.start_background("slow.sh", str(folder), "log.txt")
        processes.append(launch.Process(node=node, role="worker", rank=rank,
                                        out_dir=str(folder), pid=pid))
    time.sleep(0.3)
    assert launch.stop(processes) == ({}, [])
    termed = [float((tmp_path / str(r) / "termed").read_text()) for r in range(3)]
    left = [float((tmp_path / str(r) / "left").read_text()) for r in range(3)]
    assert max(termed) < min(left), (termed, left)


def test_a_service_that_needed_a_kill_is_recorded(tmp_path):
    """stop_services kills the services first; the cell's cleanup stops again and finds them
    gone. What needed a KILL is still in the cell's record (it was dropped before)."""
    node = local_node()
    (tmp_path / "stubborn.sh").write_text("trap '' TERM\nsleep 300 &\nwait\n")
    pid = node.start_background("stubborn.sh", str(tmp_path), "log.txt")
    time.sleep(0.3)
    proc = launch.Process(node=node, role="ps", rank=0, out_dir=str(tmp_path), pid=pid,
                          service=True)
    assert launch.stop_services([proc])[0] == "failed"  # no clean result on SIGTERM
    assert launch.stop([proc]) == ({}, [])  # the cleanup finds nothing left
    assert pid in launch.killed_hard([proc])["node1/ps-0"]


def test_liveness_reads_the_process_state():
    assert nodes.alive("S\n") and nodes.alive("Rl")
    assert not nodes.alive("") and not nodes.alive("Z+")


def test_a_local_poll_reads_in_place_what_the_shell_round_trip_reads(tmp_path):
    """LocalNode.poll_files spares a shell per poll; it must see what Node.poll_files sees:
    progress, a live then stopped then dead process, the exit code, and renew the lease."""
    import signal
    node = local_node()
    (tmp_path / "job.sh").write_text("sleep 300\n")
    (tmp_path / "progress.json").write_text('{"phase": "train", "step": 3}')
    pid = node.start_background("job.sh", str(tmp_path), "log.txt")

    def both():
        fast = node.poll_files(str(tmp_path), pid)
        shell = nodes.Node.poll_files(node, str(tmp_path), pid)
        return fast, shell
    fast, shell = both()
    assert fast[0].strip() == shell[0].strip() == '{"phase": "train", "step": 3}'
    # just started, the shell may still be running (R) before it sleeps (S): both are alive
    assert {fast[1].strip()[0], shell[1].strip()[0]} <= {"R", "S"}
    assert nodes.alive(fast[1]) and nodes.alive(shell[1])
    assert (tmp_path / "lease").is_file() and fast[2] == shell[2].strip() == ""
    psutil.Process(pid).send_signal(signal.SIGSTOP)
    time.sleep(0.1)
    fast, shell = both()
    assert fast[1].strip()[0] == shell[1].strip()[0] == "T"
    node.kill(pid, grace=2)
    (tmp_path / "rc").write_text("0\n")
    fast, shell = both()
    assert not nodes.alive(fast[1]) and not nodes.alive(shell[1])
    assert fast[2].strip() == shell[2].strip() == "0"


class Vanishing(nodes.Node):
    """A host whose kernel answers TCP until `gone_after` s, and whose commands hang."""

    def __init__(self, gone_after):
        super().__init__(inventory.load("local").hosts[0])
        self.gone_at = time.monotonic() + gone_after
        self.dropped = 0

    def answers(self, seconds):
        return time.monotonic() < self.gone_at

    def drop(self):
        self.dropped += 1


def test_a_bounded_call_gives_up_as_soon_as_the_host_stops_answering_tcp():
    """A VM destroyed mid-poll: its SSH channel hangs, and a slow node's poll bound is a
    minute (65 s under TCG); the host's silence on TCP ends the wait within REACH_EVERY of it."""
    node = Vanishing(gone_after=1.0)
    began = time.monotonic()
    try:
        node.bounded(lambda: time.sleep(60), 65.0, reach=3.0)
    except nodes.NodeGone as exc:
        assert "did not answer TCP within 3 s" in str(exc.cause)
    else:
        raise AssertionError("no NodeGone")
    assert time.monotonic() - began < 1.0 + nodes.REACH_EVERY + 0.5 and node.dropped == 1


def test_a_bounded_call_on_a_busy_host_that_answers_tcp_waits_its_whole_bound():
    node = Vanishing(gone_after=3600.0)
    began = time.monotonic()
    try:
        node.bounded(lambda: time.sleep(60), 3.0, reach=3.0)
    except nodes.NodeGone:
        raise AssertionError("a host that answers TCP is busy, not gone")
    except UserError as exc:
        assert "did not answer within 3 s" in str(exc.cause)
    assert 2.9 < time.monotonic() - began < 4.0 and node.dropped == 1
    assert node.bounded(lambda: 7, 3.0, reach=3.0) == 7


def test_a_failed_command_is_named_shortened():
    """A role's start carries its scripts: the error names the command's start, not kilobytes."""
    node = local_node()
    with pytest.raises(UserError) as failed:
        node.run("false\n#" + "x" * 5000)
    assert "command failed (exit 1): false" in str(failed.value)
    assert "(4707 characters more)" in str(failed.value) and len(str(failed.value)) < 500


class LocalSteps(nodes.SlurmNode):
    """A Slurm node whose job steps are shells on this machine, counted."""

    def __init__(self):
        super().__init__(inventory.load("local").hosts[0])
        self.steps = []

    def run(self, command, timeout=None, check=True):
        self.steps.append(command)
        return local_node().run(command, timeout=timeout, check=check)


def test_a_slurm_node_polls_all_its_roles_in_one_job_step(tmp_path, monkeypatch):
    """Two roles on one node: one step answers both polls of a round, each answer taken
    once, the same as each role's own poll; the next round asks again; a folder the node did
    not start is polled alone, and a step cut short is an error, not an empty answer."""
    import subprocess
    node = LocalSteps()
    sleepers, folders = [], []
    for name, progress in (("a", '{"step": 1}'), ("b", "")):
        folder = tmp_path / name
        folder.mkdir()
        if progress:
            (folder / "progress.json").write_text(progress)
        sleepers.append(subprocess.Popen(["sleep", "300"]))
        folders.append(str(folder))
        node._roles[sleepers[-1].pid] = (None, str(folder))
    (tmp_path / "b" / "rc").write_text("3")  # no newline: the next role's mark follows it
    try:
        first = node.poll_files(folders[0], sleepers[0].pid)
        second = node.poll_files(folders[1], sleepers[1].pid)
        assert len(node.steps) == 1
        alone = [nodes.Node.poll_files(node, f, s.pid) for f, s in zip(folders, sleepers)]
        assert [first, second] == alone
        assert first[0].strip() == '{"step": 1}' and nodes.alive(first[1])
        assert second[2].strip() == "3" and (tmp_path / "b" / "lease").is_file()
        del node.steps[:]
        node.poll_files(folders[1], sleepers[1].pid)  # a new round: asked again
        node.poll_files(str(tmp_path), sleepers[0].pid)  # not the role's folder: alone
        assert len(node.steps) == 2 and "#dlbench-role" not in node.steps[1]
        node._polled = (0.0, {})  # a's answer from that round is gone with it
        monkeypatch.setattr(node, "unusable", lambda fresh=False: None)  # no squeue here
        monkeypatch.setattr(node, "run", lambda command, timeout=None, check=True:
                            nodes._Result(1, "#dlbench-role %d#\n{}" % sleepers[0].pid, "gone"))
        with pytest.raises(UserError, match="did not answer its poll: gone"):
            node.poll_files(folders[0], sleepers[0].pid)
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()


def test_a_stalled_process_is_asked_for_its_stacks_before_it_is_stopped(tmp_path):
    """launch.ask_for_stacks: SIGUSR1 through the node's shell to the pid the progress file
    gives; the trainer's handler (bench/common/runner.py) writes where every thread stood to
    its log, and the process runs on (the stop is the cell's cleanup). A process with no pid
    on record, or one outside the role's group (the recorded pid leads it), is not signalled."""
    child_code = ("import time\n"
                  "from bench.common.runner import print_stacks_when_asked\n"
                  "print_stacks_when_asked()\n"
                  "def calibration_that_never_ends():\n"
                  "    time.sleep(60)\n"
                  "print('ready', flush=True)\n"
                  "calibration_that_never_ends()\n")
    log = tmp_path / "log.txt"
    with open(str(log), "w") as err:
        child = subprocess.Popen([sys.executable, "-c", child_code], cwd=str(REPO),
                                 stdout=subprocess.PIPE, stderr=err, text=True,
                                 start_new_session=True)  # its own group, as a role's
    try:
        assert child.stdout.readline().strip() == "ready"
        node = local_node()
        other_group = SimpleNamespace(node=node, pid=os.getpid(), progress={"pid": child.pid})
        launch.ask_for_stacks([SimpleNamespace(node=None, progress={}), other_group])
        assert "most recent call first" not in log.read_text()
        launch.ask_for_stacks([SimpleNamespace(node=node, pid=child.pid,
                                               progress={"pid": child.pid})])
        assert child.poll() is None
        said = log.read_text()
        assert "most recent call first" in said and "calibration_that_never_ends" in said, said
    finally:
        child.kill()
        child.wait()

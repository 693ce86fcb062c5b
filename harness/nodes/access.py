"""One interface to a benchmark node, whether it is this machine or an SSH host.

Background processes are started with `setsid`, so their pid is also their process-group id:
killing `-pid` reaches everything the run started (loader workers included) and nothing else.
"""
import os
import re
import shlex
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import invoke

from contract.errors import UserError
from contract import nodefolder

# a role's state, then its children's (its trainer's), a line each; empty when it is gone
STATE = "ps -o stat= -p {pid}; ps -o stat= --ppid {pid} 2>/dev/null"
PID_MARK = "dlbench-pid "  # before each started role's pid: a ~/.bashrc may print too
SFTP_RETRY = 60.0  # s before a connection that refused SFTP is asked again


def _read(path):
    try:
        return path.read_text()
    except OSError:
        return ""


def _stat_state(pid, progress_text=""):
    """What STATE prints for a local pid, from /proc: its state letter and its trainer's (or
    its children's), a line each; "" when it is gone."""
    return tree_state(pid, _read_proc, progress_text)


def _read_proc(path):
    try:
        return Path(path).read_text()
    except OSError:
        return ""


TRAINER_PID = re.compile(r'"pid":\s*(\d+)')


def tree_state(pid, read, progress_text=""):
    """A pid's state letter, then its trainer's, a line each, from read(path) of /proc's
    files (this machine's, or a node's through SFTP): "" when it is gone. The trainer is the
    pid its progress file gives (one read more a poll); before it wrote one, every child of
    the role's shell (a read per child)."""
    own = state_letter(read("/proc/%d/stat" % pid))
    if not own:
        return ""
    trainer = TRAINER_PID.search(progress_text or "")
    children = [trainer.group(1)] if trainer else \
        read("/proc/%d/task/%d/children" % (pid, pid)).split()
    return "\n".join([own] + [state_letter(read("/proc/%s/stat" % child))
                              for child in children if child.isdigit()])


def shortened(command, limit=300):
    """A command as an error names it: a role's start carries its scripts (kilobytes)."""
    if len(command) <= limit:
        return command
    return "%s ... (%d characters more)" % (command[:limit], len(command) - limit)


def state_letter(stat_text):
    """The state field of a /proc/<pid>/stat text ("" for none): after the command's name,
    which may itself hold spaces and parentheses."""
    fields = stat_text.rsplit(")", 1)[1].split() if ")" in stat_text else []
    return fields[0] if fields else ""


REACH_EVERY = 2.0  # s between two asks of a host's kernel while a bounded call waits
GONE_FIX = ("check the host and its network; its processes stop themselves when their lease "
            "runs out")


class NodeGone(UserError):
    """The host's kernel no longer answers TCP: it is down or cut off, not busy."""


def poll_command(out_dir, pid):
    """The shell lines that print a role's progress.json, its state and rc, touching its
    lease (split_poll reads what they print)."""
    return ("cd %s && touch %s && cat %s 2>/dev/null; echo; echo '#ps'; %s; echo '#rc'; "
            "cat %s 2>/dev/null" % (q(out_dir), nodefolder.LEASE, nodefolder.PROGRESS,
                                    STATE.format(pid=pid), nodefolder.EXIT_CODE))


def split_poll(text):
    """(progress text, state text, rc text) from what poll_command printed."""
    progress_text, rest = text.split("#ps", 1)
    ps_text, rc_text = rest.split("#rc", 1)
    return progress_text, ps_text, rc_text


def alive(state_text):
    """From STATE's output: the role running, not gone and not a zombie (dead, unreaped)."""
    state = (state_text.strip().splitlines() or [""])[0].strip()
    return bool(state) and not state.startswith("Z")


def stopped(state_text):
    """From STATE's output: the role or its trainer stopped by a signal (SIGSTOP, SIGTSTP:
    state T), which no progress file can tell before the trainer's first one is written."""
    return any(line.strip().startswith("T") for line in state_text.splitlines())

q = shlex.quote
REACH_TIMEOUT = 3.0  # s a node's kernel may take to answer TCP (Node.answers): else it is gone


class Node:
    def __init__(self, host):
        self.host = host
        self.name = host.name
        self._home = None

    # --- transport: subclasses provide these three -------------------------------------------
    def _runner(self):
        raise NotImplementedError

    def get(self, remote, local):
        raise NotImplementedError

    # --- shared on top of run() -------------------------------------------------------------
    def run(self, command, timeout=None, check=True):
        result = self._runner().run(command, hide=True, warn=True, timeout=timeout,
                                    in_stream=False)
        if check and result.exited != 0:
            raise UserError("%s: command failed (exit %d): %s\n%s"
                            % (self.name, result.exited, shortened(command),
                               result.stderr.strip()[-2000:]))
        return result

    def bounded(self, function, seconds, reach=None):
        """function(), given up after `seconds`: on a cut link an SSH channel hangs for minutes.
        The connection is dropped then, so the next call reconnects (and fails fast if the
        host is still cut off). With `reach`, the host's kernel is asked every REACH_EVERY s
        meanwhile (answers(reach)), and a host that does not answer is given up at once
        (NodeGone): a slow node's bound is a minute, a destroyed VM's failure must not wait
        for it."""
        box = {}

        def target():
            try:
                box["value"] = function()
            except Exception as exc:  # re-raised in the caller's thread
                box["error"] = exc
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        deadline = time.monotonic() + seconds
        while thread.is_alive() and time.monotonic() < deadline:
            thread.join(min(REACH_EVERY, deadline - time.monotonic()) if reach else seconds)
            if thread.is_alive() and reach and not self.answers(reach):
                self.drop()
                raise NodeGone("%s did not answer TCP within %.0f s (its link or the host is "
                               "down)" % (self.name, reach), GONE_FIX)
        if thread.is_alive():
            self.drop()
            raise UserError("%s did not answer within %.0f s (its link or the host is down)"
                            % (self.name, seconds), GONE_FIX)
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def drop(self):
        """Forget a connection that hangs (SSH); the next call opens a new one."""

    def answers(self, seconds):
        """Whether the host is there at all (a node on this machine always is)."""
        return True

    def path(self, path):
        """Absolute path on the node; `~/` means the node user's home."""
        path = str(path)
        if path.startswith("~/"):
            if self._home is None:
                self._home = self.run("echo $HOME").stdout.strip()
            path = self._home + path[1:]
        return path

    def start_background(self, script, cwd, log):
        """Run `bash script` in cwd as a new session; returns its pid (= its process group)."""
        (pid,) = list(self.start_roles([cwd], script, log))
        return pid

    def start_roles(self, folders, script, log):
        """start_background in each folder, in order, in one command: over SSH each command
        starts the user's shell on the node. Yields each pid, so that a caller keeps those of
        the roles started before a failure."""
        # `cd` on its own line: `a && b &` would background a subshell, whose pid is not b's.
        command = "\n".join(
            "cd %s || exit 97\nsetsid bash %s > %s 2>&1 < /dev/null & echo %s$!"
            % (q(cwd), q(script), q(log), PID_MARK) for cwd in folders)
        done = self.run(command, check=False)
        pids = [int(pid) for pid in re.findall(re.escape(PID_MARK) + r"(\d+)", done.stdout)]
        for pid in pids:
            yield pid
        if len(pids) != len(folders):  # those started run on: the caller stops them
            raise UserError("%s: %d of %d roles started (exit %d) in %s\n%s"
                            % (self.name, len(pids), len(folders), done.exited,
                               " ".join(folders), done.stderr.strip()[-2000:]))

    def is_alive(self, pid):
        return alive(self.run(STATE.format(pid=pid), check=False).stdout)

    def group_members(self, pid):
        """Live pids in the session the run started (loader workers included); zombies are
        dead already and only wait for their parent to reap them."""
        out = self.run("ps -o pid=,stat= -s %d" % pid, check=False).stdout.splitlines()
        return [int(line.split()[0]) for line in out
                if line.split() and not line.split()[1].startswith("Z")]

    def terminate(self, pid):
        """TERM the whole group, without waiting."""
        # CONT after TERM: a stopped process (SIGSTOP, a stall) takes its TERM only once it runs
        self.run("kill -TERM -- -%d 2>/dev/null; kill -CONT -- -%d 2>/dev/null" % (pid, pid),
                 check=False)

    def kill(self, pid, grace=5.0):
        """TERM the whole group, KILL whatever is left after `grace` s; returns pids killed hard."""
        self.terminate(pid)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not self.group_members(pid):
                return []
            time.sleep(0.2)
        left = self.group_members(pid)
        if left:
            self.run("kill -KILL -- -%d 2>/dev/null" % pid, check=False)
            deadline = time.monotonic() + 2.0
            while self.group_members(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        return left

    def processes_in(self, directory):
        """Live pids whose working directory is `directory` or below it: what a run left
        behind (every role starts in its own folder; zombies have no cwd and do not count)."""
        out = self.run("for p in /proc/[0-9]*; do c=$(readlink \"$p/cwd\" 2>/dev/null) && "
                       "echo \"${p#/proc/} $c\"; done", check=False).stdout
        prefix = directory.rstrip("/") + "/"
        return [int(line.split(" ", 1)[0]) for line in out.splitlines()
                if " " in line and (line.split(" ", 1)[1] + "/").startswith(prefix)]

    def poll_files(self, out_dir, pid):
        """(progress.json, the process's state as STATE prints it, rc) of a role's folder, in
        one round trip, touching its lease."""
        done = self.run(poll_command(out_dir, pid), check=False)
        if "#rc" not in done.stdout:  # the command never ran there (a Slurm step refused)
            raise self.unanswered(done)
        return split_poll(done.stdout)

    def unanswered(self, done):
        return UserError(self.unusable(fresh=True) or "%s did not answer its poll: %s" % (
            self.name, done.stderr.strip()[-300:] or "exit %d" % done.exited))

    def read_text(self, path):
        result = self.run("cat %s 2>/dev/null" % q(path), check=False)
        return result.stdout if result.exited == 0 else None

    def mkdir(self, path):
        self.run("mkdir -p %s" % q(path))

    def close(self):
        pass

    def unusable(self, fresh=False):
        """Why this node can run no more of the run (its scheduler took it away), or None.
        fresh: ask now, not an answer kept from the last few seconds."""
        return None


class LocalNode(Node):
    """A node on this machine: commands through Invoke, files by copying."""

    def _runner(self):
        return invoke.Context()

    def path(self, path):
        return os.path.expanduser(str(path))

    def get(self, remote, local):
        shutil.copyfile(remote, local)

    def poll_files(self, out_dir, pid):
        """The same as a shell round trip, read in place: a poll a second per process spent
        a shell, ps and cat on the CPUs that the pinned nodes own (docs/methodology.md)."""
        folder = Path(out_dir)
        try:
            (folder / nodefolder.LEASE).touch()
        except OSError as exc:
            raise UserError("%s did not answer its poll: %s" % (self.name, exc))
        progress = _read(folder / nodefolder.PROGRESS)
        return progress, _stat_state(pid, progress), _read(folder / nodefolder.EXIT_CODE)

    def read_text(self, path):
        try:
            return Path(path).read_text()
        except OSError:
            return None


QUIET_PORT = 1  # tcpmux: nothing listens there on the nodes this package meets


class SshNode(Node):
    """A node over SSH (Fabric). Host keys are checked against known_hosts, never added."""

    def __init__(self, host):
        super().__init__(host)
        self._conn = None
        self._sftp_refused = (None, 0.0)  # (the connection that refused SFTP, when)

    def _runner(self):
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def poll_files(self, out_dir, pid):
        """As Node's, but through the connection's SFTP session, which starts nothing on the
        node: a command per process and second starts the user's shell, and a shell whose
        ~/.bashrc initialises pyenv or conda took about 100 ms of the node's CPU per poll
        (2-3 ms through SFTP), which the cell's interference figures then counted as another
        program's (docs/methodology.md, "Interference"). A node that refuses SFTP, or lets it
        write nothing, is polled with the command."""
        conn = self._runner()
        sftp = self._sftp(conn)
        folder = str(out_dir).rstrip("/") + "/"
        try:
            if sftp is not None and _sftp_touch(sftp, folder + nodefolder.LEASE):
                progress = _sftp_read(sftp, folder + nodefolder.PROGRESS)
                return (progress, tree_state(pid, lambda path: _sftp_read(sftp, path), progress),
                        _sftp_read(sftp, folder + nodefolder.EXIT_CODE))
        except Exception as exc:  # noqa: BLE001 (paramiko's and the socket's: the link)
            if self._conn is conn:  # not one a later poll made after this one hung
                self.drop()
            raise UserError("%s did not answer its poll: %s" % (
                self.name, str(exc) or type(exc).__name__))
        if sftp is not None:
            self._sftp_refused = (conn, time.monotonic())
        return super().poll_files(out_dir, pid)

    def _sftp(self, conn):
        """The connection's SFTP session, or None where it refused one (or could not write)
        less than SFTP_RETRY seconds ago: a refusal may have been the link's."""
        refused, when = self._sftp_refused
        if refused is conn and time.monotonic() - when < SFTP_RETRY:
            return None
        try:
            return conn.sftp()
        except Exception:  # noqa: BLE001 (paramiko's: no sftp subsystem there)
            self._sftp_refused = (conn, time.monotonic())
            return None

    def _connect(self):
        import fabric
        import paramiko

        kwargs = {"look_for_keys": not self.host.key, "allow_agent": not self.host.key}
        if self.host.key:
            kwargs["key_filename"] = os.path.expanduser(self.host.key)

        def connection(host, user, port, gateway=None):
            conn = fabric.Connection(host, user=user, port=port, connect_timeout=10,
                                     connect_kwargs=dict(kwargs), gateway=gateway)
            conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
            if self.host.known_hosts:  # the bastion's key is checked as the nodes' are
                conn.client.load_host_keys(os.path.expanduser(self.host.known_hosts))
            return conn

        user, bastion, port = self.host.jump or (None, None, None)
        gateway = connection(bastion, user, port) if bastion else None
        conn = connection(self.host.ssh_host, self.host.user, self.host.ssh_port, gateway)
        try:
            conn.open()
        except Exception as exc:  # paramiko and socket errors: translate to cause + fix
            raise _ssh_error(self.host, exc) from None
        return conn

    def get(self, remote, local):
        self._runner().get(str(remote), str(local))

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def drop(self):
        self._conn = None  # closing it could hang as well

    def answers(self, seconds):
        """Whether the host's kernel answers TCP within `seconds`, which it does even when its
        CPUs are too busy to run a command (an emulated VM importing a framework); a host
        that is down or cut off does not. First a port where nothing listens (QUIET_PORT):
        the kernel refuses at once and nothing is started on the host; where a firewall
        drops that, the SSH port (sshd then starts a process, which an emulated CPU feels
        when it happens every second). Behind a bastion, the SSH port as the bastion reaches
        it."""
        if self.host.jump:
            return self._answers_through_bastion(seconds)
        for port in (QUIET_PORT, self.host.ssh_port):
            try:
                socket.create_connection((self.host.ssh_host, port), seconds / 2).close()
                return True
            except ConnectionRefusedError:
                return True
            except OSError:
                continue
        return False


    def _answers_through_bastion(self, seconds):
        try:
            gateway = self._runner().gateway
            gateway.open()
            channel = gateway.transport.open_channel(
                "direct-tcpip", (self.host.ssh_host, self.host.ssh_port), ("127.0.0.1", 0),
                timeout=seconds)
            channel.close()
            return True
        except Exception:  # noqa: BLE001 (paramiko's and the socket's: the host is not there)
            return False


def _sftp_read(sftp, path):
    """A file's text through SFTP, "" where it is not there or cannot be read (as `cat`): an
    error the server answered with, not one of the link's, which is raised."""
    try:
        with sftp.open(path) as handle:
            return handle.read().decode(errors="replace")
    except OSError as exc:
        if _answered(exc):
            return ""
        raise


def _sftp_touch(sftp, path):
    """`touch` through SFTP, as the node's clock says (a role's lease compares the file's time
    with the node's clock; SFTP's own utime would send this machine's): opening the file to
    write it empties it, which sets its time, and makes it where missing. True, or False
    where the server lets nothing be written (the caller then polls with the command);
    nothing where its folder is not there (as the command's `cd ... &&`)."""
    try:
        sftp.open(path, "w").close()
    except OSError as exc:
        if isinstance(exc, PermissionError):
            return False
        if not _answered(exc):
            raise
    return True


def _answered(exc):
    """Whether an SFTP error is the server's answer about a file (missing, refused, or its
    generic failure, as a /proc file whose process just left), not the link failing."""
    return isinstance(exc, (FileNotFoundError, PermissionError)) or type(exc) is OSError


class SlurmNode(Node):
    """A node of a Slurm allocation: each command is a job step on it (srun --overlap, so it
    runs beside the roles' steps), and each role is a job step of its own, which stopping
    the role cancels (scancel) besides killing its pid."""
    STEP_FILE = nodefolder.SLURM_STEP  # written in the role's folder: which job step ran it
    CHECK_SECONDS = 2.0
    # s a batched poll's answers serve the node's other roles: the round polls the nodes in
    # turn, each step taking a few tenths of a second, and an answer older than the 1 s
    # between a role's polls would belong to a round that has passed
    POLL_SHARE = 0.9
    ROLE_MARK = "#dlbench-role "

    def __init__(self, host):
        super().__init__(host)
        self.job = host.vars.get("slurm_job")
        self._roles = {}  # pid -> (srun client, folder)
        self._polled = (0.0, {})  # (when, pid -> its answer not yet taken), see poll_files
        self._checked = (-self.CHECK_SECONDS, None)  # (when, what Slurm said)
        self.ended = None  # srun's words, once it refused a step because the job has ended

    def srun(self, *command):
        return ["srun", "--jobid=%s" % self.job, "--overlap", "--nodes=1", "--ntasks=1",
                "--nodelist=%s" % self.name, "--quiet", *command]

    def _runner(self):
        return _Srun(self)

    def get(self, remote, local):
        data = subprocess.run(self.srun("cat", str(remote)), capture_output=True, timeout=120)
        if data.returncode != 0:
            raise UserError("%s: cannot read %s through srun: %s"
                            % (self.name, remote, data.stderr.decode(errors="replace")[-500:]))
        Path(local).write_bytes(data.stdout)

    def start_background(self, script, cwd, log):
        """The role as its own job step, in a session of its own (so that the pid kill
        reaches its children); returns its pid once the step has written it."""
        inner = "echo $$ > role.pid; exec bash %s" % q(script)
        command = ("cd %s || exit 97; echo $SLURM_JOB_ID.$SLURM_STEP_ID > %s; "
                   "exec setsid -w bash -c %s > %s 2>&1 < /dev/null"
                   % (q(cwd), self.STEP_FILE, q(inner), q(log)))
        client = subprocess.Popen(self.srun("--job-name=dlbench-role", "bash", "-c", command),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = (self.read_text("%s/role.pid" % cwd) or "").strip()
            if text.isdigit():
                self._roles[int(text)] = (client, cwd)
                return int(text)
            if client.poll() is not None:
                break
            time.sleep(0.2)
        client.kill()
        raise UserError("%s: the job step for %s did not start" % (self.name, script),
                        "check `squeue -s -j %s` and the node's slurmd log" % self.job)

    def poll_files(self, out_dir, pid):
        """A role's poll, answered from one job step that polled all the node's roles: a step
        is a process launch by slurmd, and a step per role and second took a share of a
        small node's CPU that its cells then read as interference. The other roles' answers
        wait for their own polls in the same round (POLL_SHARE seconds at most), each taken
        once; a folder the node did not start (a test's) is polled alone."""
        folders = {p: cwd for p, (_, cwd) in list(self._roles.items())}
        if folders.get(pid) != out_dir:
            return super().poll_files(out_dir, pid)
        when, answers = self._polled
        answer = answers.pop(pid, None) if time.monotonic() - when <= self.POLL_SHARE else None
        if answer is None:
            began = time.monotonic()
            answers = self._poll_all(folders)
            answer = answers.pop(pid)
            self._polled = (began, answers)
        return answer

    def _poll_all(self, folders):
        """pid -> (progress, state, rc) of every folder, in one job step."""
        command = "; ".join("echo '%s%d#'; ( %s )" % (self.ROLE_MARK, pid, poll_command(f, pid))
                            for pid, f in sorted(folders.items()))
        done = self.run(command, check=False)
        parts = re.split(r"%s(\d+)#\n" % self.ROLE_MARK, done.stdout)[1:]
        answers = {int(pid): text for pid, text in zip(parts[::2], parts[1::2])}
        if sorted(answers) != sorted(folders) or any("#rc" not in t for t in answers.values()):
            raise self.unanswered(done)  # the step never ran there, or was cut short
        return {pid: split_poll(text) for pid, text in answers.items()}

    def start_roles(self, folders, script, log):
        """Each role a job step of its own (start_background), in order."""
        for cwd in folders:
            yield self.start_background(script, cwd, log)

    def unusable(self, fresh=False):
        """The node drained, down or failed, or the allocation over (time limit, cancelled),
        as Slurm says; asked at most every CHECK_SECONDS."""
        if self.ended:  # srun said so: an allocation that ended never comes back
            return "Slurm allocation %s is over (%s)" % (self.job, self.ended)
        now = time.monotonic()
        if fresh or now - self._checked[0] >= self.CHECK_SECONDS:
            self._checked = (now, self._slurm_says())
        return self._checked[1]

    def _slurm_says(self):
        job = _ask_slurm(["squeue", "-h", "-j", str(self.job), "-o", "%T"])
        if job is None:
            return "Slurm does not answer (squeue timed out: is slurmctld down?)"
        state = job.stdout.strip() if job.returncode == 0 else ""
        if state != "RUNNING":  # squeue fails on a job that has left the queue
            return "Slurm allocation %s is %s" % (self.job, state or "over")
        node = _ask_slurm(["scontrol", "-o", "show", "node", self.name])
        node = node.stdout if node is not None else ""
        state = re.search(r"\bState=(\S+)", node)
        if state and re.search(r"DRAIN|DOWN|FAIL|NOT_RESPONDING", state.group(1)):
            reason = re.search(r"\bReason=(.*?)(?: \w+=|$)", node)
            return "Slurm node %s is %s%s" % (self.name, state.group(1),
                                              " (%s)" % reason.group(1) if reason else "")
        return None

    def kill(self, pid, grace=5.0):
        hard = super().kill(pid, grace)
        client, cwd = self._roles.pop(pid, (None, None))
        step = (self.read_text("%s/%s" % (cwd, self.STEP_FILE)) or "").strip() if cwd else ""
        if step:
            subprocess.run(["scancel", "--quiet", step], capture_output=True, timeout=30)
        if client is not None:
            try:
                client.wait(timeout=10)
            except subprocess.TimeoutExpired:
                client.kill()
        return hard


# srun's refusals once the allocation is ending or over (time limit, cancelled, node failure)
JOB_ENDED = re.compile(r"already completing or completed|has expired|Invalid job id|"
                       r"Job has been cancelled|time limit")


def _ask_slurm(command, timeout=5):
    """A Slurm client command's result, or None when slurmctld does not answer in time (a
    cell must fail within seconds, not after the client's own minute of retries)."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None


class _Srun:
    """Node.run's runner for a Slurm node: one job step per command."""

    def __init__(self, node):
        self.node = node

    def run(self, command, hide=True, warn=True, timeout=None, in_stream=False):
        try:
            done = subprocess.run(self.node.srun("bash", "-c", command), capture_output=True,
                                  text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise UserError("%s: a job step did not finish within %s s" % (self.node.name,
                                                                          timeout)) from None
        ended = JOB_ENDED.search(done.stderr) if done.returncode else None
        if ended:  # squeue may still say RUNNING while the job is being ended (time limit)
            self.node.ended = ended.group(0)
        return _Result(done.returncode, done.stdout, done.stderr)


class _Result:
    def __init__(self, exited, stdout, stderr):
        self.exited, self.stdout, self.stderr = exited, stdout, stderr


def _ssh_error(host, exc):
    import paramiko

    where = "%s (%s@%s:%d)" % (host.name, host.user, host.ssh_host, host.ssh_port)
    if isinstance(exc, paramiko.AuthenticationException):
        return UserError("%s: SSH login refused: %s" % (where, exc),
                         "check ansible_user and ansible_ssh_private_key_file (%s) for this host"
                         % (host.key or "agent/default keys"))
    if isinstance(exc, paramiko.BadHostKeyException) or "known_hosts" in str(exc) \
            or "not found in known_hosts" in str(exc):
        return UserError("%s: host key not trusted: %s" % (where, exc),
                         "add the host's key to %s (ssh-keyscan, after checking it)"
                         % (host.known_hosts or "~/.ssh/known_hosts"))
    if isinstance(exc, (socket.error, paramiko.ssh_exception.NoValidConnectionsError)):
        return UserError("%s: unreachable: %s" % (where, exc),
                         "check that the host is up, sshd listens on port %d, and the address "
                         "in the inventory is right" % host.ssh_port)
    return UserError("%s: SSH failed: %s" % (where, exc))


def connect(host):
    if host.connection == "slurm":
        return SlurmNode(host)
    return LocalNode(host) if host.connection == "local" else SshNode(host)


def connect_all(inventory):
    return [connect(host) for host in inventory.hosts]

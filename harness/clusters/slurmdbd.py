"""Slurm's accounting on the emulated cluster, so that `sacct` answers as on an HPC cluster: a
MariaDB server of its own (data in the cluster's slurm folder, on 127.0.0.1 at a free port, a
`slurm` user with a random password) and slurmdbd at the controller's address. slurmctld
sends it every job and step; jobacct_gather/linux samples each step's CPU and memory.
Every pid is recorded beside the other daemons', and `cluster.down` stops them by it."""
import secrets
import socket
import subprocess
import time

from contract.errors import UserError

PROGRAMS = {"mariadbd": "/usr/sbin/mariadbd", "mariadb-install-db": "/usr/bin/mariadb-install-db",
            "mariadb": "/usr/bin/mariadb", "slurmdbd": "/usr/sbin/slurmdbd",
            "sacctmgr": "/usr/bin/sacctmgr"}
DATABASE = "slurm_acct_db"
READY_SECONDS = 30


def free_port(address):
    """A port nobody listens on now (the kernel's choice): no fixed port to collide with."""
    with socket.socket() as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def config_lines(here, address, port):
    """slurm.conf's accounting lines; steps sampled every second (cells last seconds)."""
    return ["AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=%s" % address, "AccountingStoragePort=%d" % port,
            # what clients and slurmctld give slurmdbd: MUNGE's socket (AuthInfo is not read)
            "AccountingStoragePass=%s" % (here / "munge.socket"),
            "JobAcctGatherType=jobacct_gather/linux", "JobAcctGatherFrequency=task=1"]


def start_database(here):
    """MariaDB on 127.0.0.1 only; returns (pid, port, password of the `slurm` user)."""
    data, sock = here / "db", here / "db.sock"
    if not data.is_dir():
        _run([PROGRAMS["mariadb-install-db"], "--datadir=%s" % data, "--user=root",
              "--auth-root-authentication-method=socket", "--skip-test-db"], here / "db.log")
    port = free_port("127.0.0.1")
    log = here / "db.err"
    pid = _spawn([PROGRAMS["mariadbd"], "--no-defaults", "--datadir=%s" % data, "--user=root",
                  "--bind-address=127.0.0.1", "--port=%d" % port, "--socket=%s" % sock,
                  "--log-error=%s" % log, "--skip-log-bin", "--innodb-buffer-pool-size=32M"],
                 here / "db.out")
    password = secrets.token_hex(16)
    sql = ("CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{0}'; "
           "ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{0}'; "
           "GRANT ALL ON {1}.* TO 'slurm'@'127.0.0.1';").format(password, DATABASE)
    _until_ok([PROGRAMS["mariadb"], "--no-defaults", "-S", str(sock), "-u", "root", "-e", sql],
              "MariaDB", log)
    return pid, port, password


def start_slurmdbd(here, env, address, db_port, password, port):
    """slurmdbd on address:port (its config beside slurm.conf, where Slurm looks for it);
    returns its pid."""
    conf = here / "slurmdbd.conf"
    conf.write_text("\n".join([
        "AuthType=auth/munge", "AuthInfo=socket=%s" % (here / "munge.socket"),
        "DbdHost=%s" % socket.gethostname().split(".")[0], "DbdAddr=%s" % address,
        "DbdPort=%d" % port, "SlurmUser=root", "PidFile=%s" % (here / "slurmdbd.pid"),
        "LogFile=%s" % (here / "slurmdbd.log"), "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1", "StoragePort=%d" % db_port, "StorageUser=slurm",
        "StoragePass=%s" % password, "StorageLoc=%s" % DATABASE]) + "\n")
    conf.chmod(0o600)  # slurmdbd refuses a config others can read: it holds the password
    return _spawn([PROGRAMS["slurmdbd"], "-D"], here / "slurmdbd.out", env=env)


def register_cluster(env, name, log):
    """The cluster in slurmdbd's books (sacctmgr), once slurmdbd answers."""
    out = _until_ok([PROGRAMS["sacctmgr"], "-i", "show", "cluster", "-n", "format=cluster"],
                    "slurmdbd", log, env=env)
    if name not in out.split():
        _until_ok([PROGRAMS["sacctmgr"], "-i", "add", "cluster", name], "slurmdbd", log, env=env)


def _spawn(command, out, env=None):
    with open(str(out), "ab") as handle:
        return subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True).pid


def _run(command, log):
    done = subprocess.run(command, capture_output=True, text=True)
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise UserError("`%s` failed (exit %d)" % (command[0], done.returncode), "see %s" % log)


def _until_ok(command, what, log, env=None):
    """Retry `command` until it succeeds (the daemon is up); its stdout."""
    deadline, last = time.monotonic() + READY_SECONDS, ""
    while time.monotonic() < deadline:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=30)
        if done.returncode == 0:
            return done.stdout
        last = (done.stderr or done.stdout).strip()[-300:]
        time.sleep(0.5)
    raise UserError("%s does not answer after %d s: %s" % (what, READY_SECONDS, last),
                    "see %s" % log)

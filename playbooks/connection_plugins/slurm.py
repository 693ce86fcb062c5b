# An Ansible connection that reaches each node of a Slurm allocation through job steps, for
# clusters where the nodes take no SSH: every command, and every file copied to or from a node,
# is one `srun --overlap` step on that node. `invoke provision` uses it for `--inventory slurm`.
from __future__ import annotations

DOCUMENTATION = """
    name: slurm
    short_description: run tasks as job steps of a Slurm allocation (srun --overlap)
    description:
        - Each command is a job step on the host's node, files travel through the step's
          standard input and output. The allocation must be running.
    author: dlbench
    options:
        job:
            description: the allocation's job id
            vars:
                - name: slurm_job
            env:
                - name: SLURM_JOB_ID
        node:
            description: the Slurm node name of the host
            vars:
                - name: inventory_hostname
                - name: ansible_slurm_node
        step_timeout:
            description: seconds one job step may take before it counts as failed
            default: 3600
            type: int
            vars:
                - name: ansible_slurm_step_timeout
    extends_documentation_fragment:
        - connection_pipelining
"""

import subprocess

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display

display = Display()


class Connection(ConnectionBase):
    transport = "slurm"
    has_pipelining = True

    def _connect(self):
        if not self.get_option("job"):
            raise AnsibleConnectionFailure("no Slurm job: set slurm_job or SLURM_JOB_ID")
        self._connected = True
        return self

    def _srun(self, command, data=None, source=None):
        """One job step on the node running `command` (argv), fed `data` (bytes) or the open
        file `source` on its standard input; returns (rc, stdout, stderr)."""
        argv = ["srun", "--jobid=%s" % self.get_option("job"), "--overlap", "--nodes=1",
                "--ntasks=1", "--nodelist=%s" % self.get_option("node"), "--quiet",
                "--job-name=dlbench-provision"] + command
        display.vvv("SLURM: %s" % " ".join(argv), host=self.get_option("node"))
        try:
            done = subprocess.run(argv, input=data, capture_output=True,
                                  stdin=None if data is not None else (source or
                                                                       subprocess.DEVNULL),
                                  timeout=self.get_option("step_timeout"))
        except FileNotFoundError:
            raise AnsibleConnectionFailure("srun is not on PATH: run on a login node of the "
                                           "Slurm cluster") from None
        except subprocess.TimeoutExpired:
            raise AnsibleConnectionFailure("a job step on %s did not end within %d s"
                                           % (self.get_option("node"),
                                              self.get_option("step_timeout"))) from None
        return done.returncode, done.stdout, done.stderr

    def exec_command(self, cmd, in_data=None, sudoable=True):
        super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        return self._srun(["/bin/sh", "-c", to_text(cmd)], data=in_data)

    def put_file(self, in_path, out_path):
        super().put_file(in_path, out_path)
        with open(to_bytes(in_path), "rb") as handle:  # streamed, not read into memory
            rc, _, err = self._srun(["/bin/sh", "-c", 'cat > "$0"', to_text(out_path)],
                                    source=handle)
        if rc != 0:
            raise AnsibleError("cannot write %s on %s through srun: %s"
                               % (out_path, self.get_option("node"), to_text(err)))

    def fetch_file(self, in_path, out_path):
        super().fetch_file(in_path, out_path)
        rc, data, err = self._srun(["cat", to_text(in_path)])
        if rc != 0:
            raise AnsibleError("cannot read %s on %s through srun: %s"
                               % (in_path, self.get_option("node"), to_text(err)))
        with open(to_bytes(out_path), "wb") as handle:
            handle.write(data)

    def close(self):
        self._connected = False

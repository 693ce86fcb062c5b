"""What the user's terminal shows during provisioning: Ansible's output through the package's
callback (playbooks/callback_plugins/dlbench.py), run for real by ansible-playbook on this
machine with the repository's ansible.cfg."""
import copy
import io
import os
import subprocess
import sys

import pytest
from rich.console import Console

from harness.nodes.screen import ProvisionScreen
from harness.paths import REPO

PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Start two builds in the background
      ansible.builtin.command: sleep {{ item.seconds }}
      async: 60
      poll: 0
      loop:
        - {name: tensorflow, seconds: 1}
        - {name: pytorch, seconds: 4}
      loop_control:
        label: "{{ item.name }}"
      register: started
      changed_when: true
    - name: Wait for the builds
      ansible.builtin.async_status:
        jid: "{{ item.ansible_job_id }}"
      loop: "{{ started.results }}"
      loop_control:
        label: "{{ item.item.name }}"
      register: waited
      until: waited.finished
      retries: 60
      delay: 1
    - name: Remove the finished builds' job files
      ansible.builtin.async_status:
        jid: "{{ item.ansible_job_id }}"
        mode: cleanup
      loop: "{{ started.results }}"
      loop_control:
        label: "{{ item.item.name }}"
"""


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """The playbook above, run once by ansible-playbook through the package's callback."""
    playbook = tmp_path_factory.mktemp("screen") / "builds.yml"
    playbook.write_text(PLAYBOOK)
    out = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
         "-e", "ansible_python_interpreter=%s" % sys.executable, str(playbook)],
        cwd=str(REPO), capture_output=True, text=True, timeout=120,
        env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0"))
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_a_background_build_is_waited_for_without_a_failed_line(played):
    """Ansible's default output prints "FAILED - RETRYING" for every poll of a build still
    running; nothing failed. Through the package's callback: each build named as it starts,
    a "still building" line at most every 20 s, and each one's time as it ends."""
    assert "FAILED" not in played and "RETRYING" not in played, played
    assert "[localhost] building tensorflow in the background" in played, played
    assert "[localhost] building pytorch in the background" in played, played
    # the cleanup's results carry the job ids too: no build is said to start again
    assert played.count("] building ") == 2, played
    # the first poll of pytorch's 4 s finds it running: said once, not once a second
    assert played.count("[localhost] still building pytorch") == 1, played
    built = [line for line in played.splitlines() if line.startswith("[localhost] built ")]
    assert [line.split()[2] for line in built] == ["tensorflow", "pytorch"], played
    assert 3 <= int(built[1].split(" in ")[1].split()[0]) <= 30, built


def screen_of(lines, terminal, times=None):
    """(what the console shows, the log, the final table as text); times: the clock's reading
    as each line comes (the last one's for the final table)."""
    out, log, now = io.StringIO(), io.StringIO(), [0.0]
    console = Console(file=out, force_terminal=terminal, width=160, color_system=None)
    with ProvisionScreen(log, console=console, clock=lambda: now[0]) as screen:
        for line, at in zip(lines, times or [0.0] * len(lines)):
            now[0] = at
            screen.feed(line)
        table = Console(file=io.StringIO(), width=160, record=True, color_system=None)
        table.print(screen.table())
    return out.getvalue(), log.getvalue(), table.export_text()


def cells(table, node):
    row = next(line for line in table.splitlines() if " %s " % node in line)
    return [cell.strip() for cell in row.split("│")[1:-1]]


def test_on_a_terminal_the_play_is_one_table_and_what_matters_stays(played):
    """The real play's lines: the table counts the tasks and each node's results; the
    "building" and "still building" lines are not printed (the table says it), each finished
    build and the recap are; the log holds every line."""
    lines = played.splitlines(keepends=True)
    shown, log, table = screen_of(lines, terminal=True)
    assert log == played
    assert "3 task(s) so far" in table and "Remove the finished builds' job files" in table
    row = cells(table, "localhost")
    assert row[1:4] == ["2", "4", "0"], table  # 2 started and 2 waited for (changed), 2 removed
    assert "built in" in row[4], row
    assert "still building" not in shown and "in the background" not in shown, shown
    assert "[localhost] built tensorflow in" in shown and "PLAY RECAP" in shown, shown
    assert "TASK [" not in shown, shown


def test_a_failure_stays_on_the_screen_whole_and_is_counted():
    lines = ["TASK [framework_envs : Wait for the envs being built] ***\n",
             "[node1] building tensorflow -> current-tf in the background\n",
             "fatal: [node1]: FAILED! => changed=false\n",
             "  msg: numpy was not found in the provided package locations\n",
             "\n",
             "ok: [node2]\n",
             "TASK [bench_code : Copy] ***\n"]
    shown, _, table = screen_of(lines, terminal=True, times=[0, 5, 6, 6, 6, 7, 35])
    assert "fatal: [node1]: FAILED!" in shown and "numpy was not found" in shown, shown
    assert "ok: [node2]" not in shown, shown
    assert cells(table, "node1") == ["node1", "0", "0", "1", "tensorflow -> current-tf 30 s so far"]
    assert cells(table, "node2")[1:4] == ["1", "0", "0"], table
    assert "2 task(s) so far, 35 s; now: bench_code : Copy" in table, table


def test_elsewhere_the_lines_are_ansibles_own(played):
    """Not a terminal (CI, Slurm, a log file): the lines pass as they come."""
    shown, log, _ = screen_of(played.splitlines(keepends=True), terminal=False)
    assert shown == log == played


def every_task(collection, prefix=""):
    for name, found in collection.tasks.items():
        yield prefix + name, found
    for name, sub in collection.collections.items():
        yield from every_task(sub, prefix + name + ".")


def test_short_flags_follow_conventions():
    """`-h` is help alone, and a short flag is a letter: Invoke's automatic ones gave
    `bench --sbatch` `-h` and listed `--retry-failed` as "--, --retry-failed"."""
    import tasks
    seen = 0
    for name, found in every_task(tasks.ns):
        found = copy.copy(found)  # Invoke's get_arguments consumes the task's help
        found.help = dict(found.help)
        for argument in found.get_arguments():
            short = [n for n in argument.names if len(n) == 1]
            assert all(n.isalpha() and n != "h" for n in short), (name, argument.names)
            seen += 1
    assert seen > 100

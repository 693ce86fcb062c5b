"""What the user's terminal shows during provisioning: Ansible's output through the package's
callback (playbooks/callback_plugins/dlbench.py), run for real by ansible-playbook on this
machine with the repository's ansible.cfg."""
import copy
import os
import subprocess
import sys

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


def test_a_background_build_is_waited_for_without_a_failed_line(tmp_path):
    """Ansible's default output prints "FAILED - RETRYING" for every poll of a build still
    running; nothing failed. Through the package's callback: each build named as it starts,
    a "still building" line at most every 20 s, and each one's time as it ends."""
    playbook = tmp_path / "builds.yml"
    playbook.write_text(PLAYBOOK)
    out = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
         "-e", "ansible_python_interpreter=%s" % sys.executable, str(playbook)],
        cwd=str(REPO), capture_output=True, text=True, timeout=120,
        env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "FAILED" not in out.stdout and "RETRYING" not in out.stdout, out.stdout
    assert "[localhost] building tensorflow in the background" in out.stdout, out.stdout
    assert "[localhost] building pytorch in the background" in out.stdout, out.stdout
    # the cleanup's results carry the job ids too: no build is said to start again
    assert out.stdout.count("] building ") == 2, out.stdout
    # the first poll of pytorch's 4 s finds it running: said once, not once a second
    assert out.stdout.count("[localhost] still building pytorch") == 1, out.stdout
    built = [line for line in out.stdout.splitlines() if line.startswith("[localhost] built ")]
    assert [line.split()[2] for line in built] == ["tensorflow", "pytorch"], out.stdout
    assert 3 <= int(built[1].split(" in ")[1].split()[0]) <= 30, built


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

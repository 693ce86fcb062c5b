"""The nodes: reaching them (access: local, SSH, Slurm), what they are (inventory), the
version sets built on them (stacks), the data pushed to them (datasets) and setting them up
with Ansible (provision). The ways to have nodes are in harness/clusters/."""

"""The ways to have nodes (harness/clusters/__init__.py): one class each, found by name."""
from harness import clusters
from harness.nodes import inventory


def test_each_way_is_found_by_its_inventory_name_and_any_other_is_ssh():
    assert [clusters.way(n).name for n in ("local", "netns", "vagrant", "slurm")] == \
        ["local", "netns", "vagrant", "slurm"]
    other = clusters.way("inventory/cluster.yml")
    assert other.name == "ssh" and other.describe() is None and other.prepare() is None


def test_only_the_vms_describe_themselves_and_only_they_prepare(monkeypatch):
    called = []
    monkeypatch.setattr(clusters.vagrant, "prepare",
                        lambda box_envs: called.append(("prepare", box_envs)))
    monkeypatch.setattr(clusters.vagrant, "vm_record", lambda: {"provider": "libvirt"})
    for name in ("local", "netns", "slurm", "cluster"):
        clusters.way(name).prepare()
        assert clusters.way(name).describe() is None
    assert called == []
    clusters.way("vagrant").prepare(lambda: ["an env"])
    assert called == [("prepare", ["an env"])]
    assert clusters.way("vagrant").describe() == {"provider": "libvirt"}


def test_the_inventories_a_way_writes_name_the_command_that_writes_them():
    assert inventory.GENERATED == {"netns": "invoke cluster.up",
                                   "vagrant": "invoke provision --inventory vagrant"}

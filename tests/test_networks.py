"""Table II: every network built in every framework (in its provisioned environment) has the
same number of trainable parameters, within 0.5%."""
import json
import os
import subprocess

import pytest

from harness import inventory, stacks
from harness.paths import REPO

pytestmark = pytest.mark.cluster
FRAMEWORKS = ("tensorflow", "pytorch", "mxnet")


def counts(framework):
    host = inventory.load("local").hosts[0]
    python = stacks.load("current").env(framework).python(os.path.expanduser(host.env_root))
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_USE_LEGACY_KERAS="1",
               TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([python, "-m", "bench.%s.models" % framework], env=env, check=True,
                         capture_output=True, text=True, timeout=600).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_parameter_counts_agree_across_frameworks(provisioned, capsys):
    table = {fw: counts(fw) for fw in FRAMEWORKS}
    rows = ["%-10s %7s %14s %14s %14s" % (("network", "classes") + FRAMEWORKS)]
    for network in ("lenet5", "alexnet", "resnet18", "resnet50"):
        for classes in ("10", "100"):
            values = [table[fw][network][classes] for fw in FRAMEWORKS]
            rows.append("%-10s %7s %14s %14s %14s" % ((network, classes) +
                                                      tuple("{:,}".format(v) for v in values)))
            assert (max(values) - min(values)) / max(values) <= 0.005, (network, classes, values)
    with capsys.disabled():
        print("\ntrainable parameters per framework\n" + "\n".join(rows))
    # the paper's orders of magnitude (Table II): ResNet-18 about 11M, ResNet-50 about 25M
    assert 10.5e6 < table["pytorch"]["resnet18"]["10"] < 12e6
    assert 23e6 < table["pytorch"]["resnet50"]["10"] < 26e6

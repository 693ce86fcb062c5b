"""Rules that keep bench/ runnable on every node: Python 3.6 syntax (its imports: .importlinter)."""
import os
import subprocess
import sys

from harness.paths import BENCH, REPO

VERMIN = os.path.join(os.path.dirname(sys.executable), "vermin")


def test_bench_and_contract_are_python36_compatible():
    result = subprocess.run([VERMIN, "-q", "--no-tips", "--target=3.6-", "--violations",
                             "--eval-annotations", str(BENCH), str(REPO / "contract")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout


def test_vermin_catches_a_violation(tmp_path):
    """The check above can fail: a 3.8-only walrus is reported."""
    (tmp_path / "new.py").write_text("if (n := 3):\n    pass\n")
    result = subprocess.run([VERMIN, "-q", "--no-tips", "--target=3.6-", "--violations",
                             str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 or result.stdout.strip()


def test_a_missing_distribution_has_no_version_rather_than_an_error():
    """The paper stack has no tf-keras: recording versions must not fail the run."""
    from bench.common.runner import installed_version
    assert installed_version("numpy")
    assert installed_version("no-such-distribution-dlbench") is None

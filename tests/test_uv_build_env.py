"""The framework envs' builder: a node's pip settings said to uv in uv's words, or refused."""
import importlib.util
import re

import pytest

from harness.nodes import wheelhouse
from harness.paths import PLAYBOOKS, REPO

SPEC = importlib.util.spec_from_file_location(
    "uv_build_env", PLAYBOOKS / "roles/framework_envs/files/uv_build_env.py")
builder = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(builder)

# `pip config list` on this kind of machine: a wheel cache, two local indexes, a constraints
# file, a certificate, from files and from PIP_* variables at once
LISTING = """:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.disable-pip-version-check='1'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/old.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/somewhere/else'
install.no-index='false'
"""


def test_the_environment_wins_over_install_over_global_as_in_pip():
    settings = builder.pip_settings(LISTING)
    assert settings["find-links"] == "/opt/wheels"
    assert settings["cert"] == "/etc/ssl/certs/ca-certificates.crt"
    assert settings["constraint"] == "/etc/xdg/pip/constraints.txt"
    assert settings["no-index"] == "false"


def test_each_setting_becomes_the_uv_flag_or_variable_that_means_the_same():
    flags, variables = builder.uv_options(builder.pip_settings(LISTING))
    assert flags == ["--constraints", "/etc/xdg/pip/constraints.txt",
                     "--extra-index-url", "file:///opt/pypi/simple",
                     "--extra-index-url", "file:///opt/pypi-more/simple",
                     "--find-links", "/opt/wheels"]  # no-index false: no flag
    assert variables == {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
                         "UV_HTTP_TIMEOUT": "180"}


def test_a_setting_uv_has_no_word_for_stops_the_build_naming_it():
    with pytest.raises(ValueError, match="use-feature"):
        builder.uv_options({"use-feature": "truststore", "find-links": "/w"})


def test_the_venv_gets_where_packages_come_from_and_nothing_else():
    flags = ["--constraints", "/c.txt", "--find-links", "/w", "--no-index",
             "--extra-index-url", "file:///i", "--prerelease=allow"]
    assert builder.where_from(flags) == ["--find-links", "/w", "--no-index",
                                         "--extra-index-url", "file:///i"]


def test_no_settings_no_flags():
    assert builder.uv_options(builder.pip_settings("")) == ([], {})
    assert builder.uv_options({"no-index": "1"}) == (["--no-index"], {})


def test_the_nodes_get_the_uv_release_the_controller_has():
    pin = re.search(r"^UV := (\S+)$", (REPO / "Makefile").read_text(), re.M).group(1)
    assert pin == wheelhouse.INSTALLER
    assert wheelhouse.INSTALLER in wheelhouse.BUILD_TOOLS

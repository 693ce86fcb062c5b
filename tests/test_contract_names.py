"""contract/ is the only speller of the files a run, a node and the analysis write: any other
module that names one as a path (a literal such as "status.json" or "*/*/profile.json") would
drift from it unseen. Messages and docstrings may name them in words."""
import ast
import re

import contract.analysis_folder
import contract.compare_folder
import contract.explain_plan
import contract.explain_result
import contract.nodefolder
import contract.runfolder
from harness.paths import REPO

PACKAGE = ("harness", "analysis", "bench", "selfcheck", "registry", "tasks.py")
NAMES = {value for module in (contract.nodefolder, contract.runfolder,
                                            contract.analysis_folder, contract.compare_folder,
                                            contract.explain_plan, contract.explain_result)
         for name, value in vars(module).items()
         if name.isupper() and isinstance(value, str) and "." in value}


def named_as_a_path(text):
    """The contract's file name a literal spells as a path (alone, or at the end of a path
    or glob with no spaces), or None."""
    if " " in text:
        return None
    last = re.split(r"[/\\]", text)[-1]
    return last if last in NAMES else None


def docstrings(tree):
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.body and isinstance(node.body[0], ast.Expr) \
                and isinstance(node.body[0].value, ast.Constant):
            found.add(id(node.body[0].value))
    return found


def literals_outside_contract():
    found = []
    for top in PACKAGE:
        paths = [REPO / top] if top.endswith(".py") else sorted((REPO / top).rglob("*.py"))
        for path in paths:
            tree = ast.parse(path.read_text())
            skip = docstrings(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                        id(node) not in skip and named_as_a_path(node.value):
                    found.append("%s:%d %r" % (path.relative_to(REPO), node.lineno, node.value))
    return found


def test_the_contract_names_every_file_it_knows():
    assert {"status.json", "manifest.json", "records.jsonl", "profile.json", "log.txt",
            "shards.json", "sacct.txt", "interval_check.json", "calibration.json", "report.md",
            "report.html", "explain.json", "explain.md", "claims.csv", "plan.json", "scaling.csv",
            "operators.csv", "cells.csv"} <= NAMES


def test_no_module_outside_contract_spells_one_of_its_file_names():
    assert literals_outside_contract() == []


def test_a_spelled_name_is_found_in_a_path_or_a_glob_and_not_in_words():
    assert named_as_a_path("*/*/profile.json") == "profile.json"
    assert named_as_a_path("/log.txt") == "log.txt"
    assert named_as_a_path("status.json") == "status.json"
    assert named_as_a_path("manifest.json names the commit") is None
    assert named_as_a_path("notes.json") is None

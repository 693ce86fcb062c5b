"""analysis/reference/coverage.yml, the list of the paper's statements: each sentence once (or
once for each figure it gives), and no count of them written by hand that the file has
outgrown."""
import os
import re
from numbers import Number

import pytest
import yaml

from analysis import claims
from harness.paths import REPO
from tests.test_paper_sources import PAPER, flat, in_paper

STATEMENTS = yaml.safe_load(claims.COVERAGE.read_text())["statements"]


def pieces(quote):
    return [flat(p) for p in re.split(r"\.\.\.|…", quote) if flat(p)]


def overlap(a, b):
    return any(x in y or y in x for x in pieces(a["quote"]) for y in pieces(b["quote"]))


def test_no_sentence_is_listed_twice():
    """Two entries whose quotes overlap are one sentence: allowed only where each gives one of
    its figures (a sentence with 2.73X and 2.93X is two statements)."""
    twice = []
    for i, a in enumerate(STATEMENTS):
        for b in STATEMENTS[i + 1:]:
            figures = all(isinstance(s["value"], Number) for s in (a, b)) and \
                a["value"] != b["value"]
            if overlap(a, b) and not figures:
                twice.append((a["section"], a["quote"][:60], b["section"], b["quote"][:60]))
    assert not twice, twice


def test_the_check_for_a_sentence_listed_twice_can_fail():
    one = {"quote": "Apart from the *weights_update* operator, all the backward pass operators",
           "value": "order"}
    other = {"quote": "all the backward pass operators", "value": "another order"}
    assert overlap(one, other)
    assert not overlap(one, {"quote": "the forward phase", "value": "order"})


def docs():
    for path in [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md")):
        if path.name != "notebook.md":  # the notebook's entries keep the counts of their day
            yield path


def test_a_count_of_statements_in_the_docs_is_the_files():
    """A count written by hand goes stale when a statement is added (methodology once said 123
    where the file held 135): any that the docs state must be the file's."""
    counts = {"statements": len(STATEMENTS),
              "encoded": sum(1 for s in STATEMENTS if s.get("encoded"))}
    wrong = []
    for path in docs():
        for number, word in re.findall(r"\b(\d+) (statements|encoded)\b", path.read_text()):
            if int(number) != counts[word]:
                wrong.append("%s: %s %s (the file: %d)" % (path.name, number, word,
                                                           counts[word]))
    assert not wrong, wrong
    text = claims.coverage_text()
    assert "%(statements)d statements" % counts in text and "%(encoded)d encoded" % counts in text


@pytest.mark.skipif(not PAPER.is_file() and not os.environ.get("DLBENCH_CI"),
                    reason="the paper's text is not beside the repository (../shared)")
def test_the_sentences_once_left_out_are_listed():
    paper = flat(PAPER.read_text())
    for sentence in ("its forward phase presents better performance compared to the other two",
                     "This operator stalling MXNet, according to figure 7 is *weights_update*.",
                     "it will be loaded into memory much faster",
                     "therefore adds a delay for systems that do not use the cache"):
        assert in_paper(sentence, paper), sentence
        assert any(sentence in flat(s["quote"]) for s in STATEMENTS), sentence

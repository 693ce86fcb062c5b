"""The vocabulary of `invoke explain`'s plan, shared by the layer that makes it
(harness/plan/ladder.py) and the one that reads it back from the explain folder
(analysis/explain.py): a setting (every chosen factor at one level), a rung (one factor moved
between two settings), and the plan file, which holds what the analysis needs of the plan so
that `invoke analyze --run explain-<id>` rebuilds the result from disk."""
import hashlib
import json

PLAN = "plan.json"  # in the explain folder, beside explain.json


class Setting(object):
    """levels: ((factor, value), ...), sorted by factor; values are strings."""

    def __init__(self, levels):
        self.levels = tuple(sorted((str(f), str(v)) for f, v in levels))

    def get(self, factor):
        return dict(self.levels)[factor]

    def moved(self, factor, value):
        return Setting(dict(self.levels, **{factor: value}).items())

    @property
    def key(self):
        return hashlib.sha1(json.dumps(self.levels).encode()).hexdigest()[:8]

    def __eq__(self, other):
        return isinstance(other, Setting) and self.levels == other.levels

    def __hash__(self):
        return hash(self.levels)

    def __repr__(self):
        return "Setting(%r)" % (self.levels,)


class Rung(object):
    """side: "path" (moved from the base), "from today" (a path factor measured from the
    end), "what-if" (moved from the end)."""

    def __init__(self, factor, before, after, side):
        self.factor, self.before, self.after, self.side = factor, before, after, side

    @property
    def name(self):
        return "%s %s -> %s" % (self.factor, self.before.get(self.factor),
                                self.after.get(self.factor))

    def data(self):
        return {"factor": self.factor, "before": self.before.levels,
                "after": self.after.levels, "side": self.side}

    @classmethod
    def from_data(cls, data):
        return cls(data["factor"], Setting(data["before"]), Setting(data["after"]),
                   data["side"])

    def __eq__(self, other):
        return isinstance(other, Rung) and self.data() == other.data()

    def __hash__(self):
        return hash((self.factor, self.before, self.after, self.side))

"""Errors the user can act on: printed without a traceback, exit code 2."""


class UserError(Exception):
    """A problem with input or environment, with its cause and the fix."""

    def __init__(self, cause, fix=None):
        self.cause = cause
        self.fix = fix
        super().__init__(cause if not fix else "%s\n  fix: %s" % (cause, fix))

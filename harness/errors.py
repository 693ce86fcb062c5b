"""Errors the user can act on (contract/errors.py: bench/ may raise them too)."""
from contract.errors import UserError

__all__ = ["UserError"]

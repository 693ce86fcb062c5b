"""Shared by every framework's trainer. Python 3.6-compatible: stdlib, numpy, psutil only."""

"""Controller library: everything that runs where the user types `invoke ...`."""

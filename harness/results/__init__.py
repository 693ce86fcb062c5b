"""Collecting a run from its nodes into records, and the artifact that packs runs."""

"""A scenario file's schema: its sections, their fields and units, validated before anything runs, and the keys table generated from it (keys.py)."""

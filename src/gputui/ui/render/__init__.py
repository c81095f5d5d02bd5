"""Pure drawing functions: data, width and height in; lines of (text, role) spans out.

Nothing here imports Textual or reads the clock: the same input always draws the same lines, which
the unit tests check on exact strings. A role ("ok", "crit", "s1", ...) names what a span means;
widgets map roles to theme colours through their component classes.
"""

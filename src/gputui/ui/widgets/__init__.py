"""The live screen's panels, each named for what it shows and drawn by a pure render function."""

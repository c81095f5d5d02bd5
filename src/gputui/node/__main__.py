"""`python -m gputui.node vram-check|burn`: the node checks with only their own dependencies.

The full `gputui` CLI also declares the load-test commands, which need httptools and orjson; a
freshly rented node with only PyTorch (and nvidia-ml-py) can still run its acceptance checks here.
"""

from __future__ import annotations

from gputui.cli.node_flags import node_main  # an entry point: above the CLI, as gputui.__main__

if __name__ == "__main__":
    raise SystemExit(node_main(description=__doc__))

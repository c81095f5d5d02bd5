"""`python -m gputui` runs the same CLI as the `gputui` script."""

from gputui.cli import main

raise SystemExit(main())

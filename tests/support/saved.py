"""Reading a saved snapshot's free-form sections in a test.

The snapshot types these sections as JSON objects (`dict[str, object]`): code narrows each value
it reads. A test asserts on the values themselves, so it reads them as they were saved.
"""

from __future__ import annotations

from typing import Any


def saved(section: object) -> Any:
    """The saved section (asserted present), to index and compare in assertions."""
    assert section is not None
    return section

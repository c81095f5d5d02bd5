"""Where each step's time went and what bound it (issue 18): the per-step diagnosis of a run."""

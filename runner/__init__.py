"""fabrikit's host-side package: site profiles, batch-script rendering, submission, checks.

Nothing here may import torch at module level: this code runs on login nodes, where start-up
time matters and torch may not be installed at all.
"""

__version__ = "0.1.0"

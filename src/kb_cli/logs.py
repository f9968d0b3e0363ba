"""Plain log lines on stderr for the long-running commands (`kb serve`, `kb up`).

Configured before the MCP SDK is, so its own set-up (a rich handler that writes terminal hyperlink
escapes around file names) finds the root logger taken and does nothing.
"""

from __future__ import annotations

import logging
import sys


def plain_logging(product_level: int = logging.INFO) -> None:
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    root.addHandler(handler)
    root.setLevel(logging.WARNING)  # libraries: warnings and errors only
    logging.getLogger("kosha").setLevel(product_level)

"""The PDF library, without the two add-ons it imports whenever they are installed (its own package requires
them): a layout analyser and a Markdown converter, which bring onnxruntime, networkx and numpy with them.
The PDF parser uses neither (no page layout analysis, no conversion), and parses the same without them
(every PDF of corpus/ and of the real-world fixtures). Kept out, importing the library takes 0.09 s and
47 MB instead of 1.2 s and 138 MB, in the parse server and in each process that parses a PDF itself.
"""

from __future__ import annotations

import sys

for _addon in ("pymupdf.layout", "pymupdf4llm"):
    sys.modules.setdefault(_addon, None)  # type: ignore[arg-type]  # None: `import` raises ImportError

import pymupdf  # noqa: E402

pymupdf.no_recommend_layout()  # its suggestion to install the layout analyser, printed on the first table search

__all__ = ["pymupdf"]

"""Write the settings page: ``python -m mcp_secure_sandbox._settings_page > docs/settings.md``.

The page is :func:`mcp_secure_sandbox.settings.settings_page`, derived from the declarations of
:class:`~mcp_secure_sandbox.settings.Settings`; a test fails when the committed file differs.
"""

from __future__ import annotations

import sys

from mcp_secure_sandbox.settings import settings_page

__all__ = ["main"]


def main() -> int:
    """Write the page on stdout.

    Returns:
        0.
    """
    sys.stdout.write(settings_page())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The SQLite authorizer every connection the run opens gets, and the guarded ``connect``.

sqlite opens its files in C, unseen by the guarded ``open()``. The audit hook confines the
database ``sqlite3.connect`` names (in memory or beneath the workspace); SQL can name other
files: ``ATTACH DATABASE 'path'`` and ``VACUUM INTO 'path'`` (which SQLite authorizes as an
attach) open or create any file the process may reach, and ``PRAGMA temp_store_directory``
moves temporary files to any directory. The authorizer refuses those early, with a line on
stderr naming the rule; the kernel layers (Landlock) remain the boundary.

Allowed: attaching ``''`` or ``':memory:'`` and a plain file name that resolves beneath the
workspace. Refused: a name given as an expression (SQLite then passes no name to the
authorizer), a URI (``file:...``), a path outside the workspace, and the two directory pragmas.

The authorizer cannot be set from the audit hook (``sqlite3.connect/handle`` comes before the
connection is initialised), so ``sqlite3.connect`` is replaced, in ``sqlite3`` and
``sqlite3.dbapi2`` once they are loaded, by a function that opens the connection with the real
one and then sets the authorizer. The audit hook lets a connection be opened only by that
function, once per call: ``sqlite3.Connection(...)``, ``type(con)(...)``, re-running
``__init__`` on an open connection and a ``factory=`` (whose code would run while the
connection opens) are refused. ``set_authorizer`` is a refused attribute (astguard).
"""

from __future__ import annotations

import os
import sys

# Executed by the bootstrap in the child's namespace, before pysandbox.child._main: no ``typing``
# import (start-up cost); mypy treats this name as True.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["SQLITE_DENY", "SQLITE_OK", "make_sqlite_authorizer", "make_sqlite_guard"]

#: sqlite3's authorizer results and the action codes judged (sqlite3.h; the ``sqlite3``
#: module is not imported for them: most runs never open a database).
SQLITE_OK = 0
SQLITE_DENY = 1
_SQLITE_PRAGMA = 19
_SQLITE_ATTACH = 24
_DIRECTORY_PRAGMAS = frozenset({"temp_store_directory", "data_store_directory"})


def make_sqlite_authorizer(
    workspace: str,
    realpath: Callable[[str], str],
    within: Callable[[str, tuple[str, ...]], bool],
    stderr: Any = None,
) -> Callable[..., int]:
    """Build the authorizer (``Connection.set_authorizer``'s callback) for one run.

    Args:
        workspace: The workspace's real path.
        realpath: ``os.path.realpath`` (relative names resolve against the working directory,
            as SQLite resolves them).
        within: ``_child._within`` (whether a path is beneath one of the roots).
        stderr: Where a refusal is explained (default: ``sys.stderr`` at build time).

    Returns:
        ``authorize(action, arg1, arg2, database, trigger) -> int``: ``SQLITE_DENY`` for the
        refused statements (the user's code sees ``sqlite3.DatabaseError: not authorized``),
        ``SQLITE_OK`` for everything else.
    """
    err = sys.stderr if stderr is None else stderr
    roots = (workspace,)

    def deny(why: str) -> int:
        try:
            err.write(f"sandbox: {why} (SQLite reports it as 'not authorized')\n")
        except Exception:  # the refusal stands without its explanation
            return SQLITE_DENY
        return SQLITE_DENY

    def authorize(action: int, arg1: Any, arg2: Any, database: Any, trigger: Any) -> int:
        if action == _SQLITE_ATTACH:
            if type(arg1) is not str:
                return deny("ATTACH/VACUUM INTO needs a file name written as a string literal")
            if arg1 in ("", ":memory:"):
                return SQLITE_OK
            if arg1[:5].lower() == "file:":
                return deny("sqlite3 URI file names are not permitted")
            if not within(realpath(arg1), roots):
                return deny("databases outside the workspace are not permitted")
            return SQLITE_OK
        if action == _SQLITE_PRAGMA and type(arg1) is str and arg1.lower() in _DIRECTORY_PRAGMAS:
            return deny(f"PRAGMA {arg1} is not permitted")
        return SQLITE_OK

    return authorize


#: The option types sqlite3.connect() is given as they are: no conversion runs user code.
_PLAIN = (int, float, bool, str, bytes, type(None))


def make_sqlite_guard(
    authorize: Callable[..., int],
) -> tuple[Callable[[Any], None], Callable[[Any], str | None]]:
    """The guarded ``connect`` and the audit hook's judge of ``sqlite3.connect/handle``.

    Args:
        authorize: The authorizer (:func:`make_sqlite_authorizer`).

    Returns:
        ``(patch, on_handle)``: ``patch(modules)`` replaces ``connect`` in ``sqlite3`` and
        ``sqlite3.dbapi2`` when they are in ``modules`` (``sys.modules``; idempotent);
        ``on_handle(connection)`` returns ``None`` for the one connection a guarded
        ``connect`` call is opening, and the reason to refuse any other.
    """
    ticket = [0]  # 1 while a guarded connect() call may open exactly one connection
    fspath = os.fspath
    patched: list[Any] = []

    def on_handle(connection: Any) -> str | None:
        if ticket[0] != 1:
            return (
                "sqlite3 connections are opened with sqlite3.connect() only "
                "(not Connection(), type(con)() or __init__ again)"
            )
        ticket[0] = 0
        return None

    def patch(modules: Any) -> None:
        package = modules.get("sqlite3")
        dbapi2 = modules.get("sqlite3.dbapi2")
        if dbapi2 is None or dbapi2 in patched:
            return
        real_connect = dbapi2.connect
        real_set_authorizer = dbapi2.Connection.set_authorizer

        def connect(database: Any, *args: Any, **kwargs: Any) -> Any:
            if "factory" in kwargs or len(args) > 4:
                raise TypeError(
                    "sandbox: sqlite3.connect() takes no factory (pass the options after "
                    "check_same_thread by keyword)"
                )
            # Every argument as a plain value before the ticket exists: converting an object
            # (__fspath__, __float__, __index__) runs the user's code, which must not open a
            # connection of its own while the ticket is out.
            if type(database) not in (str, bytes):
                database = fspath(database)
                if type(database) not in (str, bytes):
                    raise TypeError("sandbox: sqlite3.connect() takes a str, bytes or path")
            for value in (*args, *kwargs.values()):
                if type(value) not in _PLAIN:
                    raise TypeError(
                        "sandbox: sqlite3.connect() options must be plain values "
                        f"(int, float, bool, str or None), not {type(value).__name__}"
                    )
            ticket[0] = 1
            try:
                connection = real_connect(database, *args, **kwargs)
            finally:
                ticket[0] = 0
            real_set_authorizer(connection, authorize)
            return connection

        connect.__doc__ = real_connect.__doc__
        for module in (dbapi2, package):
            if module is not None and getattr(module, "connect", None) is real_connect:
                module.__dict__["connect"] = connect
        patched.append(dbapi2)

    return patch, on_handle

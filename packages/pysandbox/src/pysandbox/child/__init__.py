"""The code of the confined interpreter: a spawn-mode child and the warm zygote.

Standard library only, with explicit imports. In a confined interpreter these modules are not
imported from a path: :mod:`pysandbox._bootstrap` ships their compiled code and loads them
through a loader it removes before the user's code starts. The host imports them as ordinary
modules (their constants, the zygote's server side).

- :mod:`pysandbox.child._main`: applies every layer, then runs the user's code;
- :mod:`pysandbox.child._kernel`: the kernel layers (rlimits, Landlock, seccomp, capabilities)
  and the setup channel;
- :mod:`pysandbox.child._library_getters`, :mod:`pysandbox.child._sqlite_guard`: guards of
  library-created getters and of SQLite;
- :mod:`pysandbox.child._generators`: the global random generators a forked child reseeds;
- :mod:`pysandbox.child._wire_check`: the check of each message against its declaration
  (:mod:`pysandbox._wire`);
- :mod:`pysandbox.child._zygote`: the warm fork server and its server-side handle.
"""

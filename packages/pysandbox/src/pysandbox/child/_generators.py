"""The global random generators of the modules a forked run may inherit, reseeded per run.

A warm child is a fork of the zygote: every module the zygote imported (its standard-library
pre-import and the sandbox's preload, numpy's legacy ``RandomState`` among them) comes with the
state of its global generator at the fork, so without a reseed every run of a server would replay
one sequence (``np.random.rand()``, ``DataFrame.sample()`` unseeded). :data:`GLOBAL_GENERATORS`
is the one list of those generators; :func:`reseed_global_generators` gives each loaded one fresh
seed material from ``os.urandom``, and the zygote's child calls it right after the fork, ready
children included. A spawn-mode child is a new interpreter whose generators seed themselves from
the operating system.

Executed by the bootstrap in the child's namespace (standard library only, no ``typing``).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["GLOBAL_GENERATORS", "SEED_BYTES", "reseed_global_generators"]

#: Bytes of operating-system randomness each generator gets per run.
SEED_BYTES = 32
#: ``(module, seeding function, how it takes the seed)``: ``"int"`` takes one integer (any
#: size), ``"words"`` a list of 32-bit integers (numpy's legacy ``RandomState.seed``: its
#: ``init_by_array`` uses them all, an int would be cut to 32 bits).
GLOBAL_GENERATORS: tuple[tuple[str, str, str], ...] = (
    ("random", "seed", "int"),
    ("numpy.random", "seed", "words"),
)


def reseed_global_generators(modules: Any = None) -> list[str]:
    """Reseed the global generator of every module of :data:`GLOBAL_GENERATORS` loaded now.

    Args:
        modules: The module table to look in (default ``sys.modules``).

    Returns:
        The modules reseeded, in table order (a module not loaded is skipped).

    Raises:
        OSError: ``os.urandom`` failed (the caller treats it as a setup failure).
    """
    table = sys.modules if modules is None else modules
    done = []
    for name, function, form in GLOBAL_GENERATORS:
        module = table.get(name)
        if module is None:
            continue
        material = os.urandom(SEED_BYTES)
        if form == "words":
            seed: Any = [
                int.from_bytes(material[i : i + 4], "little") for i in range(0, SEED_BYTES, 4)
            ]
        else:
            seed = int.from_bytes(material, "little")
        getattr(module, function)(seed)
        done.append(name)
    return done

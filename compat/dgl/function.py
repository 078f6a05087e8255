"""``dgl.function``: the message and reduce built-ins of :mod:`graphstore.function` (the same objects),
for ``import graphstore.compat.dgl.function as fn``."""

from graphstore.function import *  # noqa: F403 - the module is an alias of graphstore.function
from graphstore.function import __all__  # noqa: F401

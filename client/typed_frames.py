"""The per-type data of mini-batch graphs (frontiers, blocks, pair graphs), and DGL's views of it.

A *frame* is a plain ``dict`` of name -> tensor with one row per node (or edge) of one type. Where a
side of a graph has one type, its data view is that type's frame itself (``block.srcdata["feat"]`` is a
tensor, as on a homogeneous graph). Where it has several, the view is a :class:`TypedDataView`:
``block.srcdata["feat"]`` is ``{type: tensor}`` over the types that have ``feat``, and assigning a dict
sets each type's frame, as DGL does. ``block.srcnodes[ntype].data`` / ``block.edges[etype].data`` is one
type's frame.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

import torch

from graphstore.client.graph_data import TypeSpace
from graphstore.types import GraphSchema

Frame = dict[str, torch.Tensor]


class TypedDataView(MutableMapping):
    """Names -> ``{type: tensor}`` over the frames of several types.

    Args:
        frames: the frame of each type.
        resolve: turns a type as the user names it (a name, a canonical triple) into a key of ``frames``;
            raises KeyError for an unknown type.
        what: ``"node"`` or ``"edge"``, for error messages.
    """

    def __init__(self, frames: Mapping[Any, Frame], resolve: Callable[[Any], Any], what: str):
        self._frames = frames
        self._resolve = resolve
        self._what = what

    def __getitem__(self, name: str) -> dict[Any, torch.Tensor]:
        found = {key: frame[name] for key, frame in self._frames.items() if name in frame}
        if not found:
            raise KeyError(f"no {self._what} type has data named {name!r}; available: {list(self)}")
        return found

    def __setitem__(self, name: str, value) -> None:
        if not isinstance(value, Mapping):
            raise TypeError(
                f"{self._what} data {name!r} of a graph with several {self._what} types is set per type: "
                f"assign {{type: tensor}}, got {type(value).__name__}"
            )
        for key, tensor in value.items():
            self._frames[self._resolve(key)][name] = tensor

    def __delitem__(self, name: str) -> None:
        found = False
        for frame in self._frames.values():
            found = frame.pop(name, None) is not None or found
        if not found:
            raise KeyError(f"no {self._what} type has data named {name!r}")

    def __iter__(self) -> Iterator[str]:
        names: dict[str, None] = {}
        for frame in self._frames.values():
            names.update(dict.fromkeys(frame))
        return iter(names)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"TypedDataView({self._what}, {list(self)})"


def data_view(frames: Mapping[Any, Frame], resolve: Callable[[Any], Any], what: str):
    """The frame of the only type, or a :class:`TypedDataView` over several."""
    if len(frames) == 1:
        return next(iter(frames.values()))
    return TypedDataView(frames, resolve, what)


class TypeFrames:
    """``block.srcnodes[ntype]`` / ``pair_graph.edges[etype]``: one type's :class:`TypeSpace`, whose
    ``data`` is that type's frame.

    Args:
        frames: the frame of each type.
        resolve: as in :class:`TypedDataView`.
    """

    def __init__(self, frames: Mapping[Any, Frame], resolve: Callable[[Any], Any]):
        self._frames = frames
        self._resolve = resolve

    def __getitem__(self, key) -> TypeSpace:
        return TypeSpace(self._frames[self._resolve(key)])

    def __repr__(self) -> str:
        return f"TypeFrames({list(self._frames)})"


def ntype_resolver(ntypes: list[str]) -> Callable[[str | None], str]:
    """A resolver of node type names among ``ntypes`` (None names the only one), with
    :class:`~graphstore.types.GraphSchema`'s rules and messages.

    Raises (from the resolver):
        KeyError: an unknown type, or None among several (the message lists them).
    """
    schema = GraphSchema(tuple(ntypes), ())
    return lambda name: schema.ntypes[schema.ntype_id(name)]

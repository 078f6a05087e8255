"""The edges answer (``EdgesResponse``: sampled edges, in-subgraphs, found edges, and node rows carried
with a sample) written and read by hand.

The server lays the answer out in one fresh buffer (:class:`EdgesAnswer`): the edge arrays are copied in
once and the carried rows are gathered straight into place; the client views every array inside the
received bytes (:func:`read_edges_answer`). Any protobuf parser reads the same bytes as an
``EdgesResponse``::

    EdgesResponse = 1 src, 2 dst, 3 eid: Tensor; 4 rows: NodeRows (repeated); 15 padding
    NodeRows      = 1 name: string; 2 ids: Tensor; 3 rows: Tensor; 15 padding
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from graphstore import dtypes
from graphstore.protos import codec
from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.tensor_wire import Group, Slot, fresh_message, read_tensor
from graphstore.protos.wire import WIRE_LEN, length_prefix, read_length_delimited, read_varint, skip_field

_SRC, _DST, _EID, _ROWS, _PADDING = 1, 2, 3, 4, 15
_NAME, _IDS, _ROW_DATA = 1, 2, 3


@dataclass(frozen=True)
class CarriedRows:
    """Rows of one node tensor for some of its nodes, carried with an edges answer.

    Attributes:
        name: the tensor.
        ids: int64 IDs in the tensor's ID space, sorted and unique.
        rows: one row per ID, in storage form.
    """

    name: str
    ids: np.ndarray
    rows: np.ndarray


@dataclass(frozen=True)
class RowsToCarry:
    """What the server will gather for one carried tensor: its name, IDs, row shape and dtype."""

    name: str
    ids: np.ndarray
    row_shape: tuple[int, ...]
    dtype: str


class EdgesAnswer:
    """An ``EdgesResponse`` being built: fill every array of :attr:`targets` (the carried rows, in the
    order asked), then send :meth:`serialized`.

    Where the interpreter allows it the answer is one fresh buffer holding the edges already and the
    targets are views of it (no copy); elsewhere the targets are plain arrays and the message is built
    from them when serialized.
    """

    def __init__(
        self,
        src: np.ndarray,
        dst: np.ndarray,
        eid: np.ndarray | None,
        carried: Sequence[RowsToCarry] = (),
        outer_field: int = 0,
    ) -> None:
        self._edges = [(_SRC, src), (_DST, dst)] + ([] if eid is None else [(_EID, eid)])
        self._carried = list(carried)
        self._outer_field = outer_field
        parts: list = [Slot(field, (len(a),), "int64") for field, a in self._edges]
        for rows in self._carried:
            name = rows.name.encode()
            parts.append(
                Group(
                    _ROWS,
                    [
                        length_prefix(_NAME, len(name)) + name,
                        Slot(_IDS, (len(rows.ids),), "int64"),
                        Slot(_ROW_DATA, (len(rows.ids), *rows.row_shape), rows.dtype),
                    ],
                    _PADDING,
                )
            )
        built = fresh_message(parts, _PADDING, outer_field)
        if built is None:
            self._bytes = None
            self.targets = [
                np.empty((len(r.ids), *r.row_shape), dtype=dtypes.info(r.dtype).storage)
                for r in self._carried
            ]
            return
        self._bytes, slots = built
        for (_, array), slot in zip(self._edges, slots, strict=False):
            np.copyto(slot, array, casting="unsafe")
        edge_slots = len(self._edges)
        for k, rows in enumerate(self._carried):
            np.copyto(slots[edge_slots + 2 * k], rows.ids, casting="unsafe")
        self.targets = slots[edge_slots + 1 :: 2]

    def serialized(self) -> bytes:
        """The answer's bytes (call once every target is filled)."""
        if self._bytes is not None:
            return self._bytes
        response = pb.EdgesResponse()
        for field, array in self._edges:
            codec.write_ids(getattr(response, ("src", "dst", "eid")[field - 1]), array)
        for rows, values in zip(self._carried, self.targets, strict=True):
            entry = response.rows.add(name=rows.name)
            codec.write_ids(entry.ids, rows.ids)
            codec.write_tensor(entry.rows, values, rows.dtype)
        answer = response.SerializeToString()
        if not self._outer_field:
            return answer
        return length_prefix(self._outer_field, len(answer)) + answer


def read_edges_answer(buf) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[CarriedRows]]:
    """``(src, dst, eid, carried rows)`` of a serialized ``EdgesResponse``: read-only views into ``buf``
    (``eid`` empty when the answer has none).

    Raises:
        ValueError: malformed bytes.
    """
    view = memoryview(buf)
    empty = np.empty(0, dtype=np.int64)
    edges = {_SRC: empty, _DST: empty, _EID: empty}
    carried: list[CarriedRows] = []
    pos, end = 0, len(view)
    try:
        while pos < end:
            field_key, pos = read_varint(view, pos, end)
            field, wire_type = field_key >> 3, field_key & 7
            if wire_type == WIRE_LEN and field in edges:
                (start, stop), pos = read_length_delimited(view, pos, end, "edges field")
                edges[field] = _ids_of(view[start:stop], ("src", "dst", "eid")[field - 1])
            elif wire_type == WIRE_LEN and field == _ROWS:
                (start, stop), pos = read_length_delimited(view, pos, end, "rows field")
                carried.append(_node_rows(view[start:stop]))
            else:
                pos = skip_field(view, wire_type, pos, end)
    except ValueError as exc:
        raise ValueError(f"edges answer: {exc}") from None
    return edges[_SRC], edges[_DST], edges[_EID], carried


def _ids_of(view: memoryview, arg: str) -> np.ndarray:
    array, dtype = read_tensor(view, arg)
    if dtype not in ("int64", "int32") or array.ndim != 1:
        raise ValueError(f"{arg}: expected 1-d int64 IDs, got {dtype} {list(array.shape)}")
    return array.astype(np.int64) if dtype == "int32" else array


def _node_rows(view: memoryview) -> CarriedRows:
    name, ids, rows = "", None, None
    pos, end = 0, len(view)
    while pos < end:
        field_key, pos = read_varint(view, pos, end)
        field, wire_type = field_key >> 3, field_key & 7
        if wire_type == WIRE_LEN and field in (_NAME, _IDS, _ROW_DATA):
            (start, stop), pos = read_length_delimited(view, pos, end, "node rows")
            if field == _NAME:
                name = bytes(view[start:stop]).decode()
            elif field == _IDS:
                ids = _ids_of(view[start:stop], "rows.ids")
            else:
                rows = read_tensor(view[start:stop], "rows.rows")[0]
        else:
            pos = skip_field(view, wire_type, pos, end)
    if ids is None or rows is None or len(rows) != len(ids):
        raise ValueError(f"rows of {name!r}: need as many rows as IDs")
    return CarriedRows(name, ids, rows)

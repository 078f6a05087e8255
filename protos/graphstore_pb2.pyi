from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DTYPE_UNSPECIFIED: _ClassVar[DType]
    FLOAT32: _ClassVar[DType]
    FLOAT16: _ClassVar[DType]
    BFLOAT16: _ClassVar[DType]
    FLOAT64: _ClassVar[DType]
    INT32: _ClassVar[DType]
    INT64: _ClassVar[DType]
    UINT8: _ClassVar[DType]
    BOOL: _ClassVar[DType]
    INT8: _ClassVar[DType]
    INT16: _ClassVar[DType]

class Policy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    POLICY_UNSPECIFIED: _ClassVar[Policy]
    NODE: _ClassVar[Policy]
    EDGE: _ClassVar[Policy]

class EdgeDir(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    IN: _ClassVar[EdgeDir]
    OUT: _ClassVar[EdgeDir]

class PushOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ASSIGN: _ClassVar[PushOp]
    ADD: _ClassVar[PushOp]

class CheckpointPhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WRITE: _ClassVar[CheckpointPhase]
    COMMIT: _ClassVar[CheckpointPhase]
    ABORT: _ClassVar[CheckpointPhase]
DTYPE_UNSPECIFIED: DType
FLOAT32: DType
FLOAT16: DType
BFLOAT16: DType
FLOAT64: DType
INT32: DType
INT64: DType
UINT8: DType
BOOL: DType
INT8: DType
INT16: DType
POLICY_UNSPECIFIED: Policy
NODE: Policy
EDGE: Policy
IN: EdgeDir
OUT: EdgeDir
ASSIGN: PushOp
ADD: PushOp
WRITE: CheckpointPhase
COMMIT: CheckpointPhase
ABORT: CheckpointPhase

class Tensor(_message.Message):
    __slots__ = ("dtype", "shape", "data")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    dtype: DType
    shape: _containers.RepeatedScalarFieldContainer[int]
    data: bytes
    def __init__(self, dtype: _Optional[_Union[DType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., data: _Optional[bytes] = ...) -> None: ...

class RequestId(_message.Message):
    __slots__ = ("client", "seq")
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    client: str
    seq: int
    def __init__(self, client: _Optional[str] = ..., seq: _Optional[int] = ...) -> None: ...

class TensorScheme(_message.Message):
    __slots__ = ("name", "dtype", "shape", "policy", "persistent", "writable", "version", "from_partition", "owner", "type")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    PERSISTENT_FIELD_NUMBER: _ClassVar[int]
    WRITABLE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FROM_PARTITION_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: DType
    shape: _containers.RepeatedScalarFieldContainer[int]
    policy: Policy
    persistent: bool
    writable: bool
    version: int
    from_partition: bool
    owner: str
    type: str
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[_Union[DType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., policy: _Optional[_Union[Policy, str]] = ..., persistent: _Optional[bool] = ..., writable: _Optional[bool] = ..., version: _Optional[int] = ..., from_partition: _Optional[bool] = ..., owner: _Optional[str] = ..., type: _Optional[str] = ...) -> None: ...

class MetadataRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MetadataResponse(_message.Message):
    __slots__ = ("graph_name", "part_id", "num_parts", "num_nodes", "num_edges", "node_bounds", "edge_bounds", "tensors", "part_config", "hostname", "format_version", "ntypes", "canonical_etypes", "ntype_counts", "etype_counts", "checkpoint_root", "read_replica")
    GRAPH_NAME_FIELD_NUMBER: _ClassVar[int]
    PART_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTS_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_EDGES_FIELD_NUMBER: _ClassVar[int]
    NODE_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    EDGE_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    PART_CONFIG_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    NTYPES_FIELD_NUMBER: _ClassVar[int]
    CANONICAL_ETYPES_FIELD_NUMBER: _ClassVar[int]
    NTYPE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    ETYPE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ROOT_FIELD_NUMBER: _ClassVar[int]
    READ_REPLICA_FIELD_NUMBER: _ClassVar[int]
    graph_name: str
    part_id: int
    num_parts: int
    num_nodes: int
    num_edges: int
    node_bounds: _containers.RepeatedScalarFieldContainer[int]
    edge_bounds: _containers.RepeatedScalarFieldContainer[int]
    tensors: _containers.RepeatedCompositeFieldContainer[TensorScheme]
    part_config: str
    hostname: str
    format_version: int
    ntypes: _containers.RepeatedScalarFieldContainer[str]
    canonical_etypes: _containers.RepeatedScalarFieldContainer[str]
    ntype_counts: _containers.RepeatedScalarFieldContainer[int]
    etype_counts: _containers.RepeatedScalarFieldContainer[int]
    checkpoint_root: str
    read_replica: bool
    def __init__(self, graph_name: _Optional[str] = ..., part_id: _Optional[int] = ..., num_parts: _Optional[int] = ..., num_nodes: _Optional[int] = ..., num_edges: _Optional[int] = ..., node_bounds: _Optional[_Iterable[int]] = ..., edge_bounds: _Optional[_Iterable[int]] = ..., tensors: _Optional[_Iterable[_Union[TensorScheme, _Mapping]]] = ..., part_config: _Optional[str] = ..., hostname: _Optional[str] = ..., format_version: _Optional[int] = ..., ntypes: _Optional[_Iterable[str]] = ..., canonical_etypes: _Optional[_Iterable[str]] = ..., ntype_counts: _Optional[_Iterable[int]] = ..., etype_counts: _Optional[_Iterable[int]] = ..., checkpoint_root: _Optional[str] = ..., read_replica: _Optional[bool] = ...) -> None: ...

class PullRequest(_message.Message):
    __slots__ = ("name", "ids")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    ids: Tensor
    def __init__(self, name: _Optional[str] = ..., ids: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class PullResponse(_message.Message):
    __slots__ = ("rows", "padding")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    PADDING_FIELD_NUMBER: _ClassVar[int]
    rows: Tensor
    padding: bytes
    def __init__(self, rows: _Optional[_Union[Tensor, _Mapping]] = ..., padding: _Optional[bytes] = ...) -> None: ...

class PushRequest(_message.Message):
    __slots__ = ("name", "ids", "rows", "op", "request_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    ids: Tensor
    rows: Tensor
    op: PushOp
    request_id: RequestId
    def __init__(self, name: _Optional[str] = ..., ids: _Optional[_Union[Tensor, _Mapping]] = ..., rows: _Optional[_Union[Tensor, _Mapping]] = ..., op: _Optional[_Union[PushOp, str]] = ..., request_id: _Optional[_Union[RequestId, _Mapping]] = ...) -> None: ...

class PushResponse(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class Initializer(_message.Message):
    __slots__ = ("kind", "a", "b", "seed")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ZEROS: _ClassVar[Initializer.Kind]
        UNIFORM: _ClassVar[Initializer.Kind]
        NORMAL: _ClassVar[Initializer.Kind]
        CONSTANT: _ClassVar[Initializer.Kind]
        PUSHED: _ClassVar[Initializer.Kind]
    ZEROS: Initializer.Kind
    UNIFORM: Initializer.Kind
    NORMAL: Initializer.Kind
    CONSTANT: Initializer.Kind
    PUSHED: Initializer.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    A_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    kind: Initializer.Kind
    a: float
    b: float
    seed: int
    def __init__(self, kind: _Optional[_Union[Initializer.Kind, str]] = ..., a: _Optional[float] = ..., b: _Optional[float] = ..., seed: _Optional[int] = ...) -> None: ...

class InitRequest(_message.Message):
    __slots__ = ("name", "dtype", "shape", "policy", "persistent", "init", "owner", "type", "request_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    PERSISTENT_FIELD_NUMBER: _ClassVar[int]
    INIT_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: DType
    shape: _containers.RepeatedScalarFieldContainer[int]
    policy: Policy
    persistent: bool
    init: Initializer
    owner: str
    type: str
    request_id: RequestId
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[_Union[DType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., policy: _Optional[_Union[Policy, str]] = ..., persistent: _Optional[bool] = ..., init: _Optional[_Union[Initializer, _Mapping]] = ..., owner: _Optional[str] = ..., type: _Optional[str] = ..., request_id: _Optional[_Union[RequestId, _Mapping]] = ...) -> None: ...

class InitResponse(_message.Message):
    __slots__ = ("created", "scheme")
    CREATED_FIELD_NUMBER: _ClassVar[int]
    SCHEME_FIELD_NUMBER: _ClassVar[int]
    created: bool
    scheme: TensorScheme
    def __init__(self, created: _Optional[bool] = ..., scheme: _Optional[_Union[TensorScheme, _Mapping]] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("name", "request_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    request_id: RequestId
    def __init__(self, name: _Optional[str] = ..., request_id: _Optional[_Union[RequestId, _Mapping]] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: _Optional[bool] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("tensors",)
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    tensors: _containers.RepeatedCompositeFieldContainer[TensorScheme]
    def __init__(self, tensors: _Optional[_Iterable[_Union[TensorScheme, _Mapping]]] = ...) -> None: ...

class SampleRequest(_message.Message):
    __slots__ = ("seeds", "fanout", "edge_dir", "replace", "prob", "has_random_seed", "random_seed", "fanouts", "probs", "exclude_eids", "with_rows", "with_seed_rows")
    SEEDS_FIELD_NUMBER: _ClassVar[int]
    FANOUT_FIELD_NUMBER: _ClassVar[int]
    EDGE_DIR_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    PROB_FIELD_NUMBER: _ClassVar[int]
    HAS_RANDOM_SEED_FIELD_NUMBER: _ClassVar[int]
    RANDOM_SEED_FIELD_NUMBER: _ClassVar[int]
    FANOUTS_FIELD_NUMBER: _ClassVar[int]
    PROBS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_EIDS_FIELD_NUMBER: _ClassVar[int]
    WITH_ROWS_FIELD_NUMBER: _ClassVar[int]
    WITH_SEED_ROWS_FIELD_NUMBER: _ClassVar[int]
    seeds: Tensor
    fanout: int
    edge_dir: EdgeDir
    replace: bool
    prob: str
    has_random_seed: bool
    random_seed: int
    fanouts: _containers.RepeatedScalarFieldContainer[int]
    probs: _containers.RepeatedScalarFieldContainer[str]
    exclude_eids: Tensor
    with_rows: _containers.RepeatedScalarFieldContainer[str]
    with_seed_rows: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, seeds: _Optional[_Union[Tensor, _Mapping]] = ..., fanout: _Optional[int] = ..., edge_dir: _Optional[_Union[EdgeDir, str]] = ..., replace: _Optional[bool] = ..., prob: _Optional[str] = ..., has_random_seed: _Optional[bool] = ..., random_seed: _Optional[int] = ..., fanouts: _Optional[_Iterable[int]] = ..., probs: _Optional[_Iterable[str]] = ..., exclude_eids: _Optional[_Union[Tensor, _Mapping]] = ..., with_rows: _Optional[_Iterable[str]] = ..., with_seed_rows: _Optional[_Iterable[str]] = ...) -> None: ...

class NodeRows(_message.Message):
    __slots__ = ("name", "ids", "rows", "padding")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    PADDING_FIELD_NUMBER: _ClassVar[int]
    name: str
    ids: Tensor
    rows: Tensor
    padding: bytes
    def __init__(self, name: _Optional[str] = ..., ids: _Optional[_Union[Tensor, _Mapping]] = ..., rows: _Optional[_Union[Tensor, _Mapping]] = ..., padding: _Optional[bytes] = ...) -> None: ...

class EdgesResponse(_message.Message):
    __slots__ = ("src", "dst", "eid", "rows", "padding")
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    EID_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    PADDING_FIELD_NUMBER: _ClassVar[int]
    src: Tensor
    dst: Tensor
    eid: Tensor
    rows: _containers.RepeatedCompositeFieldContainer[NodeRows]
    padding: bytes
    def __init__(self, src: _Optional[_Union[Tensor, _Mapping]] = ..., dst: _Optional[_Union[Tensor, _Mapping]] = ..., eid: _Optional[_Union[Tensor, _Mapping]] = ..., rows: _Optional[_Iterable[_Union[NodeRows, _Mapping]]] = ..., padding: _Optional[bytes] = ...) -> None: ...

class FindEdgesRequest(_message.Message):
    __slots__ = ("eids",)
    EIDS_FIELD_NUMBER: _ClassVar[int]
    eids: Tensor
    def __init__(self, eids: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class InSubgraphRequest(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: Tensor
    def __init__(self, nodes: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class DegreesRequest(_message.Message):
    __slots__ = ("nids", "edge_dir", "has_etype", "etype")
    NIDS_FIELD_NUMBER: _ClassVar[int]
    EDGE_DIR_FIELD_NUMBER: _ClassVar[int]
    HAS_ETYPE_FIELD_NUMBER: _ClassVar[int]
    ETYPE_FIELD_NUMBER: _ClassVar[int]
    nids: Tensor
    edge_dir: EdgeDir
    has_etype: bool
    etype: int
    def __init__(self, nids: _Optional[_Union[Tensor, _Mapping]] = ..., edge_dir: _Optional[_Union[EdgeDir, str]] = ..., has_etype: _Optional[bool] = ..., etype: _Optional[int] = ...) -> None: ...

class DegreesResponse(_message.Message):
    __slots__ = ("degrees",)
    DEGREES_FIELD_NUMBER: _ClassVar[int]
    degrees: Tensor
    def __init__(self, degrees: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class OptimizerConfig(_message.Message):
    __slots__ = ("kind", "lr", "eps", "beta1", "beta2")
    KIND_FIELD_NUMBER: _ClassVar[int]
    LR_FIELD_NUMBER: _ClassVar[int]
    EPS_FIELD_NUMBER: _ClassVar[int]
    BETA1_FIELD_NUMBER: _ClassVar[int]
    BETA2_FIELD_NUMBER: _ClassVar[int]
    kind: str
    lr: float
    eps: float
    beta1: float
    beta2: float
    def __init__(self, kind: _Optional[str] = ..., lr: _Optional[float] = ..., eps: _Optional[float] = ..., beta1: _Optional[float] = ..., beta2: _Optional[float] = ...) -> None: ...

class PushGradRequest(_message.Message):
    __slots__ = ("name", "ids", "grads", "optimizer", "request_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    GRADS_FIELD_NUMBER: _ClassVar[int]
    OPTIMIZER_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    ids: Tensor
    grads: Tensor
    optimizer: OptimizerConfig
    request_id: RequestId
    def __init__(self, name: _Optional[str] = ..., ids: _Optional[_Union[Tensor, _Mapping]] = ..., grads: _Optional[_Union[Tensor, _Mapping]] = ..., optimizer: _Optional[_Union[OptimizerConfig, _Mapping]] = ..., request_id: _Optional[_Union[RequestId, _Mapping]] = ...) -> None: ...

class PushGradResponse(_message.Message):
    __slots__ = ("version",)
    VERSION_FIELD_NUMBER: _ClassVar[int]
    version: int
    def __init__(self, version: _Optional[int] = ...) -> None: ...

class BarrierRequest(_message.Message):
    __slots__ = ("name", "count", "timeout_s", "participant", "has_ticket", "ticket", "leave")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    PARTICIPANT_FIELD_NUMBER: _ClassVar[int]
    HAS_TICKET_FIELD_NUMBER: _ClassVar[int]
    TICKET_FIELD_NUMBER: _ClassVar[int]
    LEAVE_FIELD_NUMBER: _ClassVar[int]
    name: str
    count: int
    timeout_s: float
    participant: str
    has_ticket: bool
    ticket: int
    leave: bool
    def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ..., timeout_s: _Optional[float] = ..., participant: _Optional[str] = ..., has_ticket: _Optional[bool] = ..., ticket: _Optional[int] = ..., leave: _Optional[bool] = ...) -> None: ...

class BarrierResponse(_message.Message):
    __slots__ = ("generation", "released")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    generation: int
    released: bool
    def __init__(self, generation: _Optional[int] = ..., released: _Optional[bool] = ...) -> None: ...

class CheckpointRequest(_message.Message):
    __slots__ = ("path", "names", "request_id", "save_id", "phase")
    PATH_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SAVE_ID_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    path: str
    names: _containers.RepeatedScalarFieldContainer[str]
    request_id: RequestId
    save_id: str
    phase: CheckpointPhase
    def __init__(self, path: _Optional[str] = ..., names: _Optional[_Iterable[str]] = ..., request_id: _Optional[_Union[RequestId, _Mapping]] = ..., save_id: _Optional[str] = ..., phase: _Optional[_Union[CheckpointPhase, str]] = ...) -> None: ...

class CheckpointResponse(_message.Message):
    __slots__ = ("files", "rows")
    FILES_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedScalarFieldContainer[str]
    rows: int
    def __init__(self, files: _Optional[_Iterable[str]] = ..., rows: _Optional[int] = ...) -> None: ...

class RestoreRequest(_message.Message):
    __slots__ = ("path", "names", "request_id")
    PATH_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    path: str
    names: _containers.RepeatedScalarFieldContainer[str]
    request_id: RequestId
    def __init__(self, path: _Optional[str] = ..., names: _Optional[_Iterable[str]] = ..., request_id: _Optional[_Union[RequestId, _Mapping]] = ...) -> None: ...

class RestoreResponse(_message.Message):
    __slots__ = ("names", "rows")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    rows: int
    def __init__(self, names: _Optional[_Iterable[str]] = ..., rows: _Optional[int] = ...) -> None: ...

class ShutdownRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ShutdownResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("part_id", "uptime_s", "rss_bytes", "rss_anon_bytes", "tensors", "counters", "address", "read_replica")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    PART_ID_FIELD_NUMBER: _ClassVar[int]
    UPTIME_S_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    RSS_ANON_BYTES_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    READ_REPLICA_FIELD_NUMBER: _ClassVar[int]
    part_id: int
    uptime_s: float
    rss_bytes: int
    rss_anon_bytes: int
    tensors: _containers.RepeatedCompositeFieldContainer[TensorScheme]
    counters: _containers.ScalarMap[str, int]
    address: str
    read_replica: bool
    def __init__(self, part_id: _Optional[int] = ..., uptime_s: _Optional[float] = ..., rss_bytes: _Optional[int] = ..., rss_anon_bytes: _Optional[int] = ..., tensors: _Optional[_Iterable[_Union[TensorScheme, _Mapping]]] = ..., counters: _Optional[_Mapping[str, int]] = ..., address: _Optional[str] = ..., read_replica: _Optional[bool] = ...) -> None: ...

class CallRequest(_message.Message):
    __slots__ = ("pull", "sample_neighbors", "find_edges", "in_subgraph", "degrees", "push", "push_grad", "list", "timeout_us")
    PULL_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_NEIGHBORS_FIELD_NUMBER: _ClassVar[int]
    FIND_EDGES_FIELD_NUMBER: _ClassVar[int]
    IN_SUBGRAPH_FIELD_NUMBER: _ClassVar[int]
    DEGREES_FIELD_NUMBER: _ClassVar[int]
    PUSH_FIELD_NUMBER: _ClassVar[int]
    PUSH_GRAD_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_US_FIELD_NUMBER: _ClassVar[int]
    pull: PullRequest
    sample_neighbors: SampleRequest
    find_edges: FindEdgesRequest
    in_subgraph: InSubgraphRequest
    degrees: DegreesRequest
    push: PushRequest
    push_grad: PushGradRequest
    list: ListRequest
    timeout_us: int
    def __init__(self, pull: _Optional[_Union[PullRequest, _Mapping]] = ..., sample_neighbors: _Optional[_Union[SampleRequest, _Mapping]] = ..., find_edges: _Optional[_Union[FindEdgesRequest, _Mapping]] = ..., in_subgraph: _Optional[_Union[InSubgraphRequest, _Mapping]] = ..., degrees: _Optional[_Union[DegreesRequest, _Mapping]] = ..., push: _Optional[_Union[PushRequest, _Mapping]] = ..., push_grad: _Optional[_Union[PushGradRequest, _Mapping]] = ..., list: _Optional[_Union[ListRequest, _Mapping]] = ..., timeout_us: _Optional[int] = ...) -> None: ...

class CallError(_message.Message):
    __slots__ = ("code", "kind", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    kind: str
    message: str
    def __init__(self, code: _Optional[int] = ..., kind: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class CallResponse(_message.Message):
    __slots__ = ("pull", "sample_neighbors", "find_edges", "in_subgraph", "degrees", "push", "push_grad", "list", "error")
    PULL_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_NEIGHBORS_FIELD_NUMBER: _ClassVar[int]
    FIND_EDGES_FIELD_NUMBER: _ClassVar[int]
    IN_SUBGRAPH_FIELD_NUMBER: _ClassVar[int]
    DEGREES_FIELD_NUMBER: _ClassVar[int]
    PUSH_FIELD_NUMBER: _ClassVar[int]
    PUSH_GRAD_FIELD_NUMBER: _ClassVar[int]
    LIST_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    pull: PullResponse
    sample_neighbors: EdgesResponse
    find_edges: EdgesResponse
    in_subgraph: EdgesResponse
    degrees: DegreesResponse
    push: PushResponse
    push_grad: PushGradResponse
    list: ListResponse
    error: CallError
    def __init__(self, pull: _Optional[_Union[PullResponse, _Mapping]] = ..., sample_neighbors: _Optional[_Union[EdgesResponse, _Mapping]] = ..., find_edges: _Optional[_Union[EdgesResponse, _Mapping]] = ..., in_subgraph: _Optional[_Union[EdgesResponse, _Mapping]] = ..., degrees: _Optional[_Union[DegreesResponse, _Mapping]] = ..., push: _Optional[_Union[PushResponse, _Mapping]] = ..., push_grad: _Optional[_Union[PushGradResponse, _Mapping]] = ..., list: _Optional[_Union[ListResponse, _Mapping]] = ..., error: _Optional[_Union[CallError, _Mapping]] = ...) -> None: ...

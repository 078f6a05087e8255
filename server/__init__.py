"""One partition server: storage, sampling, sparse optimizer state, barriers, checkpoints, the gRPC servicer."""

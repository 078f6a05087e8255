"""One partition server: storage, sampling, optimizer state, barriers, checkpoints, the gRPC servicer."""

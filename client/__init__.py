"""The trainer-side client: DistGraph, DistTensor, DistEmbedding, sampling, loaders, optimizers."""

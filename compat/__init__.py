"""DGL compatibility namespaces: port a dgl.distributed script by changing its imports."""

"""What a partition server keeps across a crash or a restart: checkpoints, the write path, the write-ahead
log and the replay window.

- :mod:`.checkpoint`: one server's tensors and optimizer state saved to and restored from a folder;
  :mod:`.checkpoint_set`: the set of every server's checkpoint with its manifest; :mod:`.checkpoint_root`:
  where named checkpoints may live.
- :mod:`.write_path`: the path of every mutating request (replay window, write gate, durability);
  :mod:`.replay_window`: answers to replays; :mod:`.modes`: when an applied write may be answered (off,
  periodic checkpoints, write-ahead log).
- :mod:`.periodic_checkpoint`: checkpoints taken every N updates or seconds;
  :mod:`.periodic_checkpoint_folders`: their on-disk layout; :mod:`.periodic_restore`: a restarted
  server reading the newest one back.
- :mod:`.write_log`: the write-ahead log; :mod:`.synced_files`: files and folders written with ``fsync``.
- :mod:`.durable_state`: the pieces above opened together for one running server.

Import order (no circle): ``synced_files`` <- ``write_log`` <- ``modes`` <- ``write_path`` <-
``periodic_checkpoint`` <- ``durable_state``.
"""

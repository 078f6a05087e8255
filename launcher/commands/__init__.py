"""One module per ``graphstore`` subcommand; each exposes ``register(subparsers)``."""

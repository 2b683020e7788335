"""One module per `python -m verify` subcommand; each has `register(subparsers)` and sets `run` on its parser."""

"""pyinfra glue: one package per role (facts, pure models, @deploy functions). Pins live in roles/pins.py."""

from roles import call_stack

call_stack.install()  # before any operation is planned: see roles/call_stack.py

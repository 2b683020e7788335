"""pyinfra glue: one package per role (facts, pure models, @deploy functions). Pins live in roles/pins.py."""

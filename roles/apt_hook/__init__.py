"""The apt hook: after every dpkg run, re-check what the venv's Python process would load."""

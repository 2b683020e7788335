"""The apt hook: after every change to the dpkg database (dpkg's post-invoke, apt's DPkg::Post-Invoke), re-check what
the venv's Python process would load."""

"""The verifier: a pure, standalone core that reads files and returns data.

It runs on the workstation (installed as one byte-compiled directory, run with the host's python3 through
verify/launcher.py), so it depends only on the standard library and pyelftools, never imports pyinfra and never
executes the files it analyses.
The one part that imports torch and bitsandbytes (the runtime stage) runs with the venv's interpreter.
"""

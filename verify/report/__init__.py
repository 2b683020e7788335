"""The verification report and what is read back from it: the report and its schema (report), the drift between two
reports (drift), and the apt hook's memory of its last results (hook_state)."""

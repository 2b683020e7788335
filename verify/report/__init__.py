"""The verification report and what is read back from it: the report, its schema and the rule for whether it proves a
pass (report, schema_check), the drift between two reports (drift), and the apt hook's memory of its last results
(hook_state)."""

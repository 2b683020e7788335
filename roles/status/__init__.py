"""The status task: what every host already keeps (verification report, apt hook and boot check results), read in one
SSH round trip per host and written as the fleet summary — nothing re-run, nothing changed."""

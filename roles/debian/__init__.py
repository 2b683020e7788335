"""What every stage may ask of a Debian or Ubuntu host, in one place."""

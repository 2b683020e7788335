"""Stage boot_check: the systemd unit that re-verifies the GPU stack once per boot (verify boot-check)."""

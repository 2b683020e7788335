"""The verification stage: run the verifier on each host, keep its report on the controller, summarise the fleet."""

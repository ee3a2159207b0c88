"""Cost models: per-op FLOP and byte counts, device specs and roofline floors."""

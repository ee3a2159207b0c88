"""Stage: cost. Each row's FLOPs and minimal bytes from its op's record (``tracekit.ops``), the device
specs (``devices``, ``specs/*.toml``), and the roofline floor, bound and gap (``roofline``)."""

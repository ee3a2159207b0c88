"""``tracekit calibrate``: measure the roofs a device spec holds on the machine it runs on, and write
them as a spec file that ``--spec`` reads (docs/devices.md, "Calibrate").

``figures`` (one measured number, how it was timed), ``timing`` (clocks, sizes, repeats),
``torch_device`` (CUDA, MPS and CPU through torch), ``mlx_device`` (MLX on Metal, CUDA or CPU),
``host`` (CPU name, caches, memory), ``spec_file`` (the TOML writer, the datasheet comparison),
``run`` (the command's flow).
"""

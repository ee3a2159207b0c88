"""``tracekit measure``: the user's own step timed in five scopes side by side, with energy (issue 13).

``script`` runs the script as ``capture`` does and finds its step the same way (``--step-fn``, or the root
``nn.Module``); at the step's first call it measures, then lets the script go on. ``scopes`` holds the
timers (CUDA events on a GPU, the wall clock on a CPU) and the scopes, ``profiled`` the kernel time with
hot and cold L2 and the floor (a short capture of the step, explained), ``energy`` NVML's energy counter,
``report`` the JSON document, the table and Markdown. docs/measure.md says what each scope means.
"""

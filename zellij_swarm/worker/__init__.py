"""What runs beside each worker: the wrapper script (``wrapper``), the launcher that starts
headless wrappers off the supervisor's thread (``launcher``, ``_launcher``), the pane leader,
and finding a worker's whole process tree (``procs``)."""

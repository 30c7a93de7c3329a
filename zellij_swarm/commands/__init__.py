"""What the CLI does besides running: ``status``, ``logs``, ``proof``, ``prune``, ``doctor``
and the JUnit report."""

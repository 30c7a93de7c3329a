"""What to run and how: the settings (one table, one precedence rule), swarm files and plain
command lists, and tasks added to a running swarm."""

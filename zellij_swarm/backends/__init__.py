"""Where workers run: the ``Backend`` protocol (``base``) and its implementations
(``headless``, ``tmux``, ``zellij``). Nothing is imported here: every command of the CLI
imports only the modules it uses, so ``zellij-swarm status`` does not pay for the backends."""

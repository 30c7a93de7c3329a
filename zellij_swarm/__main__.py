from zellij_swarm.cli import main

main()

"""``python -m deqlab`` runs the command line."""

from deqlab.cli import main

main()

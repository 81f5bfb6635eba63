"""`python -m vramplan`: the same command line as `vramplan`."""

from vramplan.cli import main

if __name__ == "__main__":
    main(prog_name="vramplan")

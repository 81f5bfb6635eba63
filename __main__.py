"""`python -m vramplan`: the same command line as `vramplan`."""

from vramplan.cli import run

if __name__ == "__main__":
    run()

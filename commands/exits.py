"""The documented exit codes of every vramplan command."""

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INFEASIBLE = 0, 1, 2, 3
EXIT_INTERRUPTED = 130

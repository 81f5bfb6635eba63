"""The vramplan commands: one module per command, with the option and rendering helpers beside them."""

"""vramplan: which cluster and training configuration trains your model without running out of GPU memory."""

from importlib import metadata

try:
    __version__ = metadata.version("vramplan")
except metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

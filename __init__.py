"""vramplan: which cluster and training configuration trains your model without running out of GPU memory."""


def __getattr__(name: str) -> str:
    """`vramplan.__version__`, read from the installed metadata on first use (importlib.metadata
    costs about 30 ms, which every `vramplan --help` would otherwise pay)."""
    if name != "__version__":
        raise AttributeError(f"module 'vramplan' has no attribute {name!r}")
    from importlib import metadata

    try:
        return metadata.version("vramplan")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"

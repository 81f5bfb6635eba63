"""vramplan batch: spreadsheet I/O, the journal, the backends (local, Ray, Dask) and the worker."""

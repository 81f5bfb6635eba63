"""vramplan batch: run a sheet's rows on a backend (local forkserver pool, Ray, Dask), the worker, resume (the sheet I/O is sheets/)."""

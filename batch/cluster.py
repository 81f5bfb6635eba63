"""Ray and Dask backends for `vramplan batch`; each engine is imported only when it is chosen.

With an address they connect to the user's cluster; without one they start a local cluster on
this machine (loopback only) and stop it at the end. The catalogue is shipped to the cluster
once (ray.put / scatter), so workers need vramplan installed but not the catalogue files.
A chunk whose worker died is reported lost (the caller retries it); any other failure of the
cluster is a BatchError with the engine's own message.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any

from vramplan.batch.backends import BatchError, ChunkDone, ChunkLost, Outcome
from vramplan.batch.worker import package_version, solve_chunk
from vramplan.models.catalogue.catalogue import Catalogue

log = logging.getLogger(__name__)

CLUSTER_MIN_CHUNK_SIZE = 8  # a task on a cluster costs about as much as solving one row
CLUSTER_MAX_CHUNK_SIZE = 64
CONNECT_TIMEOUT_S = 60  # a cluster's handshake; VRAMPLAN_CONNECT_TIMEOUT_S sets another (connect_timeout_s)
LOCAL_OBJECT_STORE_BYTES = 200 * 2**20


def connect_timeout_s() -> float:
    """How long a cluster may take to answer its handshake: VRAMPLAN_CONNECT_TIMEOUT_S (seconds, 1 ..
    3600), else CONNECT_TIMEOUT_S."""
    text = os.environ.get("VRAMPLAN_CONNECT_TIMEOUT_S")
    if text is None:
        return CONNECT_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 1 <= seconds <= 3600:
        raise BatchError(f"VRAMPLAN_CONNECT_TIMEOUT_S={text!r}: must be seconds between 1 and 3600")
    return seconds


def _missing(engine: str, extra: str) -> BatchError:
    return BatchError(f"the {engine} backend needs {engine}: pip install 'vramplan[{extra}]'")


MAX_SCHEDULER_FILE_BYTES = 2**20  # a scheduler's JSON is a few hundred bytes
REACH_TIMEOUT_S = 5  # a cluster address that takes no TCP connection in this long is not answering


def check_reachable(engine: str, address: str) -> None:
    """Before handing an address to Ray or Dask (whose own connects retry for minutes: a closed port
    kept `--backend ray --address 127.0.0.1:1` waiting past 200 s): one TCP connect to its host
    and port, within REACH_TIMEOUT_S. Addresses without a host:port (Ray's `auto`) pass."""
    import socket
    from urllib.parse import urlsplit

    target = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        host, port = target.hostname, target.port
    except ValueError:
        host, port = None, None
    if not host or port is None:
        return
    try:
        with socket.create_connection((host, port), timeout=REACH_TIMEOUT_S):
            pass
    except OSError as error:
        raise BatchError(f"cannot reach the {engine} cluster {address}: {_first_line(error)}") from None


def check_scheduler_file(path: str) -> None:
    """A Dask scheduler file must already be a regular file: Dask waits for a missing one to appear
    and blocks reading a FIFO (both hung `batch --backend dask` past 200 s)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        raise BatchError(f"cannot read the Dask scheduler file {path}: {_first_line(error)}") from None
    if not stat.S_ISREG(mode):
        raise BatchError(f"the Dask scheduler file {path} is not a regular file")
    if mode and os.stat(path).st_size > MAX_SCHEDULER_FILE_BYTES:
        raise BatchError(f"the Dask scheduler file {path} is not a scheduler file (over 1 MiB)")
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            content = json.load(handle)
    except (OSError, ValueError, RecursionError):
        content = None
    if not isinstance(content, dict) or not isinstance(content.get("address"), str):
        # Dask asserted on it (`AssertionError:` with no text was the whole message)
        raise BatchError(f"the Dask scheduler file {path} is not a scheduler file (JSON with an 'address', "
                         "as `dask scheduler --scheduler-file` writes)")


RAY_PROBE = ("import logging, sys, ray; ray.init(address=sys.argv[1], include_dashboard=False, "
             "log_to_driver=False, logging_level=logging.ERROR); ray.shutdown()")


def probe_ray(address: str) -> None:
    """Connect to the Ray cluster once in a child process, within CONNECT_TIMEOUT_S: ray.init has no
    timeout of its own, and a port that takes TCP connections but is no Ray head kept it retrying
    past 150 s (a port that closes each connection) or printed 20 lines first. A cluster that answers
    costs one more connect (a few seconds); what fails here is one line."""
    import subprocess

    try:
        probe = subprocess.run([sys.executable, "-c", RAY_PROBE, address], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=connect_timeout_s())
    except subprocess.TimeoutExpired:
        raise BatchError(f"cannot reach the Ray cluster {address}: it did not answer as a Ray head within "
                         f"{connect_timeout_s():g} s") from None
    if probe.returncode != 0:
        lines = [line for line in probe.stderr.decode("utf-8", "replace").splitlines() if "Error" in line]
        reason = " ".join(lines[-1].split())[:300] if lines else f"the connect exited with {probe.returncode}"
        raise BatchError(f"cannot start or reach the Ray cluster {address}: {reason}")


@contextlib.contextmanager
def _native_stderr_silenced():
    """File descriptor 2 points at /dev/null while Ray connects: its C++ core writes a
    `gcs_client.cc ... Failed to get cluster ID` line a second to the process's stderr while an
    address does not answer as a Ray head (20 lines before its own error), below Python's logging
    and whatever RAY_BACKEND_LOG_LEVEL says. What fails is still one line: the exception, reported
    by the caller once the descriptor is back."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


class RayBackend:
    min_chunk_size = CLUSTER_MIN_CHUNK_SIZE
    max_chunk_size = CLUSTER_MAX_CHUNK_SIZE

    def __init__(self, catalogue: Catalogue, workers: int, address: str | None) -> None:
        try:
            import ray
            import ray.exceptions
        except ImportError:
            raise _missing("ray", "ray") from None
        self._ray = ray
        self._lost_errors = tuple(
            getattr(ray.exceptions, name)
            for name in ("WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OwnerDiedError",
                         "LocalRayletDiedError", "ActorDiedError")
            if hasattr(ray.exceptions, name)
        )
        target = address or os.environ.get("RAY_ADDRESS")
        options: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        if target:
            check_reachable("Ray", target)
            probe_ray(target)
        try:
            with _native_stderr_silenced():
                if target:
                    ray.init(address=target, **options)
                else:
                    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
                    ray.init(address="local", num_cpus=workers, object_store_memory=LOCAL_OBJECT_STORE_BYTES,
                             _node_ip_address="127.0.0.1", **options)
        except Exception as error:  # noqa: BLE001 - ConnectionError, RuntimeError, ValueError ...
            raise BatchError(f"cannot start or reach the Ray cluster {target or '(local)'}: "
                             f"{_first_line(error)}") from None
        self.parallelism = max(1, int(ray.cluster_resources().get("CPU", workers)))
        self._catalogue_ref = ray.put(catalogue)
        self._solve = ray.remote(num_cpus=1, max_retries=0)(solve_chunk)
        self._version = ray.remote(num_cpus=0, max_retries=0)(package_version)
        self._refs: dict[Any, int] = {}

    def worker_versions(self) -> set[str]:
        """The version on every alive node (one probe task pinned to each)."""
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [node["NodeID"] for node in ray.nodes() if node.get("Alive")]
        probes = [self._version.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
                  for node in nodes]
        try:
            return set(ray.get(probes, timeout=connect_timeout_s()))
        except Exception as error:  # noqa: BLE001
            raise BatchError(f"cannot run vramplan on the Ray workers (is it installed there?): "
                             f"{_first_line(error)}") from None

    def submit(self, chunk: int, jobs: list[dict[str, Any]], retry: bool = False) -> None:
        self._refs[self._solve.remote(self._catalogue_ref, jobs)] = chunk

    def wait(self, timeout_s: float) -> list[Outcome]:
        if not self._refs:
            return []
        ray = self._ray
        refs = list(self._refs)
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout_s)
        if ready:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        outcomes: list[Outcome] = []
        for ref in ready:
            chunk = self._refs.pop(ref)
            try:
                version, answers = ray.get(ref)
            except self._lost_errors as error:
                outcomes.append(ChunkLost(chunk, _first_line(error)))
            except Exception as error:  # noqa: BLE001
                raise BatchError(f"a Ray task failed: {_first_line(error)}") from None
            else:
                outcomes.append(ChunkDone(chunk, version, answers))
        return outcomes

    def close(self, cancel: bool) -> None:
        if cancel:
            for ref in self._refs:
                try:
                    self._ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - finished or already gone
                    pass
        self._refs.clear()
        self._ray.shutdown()


class DaskBackend:
    min_chunk_size = CLUSTER_MIN_CHUNK_SIZE
    max_chunk_size = CLUSTER_MAX_CHUNK_SIZE

    def __init__(self, catalogue: Catalogue, workers: int, address: str | None) -> None:
        try:
            import dask
            import distributed
        except ImportError:
            raise _missing("dask", "dask") from None
        self._distributed = distributed
        self._cluster = None
        if address and (address.endswith(".json") or os.path.exists(address)):
            check_scheduler_file(address)
        elif address:
            check_reachable("Dask", address)
        try:
            if address and (address.endswith(".json") or os.path.isfile(address)):
                self._client = distributed.Client(scheduler_file=address, timeout=connect_timeout_s())
            elif address or dask.config.get("scheduler-address", None):
                self._client = distributed.Client(address, timeout=connect_timeout_s())
            else:
                self._cluster = distributed.LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=None, silence_logs=logging.WARNING,
                )
                self._client = distributed.Client(self._cluster)
            self._client.wait_for_workers(1, timeout=connect_timeout_s())
        except Exception as error:  # noqa: BLE001 - OSError, TimeoutError, ValueError ...
            self._close_cluster()
            raise BatchError(f"cannot start or reach the Dask cluster {address or '(local)'}: "
                             f"{_first_line(error)}") from None
        workers_info = self._client.scheduler_info().get("workers", {})
        self.parallelism = max(1, sum(info.get("nthreads", 1) for info in workers_info.values()))
        self._catalogue = self._client.scatter(catalogue, broadcast=True)
        self._futures: dict[Any, int] = {}

    def worker_versions(self) -> set[str]:
        try:
            return set(self._client.run(package_version).values())
        except Exception as error:  # noqa: BLE001
            raise BatchError(f"cannot run vramplan on the Dask workers (is it installed there?): "
                             f"{_first_line(error)}") from None

    def submit(self, chunk: int, jobs: list[dict[str, Any]], retry: bool = False) -> None:
        future = self._client.submit(solve_chunk, self._catalogue, jobs, pure=False, retries=0)
        self._futures[future] = chunk

    def _is_lost(self, error: BaseException) -> bool:
        distributed = self._distributed
        lost = (distributed.KilledWorker, distributed.comm.core.CommClosedError)
        return isinstance(error, lost) or type(error).__name__ in ("FutureCancelledError", "CancelledError")

    def wait(self, timeout_s: float) -> list[Outcome]:
        if not self._futures:
            return []
        pending = list(self._futures)
        try:
            self._distributed.wait(pending, timeout=timeout_s, return_when="FIRST_COMPLETED")
        except TimeoutError:
            pass
        outcomes: list[Outcome] = []
        for future in pending:
            if not future.done():
                continue
            chunk = self._futures.pop(future)
            try:
                version, answers = future.result()
            except Exception as error:  # noqa: BLE001
                if not self._is_lost(error):
                    raise BatchError(f"a Dask task failed: {_first_line(error)}") from None
                outcomes.append(ChunkLost(chunk, _first_line(error)))
            else:
                outcomes.append(ChunkDone(chunk, version, answers))
        return outcomes

    def _close_cluster(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def close(self, cancel: bool) -> None:
        if cancel and self._futures:
            self._client.cancel(list(self._futures), force=True)
        self._futures.clear()
        self._client.close()
        self._close_cluster()

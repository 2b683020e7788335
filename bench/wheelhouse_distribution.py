"""Benchmark (not a test): distributing a multi-GB wheelhouse to N hosts — pushed by the controller over SSH (the venv
stage's default), pulled by the hosts over HTTP from the controller's own server (`wheelhouse_serve`), and relayed
(pushed to one seed host, which serves the others: `wheelhouse_seed`), in the same run, interleaved.

    sudo .venv/bin/python bench/wheelhouse_distribution.py [--hosts 1,4,8] [--size-gib 2] [--rounds 2]

The wheelhouse is a DUMMY, built here and labelled so: one valid wheel, `rocm_fleet_bench_dummy`, holding --size-gib
of random (incompressible) bytes, stored uncompressed, as the torch ROCm wheel's GBs of kernels are; a complete set
with its stamp and requirements.txt (every wheel's sha256), as roles/venv/wheelhouse.py makes them.

  push: `pyinfra INVENTORY bench/wheelhouse_push_deploy.py` — the venv stage's own upload operation
        (roles/uploads.checked_files: SFTP through a private staging directory, sha256 checked on each host);
  pull: the controller's server (roles/venv/wheelhouse_pull.WheelhouseServer, what the venv stage starts), and on
        every host at once `pip download --no-index --find-links http://127.0.0.1:PORT/<set>/ --require-hashes
        --no-cache-dir -r requirements.txt` — the pull install's own pip flags (download instead of install: both
        modes end with the checked bytes on the host's disk, and the dummy needs no venv to install into);
  relay: the push above to the first host alone, then the seed's server (roles/venv/wheelhouse_relay's command line,
        started in the seed's root directly rather than over an SSH session of its own) and the same pip download on
        the N - 1 others from it. Its wall time is both parts, push included.
Each run's files are removed from the hosts before the next (not timed). Reported: wall time, controller CPU (the
pyinfra process, plus the server process in pull mode), and the bytes that passed through the pyinfra process (sent
over TCP: the kernel's count per connection, `ss -tinp`, sampled until it exits) and through the server (its own
count).
  own:  the hosts' own work alone, the peer: in N hosts at once, the wheel's bytes written to the host's disk and
        hashed (sha256, as pip's --require-hashes), read from the controller's copy — no SSH, no HTTP, no pip. No
        mode can leave a host less to do, so where its time at N hosts exceeds 2 × its own N=1, so must every mode's:
        on this machine the N local hosts share two cores and one disk; on a real fleet each has its own.
Targets: through the controller ≈ 1 × the wheelhouse for N hosts (not N ×); pull to 8 hosts ≤ 2 × one host.
"""

from __future__ import annotations

import argparse
import base64
import collections
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.fleet_runs import ENV, PYINFRA, load, loads, sub_inventory  # noqa: E402
from localfleet.ports import free_port  # noqa: E402
from roles.venv.wheelhouse import REQUIREMENTS, STAMP, requirements_text, sha256_of  # noqa: E402
from roles.venv.wheelhouse_pull import WheelhouseServer  # noqa: E402
from roles.venv.wheelhouse_relay import seed_server_command  # noqa: E402
from roles.venv.wheelhouse_server import READY  # noqa: E402

SET = "bench-dummy-set"
NAME = "rocm_fleet_bench_dummy"
WHEEL = f"{NAME}-1.0-py3-none-any.whl"
ON_HOST = "/var/tmp/rocm-fleet-bench"  # the push's destination and the pull's, removed after each run
PIP_VENV = "/var/tmp/rocm-fleet-bench-pip"  # a venv on each host, only for its pip
GIB = 1 << 30


def _record_hash(data_hash) -> str:
    return "sha256=" + base64.urlsafe_b64encode(data_hash.digest()).rstrip(b"=").decode()


def build_dummy_set(base: Path, size: int) -> Path:
    """A complete wheel set holding one valid wheel of about `size` bytes of random data (see the module)."""
    directory = base / SET
    directory.mkdir(parents=True)
    wheel = directory / WHEEL
    small = {
        f"{NAME}/__init__.py": b'"""rocm-fleet benchmark DUMMY: random bytes standing in for a multi-GB wheel."""\n',
        f"{NAME}-1.0.dist-info/METADATA": (
            b"Metadata-Version: 2.1\nName: rocm-fleet-bench-dummy\nVersion: 1.0\n"
            b"Summary: DUMMY wheel for bench/wheelhouse_distribution.py\n"
        ),
        f"{NAME}-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: rocm-fleet bench\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, data in small.items():
            archive.writestr(name, data)
            record.append(f"{name},{_record_hash(hashlib.sha256(data))},{len(data)}")
        digest = hashlib.sha256()
        with archive.open(f"{NAME}/blob.bin", "w", force_zip64=True) as blob:
            left = size
            while left:
                chunk = os.urandom(min(left, 16 << 20))
                blob.write(chunk)
                digest.update(chunk)
                left -= len(chunk)
        record.append(f"{NAME}/blob.bin,{_record_hash(digest)},{size}")
        record.append(f"{NAME}-1.0.dist-info/RECORD,,")
        archive.writestr(f"{NAME}-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    files = {WHEEL: {"size": wheel.stat().st_size, "sha256": sha256_of(wheel)}}
    (directory / REQUIREMENTS).write_text(requirements_text(files))
    (directory / STAMP).write_text(json.dumps({"recipe": {"bench": "DUMMY"}, "files": files}, indent=2) + "\n")
    return directory


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def socket_bytes_sent(pid: int) -> dict[tuple[str, str], int]:
    """(local, peer) -> bytes sent, of every TCP connection process `pid` holds, from `ss -tinp` (the kernel's own
    count; /proc/PID/io's wchar misses sockets written with send(), as paramiko does)."""
    done = subprocess.run(["ss", "-tinpH", "state", "established"], capture_output=True, text=True)
    found, connection = {}, None
    for line in done.stdout.splitlines():
        if not line.startswith(("\t", " ")):
            fields = line.split()
            connection = (fields[2], fields[3]) if f"pid={pid}," in line and len(fields) > 3 else None
        elif connection is not None:
            for field in line.split():
                if field.startswith("bytes_sent:"):
                    found[connection] = int(field.split(":")[1])
    return found


def run_pyinfra(argv: list[str], env: dict | None = None) -> tuple[float, int, int]:
    """(wall seconds, exit status, bytes the pyinfra process sent over TCP — its SSH connections to the hosts)."""
    started = time.monotonic()
    process = subprocess.Popen(
        [PYINFRA, *argv], cwd=REPO, env={**ENV, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    sent: dict[tuple[str, str], int] = {}

    def sample() -> None:
        # pyinfra keeps its connections until the run ends: the last sample misses at most what it sent in its
        # last half second, after the transfers.
        while process.poll() is None:
            for connection, count in socket_bytes_sent(process.pid).items():
                sent[connection] = max(sent.get(connection, 0), count)
            time.sleep(0.5)

    sampler = threading.Thread(target=sample)
    sampler.start()
    process.wait()
    sampler.join()
    return time.monotonic() - started, process.returncode, sum(sent.values())


# The least work any mode leaves each host: the wheel's bytes written to its disk and hashed (sha256 by hashlib, as pip
# --require-hashes does), read here from the controller's copy (page cache), in 1 MiB chunks.
OWN_WORK = (
    "import hashlib, sys\n"
    "digest = hashlib.sha256()\n"
    "with open(sys.argv[1], 'rb') as source, open(sys.argv[2], 'wb') as dest:\n"
    "    while chunk := source.read(1 << 20):\n"
    "        digest.update(chunk)\n"
    "        dest.write(chunk)\n"
    "print(digest.hexdigest())\n"
)


def own_work(hosts, wheel: Path) -> float:
    """Wall time of the hosts' own work alone (OWN_WORK) in N hosts at once — no SSH, no HTTP, no pip: the peer that
    says where this machine bends, since its N hosts share two cores and one disk whatever the mode."""
    expected = sha256_of(wheel)
    destinations = [host.root / ON_HOST.lstrip("/") / WHEEL for host in hosts]
    for destination in destinations:
        destination.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", OWN_WORK, str(wheel), str(destination)], stdout=subprocess.PIPE, text=True
        )
        for destination in destinations
    ]
    digests = [process.communicate()[0].strip() for process in processes]
    wall = time.monotonic() - started
    if any(process.returncode != 0 for process in processes) or set(digests) != {expected}:
        sys.exit(f"the hosts' own work failed: exits {[p.returncode for p in processes]}, digests {set(digests)}")
    return wall


def clean(hosts) -> None:
    for host in hosts:
        shutil.rmtree(host.root / ON_HOST.lstrip("/"), ignore_errors=True)


def pip_from(port: int) -> str:
    """The pull install's pip flags, as `pip download` into ON_HOST (see the module docstring)."""
    return (
        f"{PIP_VENV}/bin/python -m pip download --isolated --disable-pip-version-check --no-input --no-index "
        f"--find-links http://127.0.0.1:{port}/{SET}/ --require-hashes --no-cache-dir "
        f"-r /var/tmp/rocm-fleet-bench-requirements.txt -d {ON_HOST}"
    )


def relay(
    fleet, seed_inventory: str, others_inventory: str | None, wheel_set: Path, n: int, size: int
) -> tuple[float, int, int]:
    """Push to the first host, then the others pull from it: (wall s, bytes through pyinfra, bytes the seed
    served)."""
    started = time.monotonic()
    _, code, written = run_pyinfra(
        [seed_inventory, "bench/wheelhouse_push_deploy.py", "-y"],
        {"ROCM_FLEET_BENCH_SET": str(wheel_set), "ROCM_FLEET_BENCH_DEST": ON_HOST},
    )
    if code != 0:
        sys.exit(f"relay: the push to the seed failed (exit {code})")
    served = 0
    if others_inventory is not None:
        port = free_port()
        seed = subprocess.Popen(
            fleet.hosts[0].command(["sh", "-c", seed_server_command(ON_HOST, SET, "127.0.0.1", port)]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        first = seed.stdout.readline()
        if not first.startswith(READY):
            seed.kill()
            sys.exit(f"relay: the seed's server did not start: {first.strip()}")
        _, code, pulled = run_pyinfra([others_inventory, "exec", "-y", "--", pip_from(port)])
        out, _ = seed.communicate("")
        written += pulled
        served = int(out.split()[1]) if out.startswith("served ") else 0
        if code != 0:
            sys.exit(f"relay: the pull from the seed failed (exit {code})")
    wall = time.monotonic() - started
    arrived = sum(
        (host.root / ON_HOST.lstrip("/") / WHEEL).stat().st_size
        for host in fleet.hosts[:n]
        if (host.root / ON_HOST.lstrip("/") / WHEEL).is_file()
    )
    if arrived != n * size:
        sys.exit(f"relay to {n} host(s): {arrived} of {n * size} bytes arrived")
    return wall, written, served


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,4,8")
    parser.add_argument("--size-gib", type=float, default=2.0, help="size of the dummy wheel (default 2 GiB)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sizes = sorted({int(part) for part in args.hosts.split(",")})
    if os.geteuid() != 0:
        sys.exit("run as root: a local fleet needs containers, mounts and sshd")

    from localfleet import Fleet

    scratch = Path(tempfile.mkdtemp(prefix="wheelhouse-distribution-"))
    print(f"load average at start: {loads()}", flush=True)
    try:
        started = time.monotonic()
        wheel_set = build_dummy_set(scratch / "wheelhouse", int(args.size_gib * GIB))
        size = (wheel_set / WHEEL).stat().st_size
        print(
            f"DUMMY wheelhouse: {WHEEL}, {size / GIB:.2f} GiB of random bytes (built in "
            f"{time.monotonic() - started:.0f} s)",
            flush=True,
        )
        with Fleet.up(n=max(sizes), login="admin") as fleet:
            inventories = {n: str(sub_inventory(fleet, n, scratch)) for n in sizes}
            seed_inventory = str(sub_inventory(fleet, 1, scratch))
            others = {n: str(sub_inventory(fleet, n, scratch, skip_first=1)) for n in sizes if n > 1}
            for host in fleet.hosts:  # pip for the pull side; the requirements file as the venv stage uploads it
                host.run(["python3", "-m", "venv", PIP_VENV])
                shutil.copyfile(wheel_set / REQUIREMENTS, host.root / "var/tmp/rocm-fleet-bench-requirements.txt")
            results: dict[tuple[str, int], list[tuple[float, float, int, int]]] = collections.defaultdict(list)
            for round_number in range(1, args.rounds + 1):
                for n in sizes:
                    hosts = fleet.hosts[:n]
                    # push
                    around = [load()]
                    before = children_cpu()
                    wall, code, written = run_pyinfra(
                        [inventories[n], "bench/wheelhouse_push_deploy.py", "-y"],
                        {"ROCM_FLEET_BENCH_SET": str(wheel_set), "ROCM_FLEET_BENCH_DEST": ON_HOST},
                    )
                    cpu = children_cpu() - before
                    arrived = sum(
                        (host.root / ON_HOST.lstrip("/") / WHEEL).stat().st_size
                        for host in hosts
                        if (host.root / ON_HOST.lstrip("/") / WHEEL).is_file()
                    )
                    if code != 0 or arrived != n * size:
                        sys.exit(f"push to {n} host(s) failed (exit {code}, {arrived} of {n * size} bytes arrived)")
                    results[("push", n)].append((wall, cpu, written, 0))
                    around.append(load())
                    clean(hosts)
                    # pull
                    around.append(load())
                    before = children_cpu()
                    server = WheelhouseServer(str(wheel_set.parent), "127.0.0.1", free_port())
                    started = time.monotonic()
                    if server.start() is not None:
                        sys.exit(f"the wheelhouse server did not start: {server.failure}")
                    _, code, written = run_pyinfra([inventories[n], "exec", "-y", "--", pip_from(server.port)])
                    server.stop()
                    wall = time.monotonic() - started
                    cpu = children_cpu() - before
                    served = int(server.served.split()[1]) if server.served else 0
                    arrived = sum(
                        (host.root / ON_HOST.lstrip("/") / WHEEL).stat().st_size
                        for host in hosts
                        if (host.root / ON_HOST.lstrip("/") / WHEEL).is_file()
                    )
                    if code != 0 or arrived != n * size:
                        sys.exit(f"pull to {n} host(s) failed (exit {code}, {arrived} of {n * size} bytes arrived)")
                    results[("pull", n)].append((wall, cpu, written, served))
                    around.append(load())
                    clean(hosts)
                    # relay
                    around.append(load())
                    before = children_cpu()
                    wall, written, served = relay(fleet, seed_inventory, others.get(n), wheel_set, n, size)
                    results[("relay", n)].append((wall, children_cpu() - before, written, served))
                    around.append(load())
                    clean(hosts)
                    # the hosts' own work alone
                    around.append(load())
                    results[("own", n)].append((own_work(hosts, wheel_set / WHEEL), 0.0, 0, 0))
                    around.append(load())
                    clean(hosts)
                    push, pull, relayed = (results[(mode, n)][-1] for mode in ("push", "pull", "relay"))
                    print(
                        f"  round {round_number} N={n}: push {push[0]:.1f} s (load {around[0]} -> {around[1]}), "
                        f"pull {pull[0]:.1f} s (load {around[2]} -> {around[3]}), relay {relayed[0]:.1f} s "
                        f"(load {around[4]} -> {around[5]}); pull/push {pull[0] / push[0]:.2f}, "
                        f"relay/push {relayed[0] / push[0]:.2f}; the hosts' own work alone "
                        f"{results[('own', n)][-1][0]:.1f} s (load {around[6]} -> {around[7]})",
                        flush=True,
                    )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"load average at the end: {loads()}")
    print(f"\nDUMMY wheelhouse of {size / GIB:.2f} GiB; median of {args.rounds} rounds")
    print(
        "| mode | N | wall s | × its N=1 | controller CPU s | through pyinfra (× wheelhouse) | "
        "through the server (× wheelhouse) | MB/s to all hosts |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for mode in ("push", "pull", "relay", "own"):
        one = statistics.median(v[0] for v in results[(mode, sizes[0])])
        for n in sizes:
            values = results[(mode, n)]
            wall = statistics.median(v[0] for v in values)
            cpu = statistics.median(v[1] for v in values)
            written = statistics.median(v[2] for v in values)
            served = statistics.median(v[3] for v in values)
            through = "– | –" if mode == "own" else f"{written / size:.2f} | {served / size:.2f}"
            print(
                f"| {mode} | {n} | {wall:.1f} | {wall / one:.2f} | {cpu:.1f} | {through} | "
                f"{n * size / wall / 1e6:.0f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

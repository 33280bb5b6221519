"""What TLS costs: P1 (produce throughput) and P4 (catch-up consume) over SSL and PLAINTEXT,
kbroker and Apache Kafka 4.3.1 compared.

``python -m compat.bench.ssl_cost [--runs 3] [--produce-mib 1024] [--backlog-mib 1024] [--warmup-mib 256]``

Each run starts a fresh kbroker, then a fresh Kafka (the order alternates from run to run; one
broker runs at a time), from the secured settings of ``compat.security`` (the same certificates,
a PLAINTEXT and an SSL listener among others), and measures on each: P1 over PLAINTEXT and over
SSL (1 KiB records, 1 MB batches, linger 5 ms, acks=1, librdkafka; after an untimed 256 MiB over
each), then P4 (a backlog written untimed over PLAINTEXT, read from offset 0 over PLAINTEXT and
over SSL). It prints each measurement as it goes, then the medians with the ratios SSL/PLAINTEXT
per broker and kbroker/Kafka per protocol, and the machine's load average before and after (the
machine is shared; say so with the figures).
TLS takes sendfile away from a fetch on both brokers: records are encrypted in user space.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from compat.bench import drivers
from compat.bench.payload import payload_file
from compat.bench.workloads import RDK_P1
from compat.security.brokers import SecuredTarget, secured_target
from compat.security.certificates import Certificates, make_certificates
from compat.security.client_security import ClientSecurity

BROKERS = ("kbroker", "kafka")
PROTOCOLS = ("PLAINTEXT", "SSL")
TIMEOUT_S = 900.0


def client_config(protocol: str, certs: Certificates) -> dict[str, Any]:
    """librdkafka's settings for ``protocol`` (SSL: trust the run's CA, no client certificate)."""
    if protocol == "PLAINTEXT":
        return {}
    from compat.clients.confluent import librdkafka_security

    return dict(librdkafka_security(ClientSecurity("SSL", ca=certs.ca)))


def measure_broker(secured: SecuredTarget, run: int, certs: Certificates, payload: Path, produce_mib: int,
                   backlog_mib: int, warmup_mib: int) -> list[dict[str, Any]]:
    """P1 and P4 over each protocol on one started broker, after ``warmup_mib`` produced untimed
    over each (first connections, the JVM's JIT, page cache); one row per measurement."""
    target = secured.target
    admin = drivers.admin_client(target.bootstrap)
    rows = []
    for protocol in PROTOCOLS:
        topic = f"warmup-{protocol.lower()}"
        drivers.create_topic(admin, topic)
        drivers.rdk_produce(secured.address(protocol), topic, (warmup_mib << 20) // 1024, payload,
                            {**RDK_P1, **client_config(protocol, certs)}, TIMEOUT_S)  # fmt: skip
    for workload in ("P1", "P4"):
        if workload == "P4":
            drivers.create_topic(admin, "p4-backlog")
            drivers.rdk_produce(target.bootstrap, "p4-backlog", (backlog_mib << 20) // 1024, payload, RDK_P1,
                                TIMEOUT_S)  # fmt: skip
        for protocol in PROTOCOLS:
            bootstrap, config = secured.address(protocol), client_config(protocol, certs)
            if workload == "P1":
                topic = f"p1-{protocol.lower()}"
                drivers.create_topic(admin, topic)
                phase = drivers.rdk_produce(bootstrap, topic, (produce_mib << 20) // 1024, payload,
                                            {**RDK_P1, **config}, TIMEOUT_S)  # fmt: skip
            else:
                phase = drivers.rdk_consume(bootstrap, "p4-backlog", (backlog_mib << 20) // 1024, TIMEOUT_S, config)
            mb_s = phase.bytes / phase.seconds / 1e6
            row = {"broker": target.name, "run": run, "workload": workload, "protocol": protocol,
                   "mb_s": round(mb_s, 1), "seconds": round(phase.seconds, 2), "loadavg": os.getloadavg()[0]}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def summary(rows: list[dict[str, Any]]) -> str:
    """Medians per broker × workload × protocol and the ratios, as a markdown table."""
    med = {(b, w, p): statistics.median(r["mb_s"] for r in rows if (r["broker"], r["workload"], r["protocol"])
                                        == (b, w, p)) for b in BROKERS for w in ("P1", "P4") for p in PROTOCOLS}
    lines = ["| workload | broker | PLAINTEXT MB/s | SSL MB/s | SSL/PLAINTEXT |", "|---|---|---|---|---|"]
    for w in ("P1", "P4"):
        for b in BROKERS:
            plain, tls = med[(b, w, "PLAINTEXT")], med[(b, w, "SSL")]
            lines.append(f"| {w} | {b} | {plain:.1f} | {tls:.1f} | {tls / plain:.2f} |")
    lines += ["", "| workload | kbroker/Kafka PLAINTEXT | kbroker/Kafka SSL |", "|---|---|---|"]
    for w in ("P1", "P4"):
        ratios = [med[("kbroker", w, p)] / med[("kafka", w, p)] for p in PROTOCOLS]
        lines.append(f"| {w} | {ratios[0]:.2f} | {ratios[1]:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m compat.bench.ssl_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--produce-mib", type=int, default=1024, help="P1 MiB per protocol")
    parser.add_argument("--backlog-mib", type=int, default=1024, help="P4 backlog MiB")
    parser.add_argument("--warmup-mib", type=int, default=256, help="untimed MiB produced over each protocol first")
    parser.add_argument("--out", type=Path, help="write the rows and the summary as JSON here")
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kbroker-ssl-cost-") as tmp:
        root = Path(tmp)
        certs = make_certificates(root / "certs")
        payload = payload_file(root / "payloads", 1024)
        for run in range(args.runs):
            order = BROKERS if run % 2 == 0 else BROKERS[::-1]
            for kind in order:  # one broker at a time: the other's idle JVM or loop would still share the cores
                secured = secured_target(kind, root / f"{kind}-run{run}", certs)
                started = time.perf_counter()
                secured.target.start()
                print(f"{kind} run {run}: started in {time.perf_counter() - started:.1f} s", flush=True)
                try:
                    rows += measure_broker(secured, run, certs, payload, args.produce_mib, args.backlog_mib,
                                           args.warmup_mib)
                finally:
                    secured.target.close()
    table = summary(rows)
    load_after = os.getloadavg()
    print(table)
    print(f"load average before {load_before}, after {load_after} (2 cores, shared)")
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "summary": table, "loadavg_before": load_before,
                                        "loadavg_after": load_after}, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()

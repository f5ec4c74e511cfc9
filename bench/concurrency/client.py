#!/usr/bin/env python3
"""Load and measurement client of bench/concurrency/run.sh (standard library only).

  client.py run  --ports P1[,P2…] --policy P --key K --limit N --clients C --requests R
  client.py hold --port P --policy P --key K --count N      (takes N leases, prints "held", waits)
  client.py kill --port P --policy P --key K --limit N --ttl S

`run`: C clients, each on its own keep-alive HTTP/1.1 connection (clients split round-robin over
the ports, one `floodgate serve` instance per port), each making R lease attempts with a unique
reservation id: POST /v1/hit; on 200 it holds the lease 0–2 ms (uniform) and POSTs /v1/release; on
429 the denial is counted and the client makes its next attempt at once (no back-off, so the
denial path is measured as well). A sampler polls GET /v1/stats on its own connection in a tight
loop and keeps the largest `limit − remaining` (the store's view). The client-side count is the
number of leases between their 200 and the sending of their release: every such lease is still
held by the store, so it can never exceed the limit while the store is right. Prints one JSON line.

`kill`: starts a `hold` process, SIGKILLs it once it holds its leases, and polls /v1/stats until
every slot is free again; prints one JSON line with the time that took.
"""
import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time


class Conn:
    """One keep-alive HTTP/1.1 connection; one request at a time."""

    def __init__(self, port):
        self.port = port
        self.reader = None
        self.writer = None

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def request(self, method, target, body=b""):
        head = (f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
        self.writer.write(head.encode() + body)
        status_and_headers = await self.reader.readuntil(b"\r\n\r\n")
        status = int(status_and_headers[9:12])
        length = 0
        for line in status_and_headers.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
                break
        payload = await self.reader.readexactly(length) if length else b""
        return status, payload

    def close(self):
        if self.writer is not None:
            self.writer.close()


def cpu_seconds(pids):
    """User + system CPU seconds of these processes so far (from /proc)."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def body(policy, key, reservation):
    return json.dumps({"policy": policy, "key": key, "reservation": reservation}).encode()


async def remaining(conn, policy, key):
    status, payload = await conn.request("GET", f"/v1/stats?policy={policy}&key={key}")
    if status != 200:
        raise RuntimeError(f"/v1/stats answered {status}: {payload[:200]!r}")
    return json.loads(payload)["remaining"]


async def run(args):
    ports = [int(p) for p in args.ports.split(",")]
    state = {"held": 0, "max_held": 0, "max_store": 0, "admitted": 0, "denied": 0,
             "released": 0, "samples": 0, "done": False, "http": 0}

    async def client(index):
        conn = Conn(ports[index % len(ports)])
        await conn.open()
        try:
            for attempt in range(args.requests):
                lease = f"c{index}-{attempt}"
                status, payload = await conn.request("POST", "/v1/hit", body(args.policy, args.key, lease))
                state["http"] += 1
                if status == 429:
                    state["denied"] += 1
                    continue
                if status != 200:
                    raise RuntimeError(f"/v1/hit answered {status}: {payload[:200]!r}")
                state["admitted"] += 1
                state["held"] += 1
                state["max_held"] = max(state["max_held"], state["held"])
                await asyncio.sleep(random.uniform(0, 0.002))
                state["held"] -= 1  # before sending: the store may free it from now on
                status, payload = await conn.request("POST", "/v1/release", body(args.policy, args.key, lease))
                state["http"] += 1
                if status != 200:
                    raise RuntimeError(f"/v1/release answered {status}: {payload[:200]!r}")
                state["released"] += 1
        finally:
            conn.close()

    async def sampler():
        conns = []
        for port in ports:
            conn = Conn(port)
            await conn.open()
            conns.append(conn)
        try:
            while not state["done"]:
                for conn in conns:
                    out = args.limit - await remaining(conn, args.policy, args.key)
                    state["samples"] += 1
                    state["max_store"] = max(state["max_store"], out)
        finally:
            for conn in conns:
                conn.close()

    sampling = asyncio.create_task(sampler())
    servers = [int(p) for p in args.server_pids.split(",")] if args.server_pids else []
    servers_cpu0 = cpu_seconds(servers)
    cpu0, t0 = os.times(), time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(args.clients)))
    elapsed = time.perf_counter() - t0
    cpu1 = os.times()
    servers_cpu = cpu_seconds(servers) - servers_cpu0
    state["done"] = True
    await sampling
    client_cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    print(json.dumps({
        "storage": args.storage, "instances": len(ports), "clients": args.clients,
        "limit": args.limit, "requests": args.clients * args.requests,
        "admitted": state["admitted"], "denied": state["denied"], "denied_then": "counted, next attempt at once",
        "max_outstanding": state["max_store"], "max_outstanding_client": state["max_held"],
        "stats_samples": state["samples"], "http_requests": state["http"],
        "seconds": round(elapsed, 3), "ops_per_s": round(state["http"] / elapsed),
        "attempts_per_s": round(args.clients * args.requests / elapsed), "client": "python",
        "client_cpu_s": round(client_cpu, 2), "servers_cpu_s": round(servers_cpu, 2)}))


async def hold(args):
    conn = Conn(args.port)
    await conn.open()
    for i in range(args.count):
        status, payload = await conn.request("POST", "/v1/hit", body(args.policy, args.key, f"held-{os.getpid()}-{i}"))
        if status != 200:
            raise RuntimeError(f"/v1/hit answered {status}: {payload[:200]!r}")
    print("held", flush=True)
    await asyncio.sleep(3600)


async def kill(args):
    holder = subprocess.Popen([sys.executable, __file__, "hold", "--port", str(args.port), "--policy", args.policy,
                               "--key", args.key, "--count", str(args.limit)], stdout=subprocess.PIPE, text=True)
    if holder.stdout.readline().strip() != "held":
        holder.kill()
        raise RuntimeError("the holding client did not take its leases")
    conn = Conn(args.port)
    await conn.open()
    free_at_kill = await remaining(conn, args.policy, args.key)
    os.kill(holder.pid, signal.SIGKILL)
    killed = time.perf_counter()
    holder.wait()
    while True:
        left = await remaining(conn, args.policy, args.key)
        if left == args.limit:
            break
        if time.perf_counter() - killed > 10 * args.ttl + 5:
            raise RuntimeError("the leases of the killed client were never freed")
        await asyncio.sleep(0.005)
    freed = time.perf_counter() - killed
    conn.close()
    print(json.dumps({"kill": True, "storage": args.storage, "limit": args.limit,
                      "leases_held": args.limit - free_at_kill, "ttl_s": args.ttl,
                      "freed_after_s": round(freed, 3)}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["run", "hold", "kill"])
    parser.add_argument("--ports")
    parser.add_argument("--port", type=int)
    parser.add_argument("--storage", default="")
    parser.add_argument("--policy", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--count", type=int)
    parser.add_argument("--ttl", type=float)
    parser.add_argument("--server-pids", default="", help="floodgate and redis-server pids, for their CPU time")
    args = parser.parse_args()
    asyncio.run({"run": run, "hold": hold, "kill": kill}[args.mode](args))


if __name__ == "__main__":
    main()

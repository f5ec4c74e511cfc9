#!/usr/bin/python3
"""manifests_test.py --image ARCHIVE [--manifests DIR] [--self-check]

Renders the Kubernetes manifests with kubectl kustomize (or, without kubectl, which Debian 12 does
not package, with tests/packaging/kustomize.py's renderer of the subset they use) (DIR, packaging/kubernetes by default:
the base with the optional ServiceMonitor component; and overlays/redis, checked without running:
a Redis storage, two replicas or more, an autoscaler), checks that the base counts in memory on one
replica with no autoscaler, that the image tag is a valid tag, that a headless Service serves gRPC
and a NetworkPolicy lets the container ports in, and runs what the base's Deployment says as the
kubelet would, without a cluster:
- the container's root file system is the OCI image's (ARCHIVE, from scripts/package.sh), its
  volumes mounted over it as the kubelet lays them out (a ConfigMap's keys behind ..data links);
- its command and args (or the image's entrypoint and cmd), its env (values, ConfigMap keys; an
  optional Secret that the manifests do not hold is left out, as the kubelet leaves it out), as the
  pod's user (chroot --userspec), in a network namespace of its own with a pod address;
- then every probe it names — startup, readiness, liveness — on the port it names (a name is
  resolved through the container's ports) at the pod address, and the ServiceMonitor's path on
  the Service port it names, and a connection to each container port; a probe that is not
  answered 200–399, or whose port nothing declares or nothing listens on, fails the test; a gRPC
  probe calls grpc.health.v1's Check (raw protobuf bytes, Debian's python3-grpcio) and must get
  SERVING; exec probes fail (the image has no shell). Before running: the selectors of the Service, the PDB and the
  ServiceMonitor match, the HPA targets the Deployment, the container is non-root with a read-only
  root file system and CPU and memory requests.
--self-check: also runs the test on broken copies (a probe path the service lacks, a port name the
container lacks, a probe on the gRPC port, a service that listens on loopback only) and fails
unless each of them fails.
Needs root (chroot, a network namespace) and PyYAML (Debian's python3-yaml).
"""
import argparse
import copy
import gzip
import http.client
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kustomize  # noqa: E402  (tests/packaging/kustomize.py)

POD_IP = "10.244.0.10"
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # containerd's


class Failure(Exception):
    pass


def render(directory, components=()):
    """The manifests of kustomization `directory` as applied (kubectl kustomize, Debian's kubectl),
    with `components` added: a kustomization of the user's own that uses it as a resource."""
    with tempfile.TemporaryDirectory() as top:
        with open(os.path.join(top, "kustomization.yaml"), "w") as f:
            yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                            "resources": [os.path.relpath(directory, top)],
                            "components": [os.path.relpath(c, top) for c in components]}, f)
        if shutil.which("kubectl") is None:  # Debian 12 has no kubectl: the subset it renders
            try:
                return kustomize.build(top)
            except (kustomize.KustomizeError, OSError) as e:
                raise Failure(f"kustomize {directory}: {e}") from e
        out = subprocess.run(["kubectl", "kustomize", top], capture_output=True, text=True)
    if out.returncode != 0:
        raise Failure(f"kubectl kustomize {directory}: {out.stderr.strip()}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def load(directory):
    """The base as `kubectl apply -k DIRECTORY` applies it, with the optional ServiceMonitor."""
    return None, render(directory, [os.path.join(directory, "components", "servicemonitor")])


def storage_of(docs):
    cm = one(docs, "ConfigMap")
    return yaml.safe_load(cm["data"]["floodgate.yaml"]).get("storage", "memory")


def check_variants(directory):
    """What each variant promises: the base (what `kubectl apply -k DIRECTORY` applies) counts in
    memory on one replica without an autoscaler, and without the ServiceMonitor, whose CRD a
    cluster may lack; overlays/redis shares a Redis and scales. Returns a line per variant."""
    lines = []
    base = render(directory)
    deployment = one(base, "Deployment")
    if storage_of(base) != "memory" or deployment["spec"].get("replicas", 1) != 1:
        raise Failure("the base: storage memory on one replica (each pod would count alone)")
    for kind in ("HorizontalPodAutoscaler", "ServiceMonitor", "PodDisruptionBudget"):
        if any(d.get("kind") == kind for d in base):
            raise Failure(f"the base has a {kind}")
    lines.append(f"base: storage {storage_of(base)}, 1 replica, no autoscaler, no ServiceMonitor")
    redis = render(os.path.join(directory, "overlays", "redis"),
                   [os.path.join(directory, "components", "servicemonitor")])
    check_static(redis)
    replicas = one(redis, "Deployment")["spec"].get("replicas", 1)
    hpa = one(redis, "HorizontalPodAutoscaler")["spec"]
    if not storage_of(redis).startswith("redis") or replicas < 2 or hpa["minReplicas"] < 2:
        raise Failure("overlays/redis: a Redis storage and at least two replicas")
    lines.append(f"overlays/redis: storage {storage_of(redis)}, {replicas} replicas, "
                 f"autoscaled {hpa['minReplicas']}-{hpa['maxReplicas']}")
    return lines


def one(docs, kind):
    found = [d for d in docs if d.get("kind") == kind]
    if len(found) != 1:
        raise Failure(f"expected one {kind}, found {len(found)}")
    return found[0]


def matches(selector, labels, what):
    for k, v in selector.items():
        if labels.get(k) != v:
            raise Failure(f"{what}: selector {k}={v} does not match the pod's labels {labels}")


def container_port(container, port, what):
    """A probe's or a Service's port (a number or a name) as the container's port number."""
    ports = container.get("ports", [])
    if isinstance(port, int):
        return port
    for p in ports:
        if p.get("name") == port:
            return p["containerPort"]
    raise Failure(f"{what}: port {port!r} is not a port of container {container['name']} "
                  f"({[p.get('name') for p in ports]})")


def check_static(docs):
    deployment = one(docs, "Deployment")
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    matches(deployment["spec"]["selector"]["matchLabels"], labels, "Deployment")
    [container] = [c for c in pod["spec"]["containers"] if c["name"] == "floodgate"]
    ctx = {**pod["spec"].get("securityContext", {}), **container.get("securityContext", {})}
    if not ctx.get("runAsNonRoot") or ctx.get("runAsUser", 0) == 0:
        raise Failure("the container may run as root (runAsNonRoot, runAsUser)")
    if not ctx.get("readOnlyRootFilesystem"):
        raise Failure("the root file system is writable (readOnlyRootFilesystem)")
    if ctx.get("allowPrivilegeEscalation", True):
        raise Failure("allowPrivilegeEscalation is not false")
    requests = container.get("resources", {}).get("requests", {})
    if not {"cpu", "memory"} <= set(requests):
        raise Failure("the container has no CPU and memory requests (the HPA's utilization needs CPU's)")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if probe not in container:
            raise Failure(f"the container has no {probe}")

    image = container["image"]
    tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
    if not tag or len(tag) > 128 or not all(c.isalnum() or c in "_.-" for c in tag) or tag[0] in ".-":
        raise Failure(f"image {image!r}: its tag is not a valid tag ([A-Za-z0-9_][A-Za-z0-9_.-]*)")
    services = [d for d in docs if d.get("kind") == "Service"]
    if not services:
        raise Failure("no Service")
    for service in services:
        matches(service["spec"]["selector"], labels, f"Service {service['metadata']['name']}")
        for p in service["spec"]["ports"]:
            container_port(container, p.get("targetPort", p["port"]), f"Service port {p.get('name')}")
    if not any(s["spec"].get("clusterIP") == "None" for s in services):
        raise Failure("no headless Service for gRPC (a ClusterIP balances per connection)")
    policy = one(docs, "NetworkPolicy")
    matches(policy["spec"]["podSelector"]["matchLabels"], labels, "NetworkPolicy")
    allowed = {p["port"] for rule in policy["spec"].get("ingress", []) for p in rule.get("ports", [])}
    for p in container.get("ports", []):
        if p["containerPort"] not in allowed and p["name"] not in allowed:
            raise Failure(f"NetworkPolicy: container port {p['name']} ({p['containerPort']}) is not let in")
    for pdb in [d for d in docs if d.get("kind") == "PodDisruptionBudget"]:
        matches(pdb["spec"]["selector"]["matchLabels"], labels, "PodDisruptionBudget")
    for hpa in [d for d in docs if d.get("kind") == "HorizontalPodAutoscaler"]:
        target = hpa["spec"]["scaleTargetRef"]
        if (target["kind"], target["name"]) != ("Deployment", deployment["metadata"]["name"]):
            raise Failure(f"HorizontalPodAutoscaler targets {target}")
    scrapes = []
    for monitor in [d for d in docs if d.get("kind") == "ServiceMonitor"]:
        for e in monitor["spec"]["endpoints"]:
            ports = [(s, p) for s in services for p in s["spec"]["ports"] if p.get("name") == e["port"]]
            for service, _ in ports:
                matches(monitor["spec"]["selector"]["matchLabels"], service["metadata"].get("labels", {}),
                        "ServiceMonitor")
            if not ports:
                raise Failure(f"ServiceMonitor: port {e['port']!r} is not a port of a Service")
            sp = ports[0][1]
            scrapes.append((container_port(container, sp.get("targetPort", sp["port"]), "ServiceMonitor"),
                            e.get("path", "/metrics")))
    one(docs, "ConfigMap")
    return pod, container, scrapes


def extract_image(archive, root):
    """The image's root file system into `root`; returns its config (entrypoint, cmd, env)."""
    with tarfile.open(archive) as oci:
        index = json.loads(oci.extractfile("index.json").read())
        digest = index["manifests"][0]["digest"].split(":")[1]
        manifest = json.loads(oci.extractfile(f"blobs/sha256/{digest}").read())
        config = json.loads(oci.extractfile("blobs/sha256/" + manifest["config"]["digest"].split(":")[1]).read())
        for layer in manifest["layers"]:
            data = oci.extractfile("blobs/sha256/" + layer["digest"].split(":")[1]).read()
            if layer["mediaType"].endswith("+gzip"):
                data = gzip.decompress(data)
            with tarfile.open(fileobj=io.BytesIO(data)) as t:
                t.extractall(root, numeric_owner=True)
    return config["config"]


def mount_config_map(root, mount_path, config_map, items):
    """A ConfigMap volume as the kubelet writes it: the keys in a dated directory, ..data linking
    to it, and each top-level name linking through ..data."""
    target = root + mount_path
    if os.path.lexists(target):
        shutil.rmtree(target) if os.path.isdir(target) and not os.path.islink(target) else os.remove(target)
    dated = "..2026_01_01_00_00_00.000000001"
    data = config_map.get("data", {})
    pairs = [(i["key"], i["path"]) for i in items] if items else [(k, k) for k in data]
    for key, path in pairs:
        if key not in data:
            raise Failure(f"ConfigMap {config_map['metadata']['name']} has no key {key!r}")
        file = os.path.join(target, dated, path)
        os.makedirs(os.path.dirname(file), exist_ok=True)
        with open(file, "w") as f:
            f.write(data[key])
        os.chmod(file, 0o644)
    os.symlink(dated, os.path.join(target, "..data"))
    for top in sorted({p.split("/")[0] for _, p in pairs}):
        os.symlink(os.path.join("..data", top), os.path.join(target, top))
    for d, _, _ in os.walk(target):
        os.chmod(d, 0o755)


def environment(container, docs, image_env):
    env = {"PATH": DEFAULT_PATH, "HOSTNAME": "floodgate-test"}
    env.update(e.split("=", 1) for e in image_env or [])
    config_maps = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"}
    secrets = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "Secret"}
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = str(e["value"])
            continue
        ref = e.get("valueFrom", {})
        if "configMapKeyRef" in ref or "secretKeyRef" in ref:
            r = ref.get("configMapKeyRef") or ref["secretKeyRef"]
            source = (config_maps if "configMapKeyRef" in ref else secrets).get(r["name"])
            data = (source or {}).get("data", source and source.get("stringData")) or {}
            if r["key"] in data:
                env[e["name"]] = data[r["key"]]
            elif not r.get("optional"):
                raise Failure(f"env {e['name']}: {r['name']}/{r['key']} is not in the manifests and not optional")
        elif "fieldRef" in ref:
            env[e["name"]] = {"status.podIP": POD_IP, "metadata.name": "floodgate-test",
                              "metadata.namespace": "default"}.get(ref["fieldRef"]["fieldPath"], "")
        else:
            raise Failure(f"env {e['name']}: {list(ref)} is not simulated here")
    return env


def call(probe, container, what):
    handler = next((probe[k] for k in ("httpGet", "tcpSocket", "grpc") if k in probe), None)
    port = container_port(container, handler["port"] if handler else None, what)
    timeout = probe.get("timeoutSeconds", 1)
    if "httpGet" in probe:
        h = probe["httpGet"]
        conn = http.client.HTTPConnection(h.get("host", POD_IP), port, timeout=timeout)
        try:
            conn.request("GET", h.get("path", "/"), headers={x["name"]: x["value"] for x in h.get("httpHeaders", [])})
            status = conn.getresponse().status
        except OSError as e:
            return f"GET {h.get('path', '/')} on port {port}: {e}"
        except http.client.HTTPException as e:
            return f"GET {h.get('path', '/')} on port {port}: not an HTTP/1 answer ({type(e).__name__})"
        finally:
            conn.close()
        return None if 200 <= status < 400 else f"GET {h.get('path', '/')} on port {port}: HTTP {status}"
    if "tcpSocket" in probe:
        try:
            socket.create_connection((POD_IP, port), timeout=timeout).close()
            return None
        except OSError as e:
            return f"TCP port {port}: {e}"
    if "grpc" in probe:
        # grpc.health.v1.Health/Check with raw protobuf bytes: the request's field 1 is the
        # service name; SERVING is the reply's field 1 = 1 (08 01).
        try:
            import grpc
        except ImportError:
            return "a gRPC probe needs Debian's python3-grpcio (scripts/deps.sh --test)"
        service = probe["grpc"].get("service", "").encode()
        request = (b"\x0a" + bytes([len(service)]) + service) if service else b""
        channel = grpc.insecure_channel(f"{POD_IP}:{port}")
        try:
            check = channel.unary_unary("/grpc.health.v1.Health/Check", request_serializer=lambda b: b,
                                        response_deserializer=lambda b: b)
            reply = check(request, timeout=timeout)
        except grpc.RpcError as e:
            return f"gRPC health Check on port {port}: {e.code().name}"
        finally:
            channel.close()
        return None if reply == b"\x08\x01" else f"gRPC health Check on port {port}: not SERVING ({reply!r})"
    return f"{list(probe)}: the image has no shell or tools for an exec probe"


def listening():
    """Whether a socket listens in this network namespace (state 0A in /proc/net/tcp{,6})."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            if any(line.split()[3] == "0A" for line in f.readlines()[1:]):
                return True
    return False


def run(docs, image, work):
    """Runs the Deployment of `docs` in `work`; `image` is (the image's root, its config)."""
    pod, container, scrapes = check_static(docs)
    root = os.path.join(work, "rootfs")
    subprocess.run(["cp", "-al", image[0], root], check=True)  # the mounts below replace, never write through
    image_config = image[1]
    config_maps = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"}
    volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    ctx = {**pod["spec"].get("securityContext", {}), **container.get("securityContext", {})}
    uid, gid = ctx["runAsUser"], ctx.get("runAsGroup", ctx["runAsUser"])
    for m in container.get("volumeMounts", []):
        v = volumes.get(m["name"])
        if v is None:
            raise Failure(f"volumeMount {m['name']}: no such volume")
        if "configMap" in v:
            cm = config_maps.get(v["configMap"]["name"])
            if cm is None:
                raise Failure(f"volume {m['name']}: ConfigMap {v['configMap']['name']} is not in the manifests")
            mount_config_map(root, m["mountPath"], cm, v["configMap"].get("items"))
        elif "emptyDir" in v:
            os.makedirs(root + m["mountPath"], exist_ok=True)
            os.chown(root + m["mountPath"], uid, gid)
        else:
            raise Failure(f"volume {m['name']}: {list(v)} is not simulated here")
    argv = container.get("command") or image_config.get("Entrypoint") or []
    argv = argv + (container.get("args") if "args" in container or "command" in container
                   else image_config.get("Cmd") or [])
    env = environment(container, docs, image_config.get("Env"))
    log = open(os.path.join(work, "log"), "w+")
    proc = subprocess.Popen(["chroot", f"--userspec={uid}:{gid}", root] + argv, env=env,
                            stdout=log, stderr=subprocess.STDOUT, cwd="/")
    try:
        # Started: the process listens (the namespace holds nothing else). Then the first probe
        # gets a few seconds to pass, not its whole budget: a probe that fails here fails forever.
        first = container.get("startupProbe") or container["readinessProbe"]
        budget = min(first.get("failureThreshold", 3) * first.get("periodSeconds", 10), 30)
        deadline = time.monotonic() + budget
        while not listening() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        deadline = min(deadline, time.monotonic() + 2)
        while True:
            error = call(first, container, "startupProbe")
            if error is None:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise Failure(f"startupProbe never passed ({error})")
            time.sleep(0.1)
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            error = call(container[kind], container, kind)
            if error:
                raise Failure(f"{kind}: {error}")
        for p in container.get("ports", []):  # what the Service routes to must listen
            error = call({"tcpSocket": {"port": p["containerPort"]}}, container, "ports")
            if error:
                raise Failure(f"container port {p.get('name', p['containerPort'])}: {error}")
        for port, path in scrapes:
            error = call({"httpGet": {"path": path, "port": port}}, container, "ServiceMonitor")
            if error:
                raise Failure(f"ServiceMonitor: {error}")
        if proc.poll() is not None:
            raise Failure(f"the service exited ({proc.returncode})")
        proc.send_signal(signal.SIGTERM)
        grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
        try:
            rc = proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            raise Failure(f"still running {grace} s (terminationGracePeriodSeconds) after SIGTERM")
        if rc != 0:
            raise Failure(f"exit code {rc} after SIGTERM")
    except Failure as e:
        log.seek(0)
        raise Failure(f"{e}\n  command: {argv}\n" + "".join("  | " + l for l in log.readlines()[-10:]))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    def describe(probe):
        if "httpGet" in probe:
            return f"{probe['httpGet']['path']} on {probe['httpGet']['port']}"
        if "grpc" in probe:
            return f"gRPC health on {probe['grpc']['port']}"
        return str(list(probe))
    probes = ", ".join(f"{k} {describe(container[k])}" for k in ("startupProbe", "readinessProbe", "livenessProbe"))
    ports = ", ".join(f"{p.get('name')} {p['containerPort']}" for p in container.get("ports", []))
    return (f"{' '.join(argv)} as {uid}:{gid}: {probes}, container ports ({ports}) listening, "
            f"ServiceMonitor {[p for _, p in scrapes]}: ok")


def broken_copies(manifests):
    """(what is broken, docs) pairs: each must fail the test."""
    _, docs = load(manifests)

    def variant(what, change):
        d = copy.deepcopy(docs)
        c = one(d, "Deployment")["spec"]["template"]["spec"]["containers"][0]
        change(d, c)
        return what, d

    def listen_loopback(d, c):
        cm = one(d, "ConfigMap")
        text = cm["data"]["floodgate.yaml"]
        cm["data"]["floodgate.yaml"] = text.replace("listen: 0.0.0.0:8080", "listen: 127.0.0.1:8080")
        assert cm["data"]["floodgate.yaml"] != text

    return [
        variant("readinessProbe on /ready (no such path)",
                lambda d, c: c["readinessProbe"]["httpGet"].update(path="/ready")),
        variant("livenessProbe on port 'metrics' (no such port name)",
                lambda d, c: c["livenessProbe"]["httpGet"].update(port="metrics")),
        variant("startupProbe's gRPC health check on the HTTP port",
                lambda d, c: c["startupProbe"]["grpc"].update(port=8080)),
        variant("the service listening on loopback only (the kubelet probes the pod's address)", listen_loopback),
        variant("an image tag with '+' (a version's build metadata, no tag character)",
                lambda d, c: c.update(image="floodgate:0.1.0-dev.508+g4c434ec")),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", required=True)
    parser.add_argument("--manifests", default=os.path.join(HERE, "..", "..", "packaging", "kubernetes"))
    parser.add_argument("--self-check", action="store_true")
    args = parser.parse_args()
    if os.environ.get("FLOODGATE_MANIFESTS_NETNS") != "1":  # a network namespace with a pod address
        os.environ["FLOODGATE_MANIFESTS_NETNS"] = "1"
        os.execv(sys.executable, [sys.executable, os.path.join(HERE, "in_netns.py"), "--pod-ip", POD_IP,
                                  sys.executable, os.path.abspath(__file__)] + sys.argv[1:])
    with tempfile.TemporaryDirectory() as base:
        image = (os.path.join(base, "image"), extract_image(os.path.abspath(args.image), os.path.join(base, "image")))
        try:
            for line in check_variants(args.manifests):
                print("manifests:", line)
            _, docs = load(args.manifests)
            with tempfile.TemporaryDirectory() as work:
                print("manifests:", run(docs, image, work))
        except Failure as e:
            sys.exit(f"manifests: FAIL {e}")
        if args.self_check:
            for what, docs in broken_copies(args.manifests):
                with tempfile.TemporaryDirectory() as work:
                    try:
                        run(docs, image, work)
                    except Failure as e:
                        print(f"manifests self-check: a broken copy fails, as it must: {what}: "
                              f"{str(e).splitlines()[0]}")
                        continue
                sys.exit(f"manifests self-check: FAIL the test passed a broken copy: {what}")


if __name__ == "__main__":
    main()

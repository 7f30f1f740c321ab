#!/usr/bin/env python3
"""Checks the Kubernetes manifests: valid YAML, and the fields a DaemonSet
needs and that roce-route relies on; probe-job.yaml's Jobs likewise. Prints the command lines of the init
container and the main container as JSON (for tests/deploy.rs to run them
outside a container). Exit 1 with a message on the first problem."""

import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def fail(msg: str) -> None:
    print(f"deploy/kubernetes: {msg}", file=sys.stderr)
    sys.exit(1)


def main() -> None:
    docs = []
    for name in ("configmap.yaml", "daemonset.yaml"):
        try:
            docs += [d for d in yaml.safe_load_all((HERE / name).read_text()) if d]
        except yaml.YAMLError as e:
            fail(f"{name} is not valid YAML: {e}")
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d.get("kind"), []).append(d)
    ds = (by_kind.get("DaemonSet") or [None])[0]
    cm = (by_kind.get("ConfigMap") or [None])[0]
    if ds is None or cm is None:
        fail("a DaemonSet and a ConfigMap are needed")
    if ds.get("apiVersion") != "apps/v1":
        fail("the DaemonSet's apiVersion must be apps/v1")
    spec = ds["spec"]
    tmpl = spec["template"]
    labels = tmpl["metadata"]["labels"]
    for k, v in spec["selector"]["matchLabels"].items():
        if labels.get(k) != v:
            fail(f"selector {k}={v} does not select the pod template")
    pod = tmpl["spec"]
    if pod.get("hostNetwork") is not True:
        fail("hostNetwork must be true: roce-route works on the node's routing tables")
    if not pod.get("nodeSelector"):
        fail("a nodeSelector for the GPU nodes is needed")
    volumes = {v["name"]: v for v in pod["volumes"]}
    if volumes.get("config", {}).get("configMap", {}).get("name") != cm["metadata"]["name"]:
        fail("the config volume must be the ConfigMap")
    commands = {}
    for c in pod.get("initContainers", []) + pod["containers"]:
        if not c.get("securityContext", {}).get("privileged"):
            fail(f"container {c['name']} must be privileged (routes, rules, /proc/sys/net)")
        for m in c.get("volumeMounts", []):
            if m["name"] not in volumes:
                fail(f"container {c['name']} mounts an unknown volume {m['name']}")
        if not any(m["mountPath"] == "/etc/roce-route" for m in c.get("volumeMounts", [])):
            fail(f"container {c['name']} does not mount the config at /etc/roce-route")
        if not c["command"] or c["command"][0] != "/usr/sbin/roce-route":
            fail(f"container {c['name']} must run /usr/sbin/roce-route itself: the image has no shell")
        commands[c["name"]] = c["command"]
    if commands.get("watch") != ["/usr/sbin/roce-route", "watch"]:
        fail("the main container must run `roce-route watch`")
    if cm["metadata"].get("namespace") != ds["metadata"].get("namespace"):
        fail("the ConfigMap and the DaemonSet must be in one namespace")
    if not any(k.endswith(".toml") for k in cm["data"]):
        fail("the ConfigMap holds no *.toml file")
    check_probe_jobs(ds, "probe-job.yaml", set())
    check_probe_jobs(ds, "probe-job-rdma.yaml", {"roce-route-probe-peers"})
    print(json.dumps(commands))


def check_probe_jobs(ds: dict, name: str, other_maps: set) -> None:
    """probe-job.yaml: Jobs of roce-route probe on chosen nodes, with the
    DaemonSet's image and namespace, and the ConfigMaps they mount
    (defined there, or in `other_maps`). probe-job-rdma.yaml: the same,
    with the RDMA image (the DaemonSet's tag, roce-route-rdma), --rdma or
    --listen, /dev/infiniband and IPC_LOCK."""
    rdma = name == "probe-job-rdma.yaml"
    try:
        docs = [d for d in yaml.safe_load_all((HERE / name).read_text()) if d]
    except yaml.YAMLError as e:
        fail(f"{name} is not valid YAML: {e}")
    maps = {d["metadata"]["name"] for d in docs if d.get("kind") == "ConfigMap"}
    maps.add("roce-route-config")
    maps |= other_maps
    jobs = [d for d in docs if d.get("kind") == "Job"]
    if not jobs:
        fail(f"{name} holds no Job")
    image = ds["spec"]["template"]["spec"]["containers"][0]["image"]
    if rdma:
        image = image.replace("roce-route:", "roce-route-rdma:", 1)
    namespace = ds["metadata"].get("namespace")
    for job in jobs:
        where = f"{name}: Job {job['metadata']['name']}"
        if job.get("apiVersion") != "batch/v1":
            fail(f"{where}: apiVersion must be batch/v1")
        if job["metadata"].get("namespace") != namespace:
            fail(f"{where}: must be in the DaemonSet's namespace {namespace}")
        pod = job["spec"]["template"]["spec"]
        if pod.get("hostNetwork") is not True:
            fail(f"{where}: hostNetwork must be true: probe works on the node's own rails")
        if pod.get("restartPolicy") not in ("Never", "OnFailure"):
            fail(f"{where}: restartPolicy must be Never or OnFailure")
        if not pod.get("nodeSelector") and not pod.get("affinity", {}).get("nodeAffinity"):
            fail(f"{where}: a nodeSelector or a nodeAffinity chooses the nodes")
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for v in volumes.values():
            if "configMap" in v and v["configMap"]["name"] not in maps:
                fail(f"{where}: volume {v['name']} is a ConfigMap that is not defined")
        for c in pod["containers"]:
            sc = c.get("securityContext", {})
            caps = set(sc.get("capabilities", {}).get("add", []))
            if not sc.get("privileged") and not {"NET_RAW", "NET_ADMIN"} <= caps:
                fail(f"{where}: container {c['name']} must be privileged or add NET_RAW and NET_ADMIN")
            if c.get("image") != image:
                fail(f"{where}: container {c['name']} must run the image {image}")
            cmd = c.get("command", [])
            if cmd[:1] != ["/usr/sbin/roce-route"] or "probe" not in cmd:
                fail(f"{where}: container {c['name']} must run /usr/sbin/roce-route ... probe")
            if "--self" not in cmd and "--listen" not in cmd and "--peers" not in cmd and "--peer" not in cmd:
                fail(f"{where}: container {c['name']} names no peers (--peers, --peer) and is not --self or --listen")
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
            if rdma:
                if "--rdma" not in cmd and "--listen" not in cmd:
                    fail(f"{where}: container {c['name']} runs neither probe --rdma nor probe --listen")
                dev = volumes.get(mounts.get("/dev/infiniband", ""), {})
                if dev.get("hostPath", {}).get("path") != "/dev/infiniband" or not sc.get("privileged"):
                    fail(f"{where}: container {c['name']} needs the host's /dev/infiniband, privileged")
                if "IPC_LOCK" not in caps:
                    fail(f"{where}: container {c['name']} registers memory: add IPC_LOCK")
            for path, vol in mounts.items():
                if vol not in volumes:
                    fail(f"{where}: container {c['name']} mounts an unknown volume {vol}")
            for i, word in enumerate(cmd):
                if word == "--peers" and not any(cmd[i + 1].startswith(p.rstrip("/") + "/") for p in mounts):
                    fail(f"{where}: --peers {cmd[i + 1]} is on no mounted volume")


if __name__ == "__main__":
    main()
